"""HDF5 groups for :class:`PersistentTensorDict`, read and written with h5py.

The layout is upstream tensordict's: a nested tensordict is a group, a tensor a dataset, a string
a scalar string dataset marked ``__tensordict_str__``, one string per element a string dataset
marked ``__tensordict_stack__`` (its batch shape). The batch size and dimension names are kept
in the group attribute ``__tensordict__`` (JSON); files without it get the batch size inferred.

A file never makes tensordict read another one unless the caller allows it
(``allow_external=True``): external links are refused before they are followed, and datasets
whose data lives elsewhere (external raw storage, virtual datasets) before they are read, with
:class:`~tensordict.errors.ExternalDataError`. Groups nest at most
:data:`~tensordict.memmap.format.MAX_DEPTH` levels and a soft link that leads back to a group
it is in is refused (no RecursionError). A dataset whose type has no torch counterpart (compound,
long double) is listed, and reading it raises an error naming it; the other entries read.
"""

from __future__ import annotations

import json
import os
import weakref
from typing import Any

import numpy as np
import torch

from tensordict.errors import ExternalDataError, FormatValueError
from tensordict.formats.deps import require, require_file
from tensordict.formats.node import META_ATTR, GroupNode, to_numpy
from tensordict.memmap.format import MAX_DEPTH

__all__ = ["H5Group", "h5py", "open_h5"]

STR_ATTR = "__tensordict_str__"
STACK_ATTR = "__tensordict_stack__"


def h5py() -> Any:
    """The h5py module, or an error naming the ``h5`` extra."""
    return require("h5py", "h5", "reading and writing HDF5 files")


#: files open in this process, by real path: HDF5 refuses to open a file twice in one process
#: with different locking flags, so a file unpickled where it is already open shares the handle
_OPEN: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def open_h5(
    filename: Any, mode: str, locking: bool | None = None, allow_external: bool = False
) -> H5Group:
    """Open (or create, with mode ``"w"``/``"a"``) a HDF5 file; its root group.

    A file already open in this process is shared only if it is still the file at that path
    (not one replaced since, e.g. by ``os.replace``).
    """
    lib = h5py()
    path = os.path.realpath(str(filename))
    if mode in ("r", "r+"):
        current = _OPEN.get(path)
        if (
            current is not None
            and current.id.valid
            and (mode == "r" or current.mode == "r+")
            and _is_file_at(current, path)
        ):
            return H5Group(current, allow_external=allow_external)
        require_file(filename, "HDF5 file")
    kwargs = {} if locking is None else {"locking": locking}
    file = lib.File(str(filename), mode, **kwargs)
    _OPEN[path] = file
    return H5Group(file, allow_external=allow_external)


def _is_file_at(file: Any, path: str) -> bool:
    """Whether the open ``file`` is the one at ``path`` now (same device and inode)."""
    try:
        mine = os.fstat(file.id.get_vfd_handle())
        there = os.stat(path)
    except (OSError, ValueError, TypeError, NotImplementedError):
        return False  # a driver without a descriptor, or no file there any more: open anew
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def reopen(spec: tuple[Any, ...], mode: str, locking: bool | None = None) -> H5Group:
    filename, path = spec[1], spec[2]
    allow_external = bool(spec[3]) if len(spec) > 3 else False
    root = open_h5(filename, mode, locking, allow_external)
    if path == "/":
        return root
    node = root
    for part in path.strip("/").split("/"):
        node = node.child(part)
    return node


def _torch(array: Any) -> torch.Tensor:
    array = np.asarray(array)
    if array.dtype.byteorder == ">" or not array.flags.writeable:
        array = array.astype(array.dtype.newbyteorder("="), copy=True)
    return torch.from_numpy(np.ascontiguousarray(array).reshape(array.shape))  # keeps 0-d 0-d


