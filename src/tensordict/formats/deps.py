"""Importing a format's library when the format is used, naming the extra to install if missing."""

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
