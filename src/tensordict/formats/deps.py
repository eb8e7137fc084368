"""What a format needs before it reads: its library (imported when the format is used, naming
the extra to install if missing) and, for a reader, its file."""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
from types import ModuleType
from typing import Any

from tensordict.errors import MissingDependencyError

__all__ = ["has_module", "require", "require_file"]


def has_module(name: str) -> bool:
    """Whether the module ``name`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``, or raise an error naming the extra to install.

    Args:
        module: the module to import (``"h5py"``, ``"zarr"``, ...).
        extra: the optional extra of tensordict that installs it (``"h5"``, ``"zarr"``, ...).
        feature: what the caller was doing, for the message.

    Raises:
        MissingDependencyError: the module is not installed.

    Examples:
        >>> require("json", "none", "reading JSON").__name__
        'json'
        >>> require("no_such_module_xyz", "h5", "reading HDF5 files")
        Traceback (most recent call last):
        ...
        tensordict.errors.MissingDependencyError: reading HDF5 files needs no_such_module_xyz...
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingDependencyError(
            f"{feature} needs {module}, which is not installed ({err}). Install it with "
            f'pip install "tensordict[{extra}]" (or pip install {module}).'
        ) from err


def require_file(path: Any, what: str) -> None:
    """Raise a short :class:`FileNotFoundError` naming ``path`` if it is a local path (a ``str``
    or ``os.PathLike``, not a URL) where nothing exists, before a library raises its own from
    deep inside. Anything else (a URL, an open file, a store object) is left to the library.

    Args:
        path: what the user passed as the file.
        what: what was being read, for the message (``"HDF5 file"``, ...).

    Examples:
        >>> require_file("/", "folder")
        >>> require_file("s3://bucket/table.parquet", "Parquet file")  # not local: not checked
        >>> require_file("/no/such/file.h5", "HDF5 file")
        Traceback (most recent call last):
        ...
        FileNotFoundError: [Errno 2] No such HDF5 file: '/no/such/file.h5'
    """
    if not isinstance(path, (str, os.PathLike)):
        return
    text = os.fspath(path)
    if not isinstance(text, str) or "://" in text or os.path.exists(text):
        return
    raise FileNotFoundError(errno.ENOENT, f"No such {what}", text)
