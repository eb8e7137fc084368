"""File formats and stores a tensordict reads from and writes to.

Each format lives in its own module and imports its library (h5py, zarr, pyarrow, pandas,
safetensors) only when it is used: :func:`require` turns a missing library into a
:class:`~tensordict.errors.MissingDependencyError` that names the extra to install.

* ``persistent``: :class:`PersistentTensorDict`, a tensordict whose entries live in a HDF5 file
  (``h5``) or a Zarr store (``zarr``), read lazily: indexing reads only the rows asked for.
* ``tables``: Arrow tables, Parquet, pandas, CSV and JSON.
* ``safetensors``: safetensors checkpoints.
* ``struct``: numpy structured arrays.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from tensordict.errors import MissingDependencyError

__all__ = ["has_module", "require"]


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
