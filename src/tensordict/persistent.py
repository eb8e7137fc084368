"""Upstream's import path ``tensordict.persistent``: the HDF5/Zarr-backed tensordict.

The code lives in :mod:`tensordict.formats.persistent`.
"""

from tensordict.formats.deps import has_module
from tensordict.formats.persistent import PersistentTensorDict

__all__ = ["PersistentTensorDict"]

#: whether h5py (the ``h5`` extra) is installed
_has_h5 = has_module("h5py")
