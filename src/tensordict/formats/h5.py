"""HDF5 groups for :class:`PersistentTensorDict`, read and written with h5py.

The layout is upstream tensordict's: a nested tensordict is a group, a tensor a dataset, a string
a scalar string dataset marked ``__tensordict_str__``, one string per element a string dataset
marked ``__tensordict_stack__`` (its batch shape). The batch size and dimension names are kept
in the group attribute ``__tensordict__`` (JSON); files without it get the batch size inferred.
"""

from __future__ import annotations

import json
import os
import weakref
from typing import Any

import numpy as np
import torch

from tensordict.errors import FormatValueError
from tensordict.formats.deps import require, require_file
from tensordict.formats.node import META_ATTR, GroupNode, to_numpy

__all__ = ["H5Group", "h5py", "open_h5"]

STR_ATTR = "__tensordict_str__"
STACK_ATTR = "__tensordict_stack__"


def h5py() -> Any:
    """The h5py module, or an error naming the ``h5`` extra."""
    return require("h5py", "h5", "reading and writing HDF5 files")


#: files open in this process, by real path: HDF5 refuses to open a file twice in one process
#: with different locking flags, so a file unpickled where it is already open shares the handle
_OPEN: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def open_h5(filename: Any, mode: str, locking: bool | None = None) -> H5Group:
    """Open (or create, with mode ``"w"``/``"a"``) a HDF5 file; its root group."""
    lib = h5py()
    path = os.path.realpath(str(filename))
    if mode in ("r", "r+"):
        current = _OPEN.get(path)
        if current is not None and current.id.valid and (mode == "r" or current.mode == "r+"):
            return H5Group(current)
    if mode in ("r", "r+"):
        require_file(filename, "HDF5 file")
    kwargs = {} if locking is None else {"locking": locking}
    file = lib.File(str(filename), mode, **kwargs)
    _OPEN[path] = file
    return H5Group(file)


def reopen(spec: tuple[Any, ...], mode: str, locking: bool | None = None) -> H5Group:
    _, filename, path = spec
    root = open_h5(filename, mode, locking)
    return root if path == "/" else H5Group(root.group[path])


def _torch(array: Any) -> torch.Tensor:
    array = np.asarray(array)
    if array.dtype.byteorder == ">" or not array.flags.writeable:
        array = array.astype(array.dtype.newbyteorder("="), copy=True)
    return torch.from_numpy(np.ascontiguousarray(array).reshape(array.shape))  # keeps 0-d 0-d


class H5Group(GroupNode):
    """A h5py group (the root group is the file itself)."""

    backend = "h5"

    def __init__(self, group: Any) -> None:
        self.group = group
        self.file = group.file

    # ------------------------------------------------------------------ structure
    def list_keys(self) -> list[str]:
        return list(self.group.keys())

    def kind(self, key: str) -> str | None:
        obj = self.group.get(key)
        if obj is None:
            return None
        if isinstance(obj, h5py().Group):
            return "group"
        attrs = obj.attrs
        if STR_ATTR in attrs or STACK_ATTR in attrs or obj.dtype.kind in "OSU":
            return "non_tensor"
        return "array"

    def child(self, key: str) -> H5Group:
        return H5Group(self.group[key])

    def create_group(self, key: str) -> H5Group:
        return H5Group(self.group.create_group(key))

    def delete(self, key: str) -> None:
        del self.group[key]

    def move(self, old: str, new: str) -> None:
        self.group.move(old, new)

    def meta(self) -> dict[str, Any] | None:
        raw = self.group.attrs.get(META_ATTR)
        if raw is None:
            return None
        try:
            meta = json.loads(raw)
        except (TypeError, ValueError):
            return None
        return meta if isinstance(meta, dict) else None

    def set_meta(self, meta: dict[str, Any]) -> None:
        self.group.attrs[META_ATTR] = json.dumps(meta)

    # ------------------------------------------------------------------ arrays
    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self.group[key].shape)

    def dtype(self, key: str) -> torch.dtype:
        return _torch(np.empty(0, dtype=self.group[key].dtype)).dtype

    def read(self, key: str, region: tuple[Any, ...]) -> torch.Tensor:
        ds = self.group[key]
        if any(isinstance(r, np.ndarray) and r.size == 0 for r in region):
            region = tuple(slice(0, 0) if isinstance(r, np.ndarray) else r for r in region)
        return _torch(ds[region] if region else ds[()])

    def write(self, key: str, region: tuple[Any, ...], value: torch.Tensor) -> None:
        ds = self.group[key]
        ds[region if region else ()] = to_numpy(key, value.to(self.dtype(key)), "HDF5")

    def create_array(self, key: str, value: torch.Tensor, **kwargs: Any) -> None:
        data = to_numpy(key, value, "HDF5")
        if data.ndim == 0:  # chunking and compression apply to arrays only
            kwargs = {k: v for k, v in kwargs.items() if k not in _CHUNK_OPTIONS}
        self.group.create_dataset(key, data=data, **kwargs)

    def create_zeros(self, key: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        np_dtype = to_numpy(key, torch.empty(0, dtype=dtype), "HDF5").dtype
        self.group.create_dataset(key, shape=shape, dtype=np_dtype, fillvalue=0)

    # ------------------------------------------------------------------ python objects
    def read_non_tensor(self, key: str) -> tuple[Any, tuple[int, ...] | None]:
        ds = self.group[key]
        if STACK_ATTR in ds.attrs:
            values = ds.asstr()[()] if ds.dtype.kind == "O" else ds[()]
            return np.asarray(values, dtype=object), tuple(ds.shape)
        value = ds[()]
        return (
            value.item() if isinstance(value, np.generic) and value.dtype.kind != "S" else value
        ), None

    def write_non_tensor(
        self, key: str, value: Any, per_element: bool, allow_pickle: bool | None = None
    ) -> None:
        lib = h5py()
        if per_element:
            array = np.asarray(value, dtype=object)
            if not all(isinstance(v, str) for v in array.flat):
                raise FormatValueError(
                    f"cannot store {key!r} in HDF5: one python object per element is stored only "
                    "for strings. Convert the values to str, or to tensors."
                )
            ds = self.group.create_dataset(key, data=array, dtype=lib.string_dtype())
            ds.attrs[STACK_ATTR] = np.asarray(array.shape, dtype=np.int64)
            return
        if isinstance(value, bytes):
            value = value.decode()
        if isinstance(value, str):
            ds = self.group.create_dataset(key, data=value, dtype=lib.string_dtype())
            ds.attrs[STR_ATTR] = True
            return
        if isinstance(value, (bool, int, float, complex, np.generic)):
            self.group.create_dataset(key, data=value)
            return
        raise FormatValueError(
            f"cannot store {key!r} ({type(value).__name__}) in HDF5: python objects are stored "
            "only as strings and numbers. Convert it (e.g. json.dumps) or use a zarr store."
        )

    # ------------------------------------------------------------------ the file
    @property
    def filename(self) -> str:
        return str(self.file.filename)

    @property
    def path(self) -> str:
        return str(self.group.name)

    @property
    def mode(self) -> str:
        return str(self.file.mode)

    @property
    def handle(self) -> Any:
        return self.group

    def spec(self) -> tuple[Any, ...]:
        return ("h5", self.filename, self.path)

    def flush(self) -> None:
        if self.file.id.valid and self.file.mode != "r":
            self.file.flush()

    def close(self) -> None:
        if self.file.id.valid:
            self.file.close()


_CHUNK_OPTIONS = (
    "chunks",
    "compression",
    "compression_opts",
    "shuffle",
    "fletcher32",
    "scaleoffset",
)