class H5Group(GroupNode):
    """A h5py group (the root group is the file itself); ``ancestors`` are the groups it is
    in (to refuse soft-link loops), ``allow_external`` whether data outside the file is read."""

    backend = "h5"

    def __init__(
        self, group: Any, ancestors: tuple[Any, ...] = (), allow_external: bool = False
    ) -> None:
        self.group = group
        self.file = group.file
        self.ancestors = ancestors
        self.allow_external = allow_external

    def _where(self, key: str) -> str:
        return f"the HDF5 entry {self.group.name.rstrip('/')}/{key} of {self.file.filename}"

    # ------------------------------------------------------------------ structure
    def list_keys(self) -> list[str]:
        return list(self.group.keys())

    def _get(self, key: str) -> Any:
        """The object ``key`` names, after checking the link (an external link is refused
        before it is followed, a dangling soft link raises)."""
        link = self.group.get(key, getlink=True)
        if link is None:
            return None
        lib = h5py()
        if isinstance(link, lib.ExternalLink) and not self.allow_external:
            raise ExternalDataError(
                f"{self._where(key)} is an external link to {link.path!r} in the file "
                f"{link.filename!r}: following it reads another file. Pass "
                "allow_external=True to from_h5 if you trust where this file came from."
            )
        obj = self.group.get(key)
        if obj is None:
            raise FormatValueError(
                f"{self._where(key)} is a link to {getattr(link, 'path', '?')!r}, which does "
                "not exist (a dangling link). Remove it, or point it to an entry."
            )
        return obj

    def kind(self, key: str) -> str | None:
        if self.group.get(key, getlink=True) is None:
            return None
        obj = self._get(key)
        if isinstance(obj, h5py().Group):
            return "group"
        attrs = obj.attrs
        if STR_ATTR in attrs or STACK_ATTR in attrs or obj.dtype.kind in "OSU":
            return "non_tensor"
        if _torch_dtype(obj.dtype) is None:
            return "non_tensor"  # listed; reading it raises, naming it (see read_non_tensor)
        return "array"

    def child(self, key: str) -> H5Group:
        group = self._get(key)
        chain = (*self.ancestors, self.group)
        if any(group == a for a in chain):
            raise FormatValueError(
                f"{self._where(key)} leads back to a group it is in (a soft link loop): it "
                "cannot be read as a nested tensordict. Remove the link."
            )
        if len(chain) > MAX_DEPTH:
            raise FormatValueError(
                f"{self._where(key)} is nested deeper than {MAX_DEPTH} groups, the most a "
                "tensordict reads. Flatten the file."
            )
        return H5Group(group, chain, self.allow_external)

    def create_group(self, key: str) -> H5Group:
        chain = (*self.ancestors, self.group)
        return H5Group(self.group.create_group(key), chain, self.allow_external)

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
        np_dtype = self._get(key).dtype
        dtype = _torch_dtype(np_dtype)
        if dtype is None:
            raise _no_torch_dtype(self._where(key), np_dtype)
        return dtype

    def _dataset(self, key: str) -> Any:
        """The dataset ``key``, refused if its data lives outside the file (unless allowed)."""
        ds = self._get(key)
        if not self.allow_external:
            where = None
            if ds.external:
                where = f"external raw storage in {sorted({e[0] for e in ds.external})!r}"
            elif ds.is_virtual:
                where = "a virtual dataset mapping other files"
            if where is not None:
                raise ExternalDataError(
                    f"{self._where(key)} keeps its data in {where}: reading it reads outside "
                    "the file. Pass allow_external=True to from_h5 if you trust where this file "
                    "came from."
                )
        return ds

    def read(self, key: str, region: tuple[Any, ...]) -> torch.Tensor:
        ds = self._dataset(key)
        if any(isinstance(r, np.ndarray) and r.size == 0 for r in region):
            region = tuple(slice(0, 0) if isinstance(r, np.ndarray) else r for r in region)
        return _torch(ds[region] if region else ds[()])

    def write(self, key: str, region: tuple[Any, ...], value: torch.Tensor) -> None:
        ds = self._dataset(key)
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
    def non_tensor_layout(self, key: str) -> tuple[str | None, tuple[int, ...] | None]:
        ds = self._get(key)
        if _torch_dtype(ds.dtype) is None and ds.dtype.kind not in "OSU":
            return f"not read: {ds.dtype} has no torch dtype", None
        return None, (tuple(ds.shape) if STACK_ATTR in ds.attrs else None)

    def read_non_tensor(
        self, key: str, allow_pickle: bool = False
    ) -> tuple[Any, tuple[int, ...] | None]:
        ds = self._dataset(key)  # HDF5 holds strings and numbers only: nothing is unpickled
        if _torch_dtype(ds.dtype) is None and ds.dtype.kind not in "OSU":
            raise _no_torch_dtype(self._where(key), ds.dtype)
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
        return ("h5", self.filename, self.path, self.allow_external)

    def flush(self) -> None:
        if self.file.id.valid and self.file.mode != "r":
            self.file.flush()

    def close(self) -> None:
        if self.file.id.valid:
            self.file.close()


def _torch_dtype(np_dtype: Any) -> torch.dtype | None:
    """The torch dtype of a numpy dtype, or None (compound, long double, ...)."""
    try:
        return _torch(np.empty(0, dtype=np_dtype)).dtype
    except TypeError:
        return None


def _no_torch_dtype(where: str, np_dtype: Any) -> FormatValueError:
    return FormatValueError(
        f"{where} has the type {np_dtype}, which has no torch dtype (a compound or long double "
        "type): it cannot be read as a tensor. Read it with h5py (ptd.file[...][()]), or "
        "exclude it (ptd.exclude(key)); the other entries read as usual."
    )


_CHUNK_OPTIONS = (
    "chunks",
    "compression",
    "compression_opts",
    "shuffle",
    "fletcher32",
    "scaleoffset",
)
