"""Zarr (v3) groups for :class:`PersistentTensorDict`, read and written with zarr-python.

The layout is upstream tensordict's: a nested tensordict is a group, a tensor an array (one chunk
and no compression unless asked), python objects a 1-d ``uint8`` array of JSON (or, when allowed,
pickle) bytes marked with the attribute ``__tensordict_non_tensor__``; the batch size and the
dimension names are the group attribute ``__tensordict__``. Stores are written with consolidated
metadata, kept fresh after every change of structure.
"""

from __future__ import annotations

import contextlib
import json
import math
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tensordict.errors import FormatValueError, PickleNotAllowedError
from tensordict.formats.deps import require, require_file
from tensordict.formats.node import META_ATTR, PICKLED, GroupNode, to_numpy
from tensordict.formats.zarr_chunks import ALL_CHUNKS_ATTR, check_read

__all__ = ["ZarrGroup", "consolidate", "deferred_consolidation", "open_zarr", "zarr"]

NON_TENSOR_ATTR = "__tensordict_non_tensor__"


def zarr() -> Any:
    """The zarr module (version 3 or later), or an error naming the ``zarr`` extra."""
    lib = require("zarr", "zarr", "reading and writing Zarr stores")
    if int(lib.__version__.split(".")[0]) < 3:
        from tensordict.errors import MissingDependencyError

        raise MissingDependencyError(
            f"tensordict's Zarr support needs zarr>=3, found zarr {lib.__version__}. Upgrade "
            'with pip install "tensordict[zarr]".'
        )
    return lib


def _store(filename: Any) -> Any:
    return str(filename) if isinstance(filename, (str, Path)) else filename


def open_zarr(filename: Any, mode: str) -> ZarrGroup:
    """Open (or create, with mode ``"w"``) a Zarr store; its root group."""
    lib = zarr()
    mode = "w-" if mode == "x" else mode
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr warns about consolidated metadata formats
        if mode in ("r", "r+"):
            require_file(filename, "Zarr store")
        if mode == "r":
            group = lib.open_group(_store(filename), mode="r")
        else:  # consolidated metadata would go stale as the structure changes
            group = lib.open_group(_store(filename), mode=mode, use_consolidated=False)
    return ZarrGroup(group, root=None, source=filename)


def reopen(spec: tuple[Any, ...], mode: str) -> ZarrGroup:
    _, source, path = spec
    root = open_zarr(source, mode)
    return root if path in ("", "/") else ZarrGroup(root.group[path.strip("/")], root, source)


@contextlib.contextmanager
def deferred_consolidation(root: ZarrGroup) -> Iterator[None]:
    """Changes made to the store of ``root`` inside the block do not rewrite its consolidated
    metadata each (that rewrite reads every array's metadata: a write of n arrays would cost
    n²); it is written once, when the block ends without an error.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as d:
        ...     root = open_zarr(f"{d}/s.zarr", "w")
        ...     with deferred_consolidation(root):
        ...         for i in range(3):
        ...             root.create_array(f"k{i}", torch.zeros(2))
        ...     sorted(TensorDict.from_zarr(f"{d}/s.zarr").keys())
        ['k0', 'k1', 'k2']
    """
    root._deferred = True
    try:
        yield
    finally:
        root._deferred = False
    consolidate(root)


def consolidate(node: ZarrGroup) -> None:
    """Write the consolidated metadata of the store holding ``node`` (if it can)."""
    root = node.root
    store = root.group.store
    if getattr(store, "read_only", False) or not getattr(store, "supports_deletes", True):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr().consolidate_metadata(store)


def _torch(array: Any) -> torch.Tensor:
    array = np.asarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("="))
    return torch.from_numpy(np.ascontiguousarray(array).reshape(array.shape))  # keeps 0-d 0-d


def _kind(obj: Any) -> str | None:
    """The kind (see ``GroupNode.kind``) of a zarr group or array (None: absent)."""
    if obj is None:
        return None
    if isinstance(obj, zarr().Group):
        return "group"
    if NON_TENSOR_ATTR in obj.attrs or np.dtype(obj.dtype).kind in "OSUTV":
        return "non_tensor"
    return "array"


class ZarrGroup(GroupNode):
    """A zarr group; ``root`` is the store's root group node (None for the root itself)."""

    backend = "zarr"

    def __init__(self, group: Any, root: ZarrGroup | None = None, source: Any = None) -> None:
        self.group = group
        self._root = root
        self.source = source if source is not None else group.store
        #: on the root: changes skip consolidating (``deferred_consolidation``)
        self._deferred = False

    @property
    def root(self) -> ZarrGroup:
        return self._root if self._root is not None else self

    def _changed(self) -> None:
        if not self.root._deferred:
            consolidate(self)

    # ------------------------------------------------------------------ structure
    def list_keys(self) -> list[str]:
        return list(self.group.keys())

    def _get(self, key: str) -> Any:
        try:
            return self.group[key]
        except KeyError:
            return None

    def kind(self, key: str) -> str | None:
        return _kind(self._get(key))

    def layout(self) -> dict[str, tuple[str | None, tuple[int, ...] | None]]:
        # one request for all members: each lookup by key is a round trip through zarr's
        # event loop (~0.3 ms; a store of 512 arrays took 0.3-0.6 s to open)
        out: dict[str, tuple[str | None, tuple[int, ...] | None]] = {}
        for key, obj in self.group.members():
            kind = _kind(obj)
            out[key] = (kind, tuple(obj.shape) if kind == "array" else None)
        return out

    def child(self, key: str) -> ZarrGroup:
        return ZarrGroup(self.group[key], self.root, self.source)

    def create_group(self, key: str) -> ZarrGroup:
        child = ZarrGroup(self.group.create_group(key), self.root, self.source)
        self._changed()
        return child

    def delete(self, key: str) -> None:
        del self.group[key]
        self._changed()

    def move(self, old: str, new: str) -> None:
        raise NotImplementedError  # PersistentTensorDict copies, then deletes

    def meta(self) -> dict[str, Any] | None:
        meta = self.group.attrs.get(META_ATTR)
        return dict(meta) if isinstance(meta, dict) else None

    def set_meta(self, meta: dict[str, Any]) -> None:
        self.group.attrs[META_ATTR] = meta

    # ------------------------------------------------------------------ arrays
    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self.group[key].shape)

    def dtype(self, key: str) -> torch.dtype:
        return _torch(np.empty(0, dtype=self.group[key].dtype)).dtype

    def read(self, key: str, region: tuple[Any, ...]) -> torch.Tensor:
        return _torch(self.read_raw(key, region))

    def read_raw(self, key: str, region: tuple[Any, ...] = ()) -> Any:
        """The numpy elements of array ``key`` in ``region``, once its chunks are checked
        (see :mod:`tensordict.formats.zarr_chunks`)."""
        arr = self.group[key]
        check_read(arr, region, self._where(key))
        if any(isinstance(r, np.ndarray) for r in region):
            return arr.oindex[region]
        return arr[region] if region else arr[...]

    def write(self, key: str, region: tuple[Any, ...], value: torch.Tensor) -> None:
        arr = _storing_every_chunk(self.group[key])
        data = to_numpy(key, value.to(self.dtype(key)), "Zarr")
        if any(isinstance(r, np.ndarray) for r in region):
            arr.oindex[region] = data
        else:
            arr[region if region else ...] = data

    def create_array(self, key: str, value: torch.Tensor, **kwargs: Any) -> None:
        data = to_numpy(key, value, "Zarr")
        arr = self.group.create_array(key, **_array_options(data.shape, data.dtype, kwargs))
        arr[...] = data
        self._changed()

    def create_zeros(self, key: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        np_dtype = to_numpy(key, torch.empty(0, dtype=dtype), "Zarr").dtype
        arr = self.group.create_array(key, **_array_options(shape, np_dtype, {}))
        if not shape:
            arr[...] = np.zeros((), np_dtype)
        step = max(int(arr.chunks[0]), 1) if shape else 1
        for start in range(0, shape[0] if shape else 0, step):  # every chunk stored, as zeros
            stop = min(start + step, shape[0])
            arr[start:stop] = np.zeros((stop - start, *shape[1:]), np_dtype)
        self._changed()

    # ------------------------------------------------------------------ python objects
    def non_tensor_layout(self, key: str) -> tuple[str | None, tuple[int, ...] | None]:
        arr = self.group[key]
        marker = arr.attrs.get(NON_TENSOR_ATTR)
        if not isinstance(marker, dict):  # a string array written by another program
            return None, tuple(arr.shape)
        shape = _per_element_shape(marker, self._where(key))
        return (PICKLED if marker.get("encoding") == "pickle" else None), shape

    def read_non_tensor(
        self, key: str, allow_pickle: bool = False
    ) -> tuple[Any, tuple[int, ...] | None]:
        arr = self.group[key]
        marker = arr.attrs.get(NON_TENSOR_ATTR)
        if not isinstance(marker, dict):  # a string array written by another program
            return np.asarray(arr[...], dtype=object), tuple(arr.shape)
        where = self._where(key)
        encoding = marker.get("encoding")
        _check_encoding(encoding, where)
        if encoding == "pickle" and not allow_pickle:  # refused before a byte is read
            raise PickleNotAllowedError.for_entry(
                where, "allow_pickle=True to TensorDict.from_zarr(...)"
            )
        shape = _per_element_shape(marker, where)
        payload = np.asarray(self.read_raw(key), dtype=np.uint8).tobytes()
        value = _decode(payload, str(encoding))
        if shape is None:
            return value, None
        if not isinstance(value, list) or len(value) != math.prod(shape):
            raise FormatValueError(
                f"{where} should hold {math.prod(shape)} python objects (one per element of "
                f"shape {list(shape)}), got {type(value).__name__}: the store is damaged or was "
                "written by another program."
            )
        out = np.empty(len(value), dtype=object)
        out[:] = value
        return out.reshape(shape), tuple(shape)

    def _where(self, key: str) -> str:
        return f"the Zarr entry {self.path.rstrip('/')}/{key} of {self.filename}"

    def write_non_tensor(
        self, key: str, value: Any, per_element: bool, allow_pickle: bool | None = None
    ) -> None:
        marker: dict[str, Any] = {}
        if per_element:
            array = np.asarray(value, dtype=object)
            marker["per_element"] = list(array.shape)
            value = array.reshape(-1).tolist()
        payload, marker["encoding"] = _encode(key, value, allow_pickle)
        data = np.frombuffer(payload, dtype=np.uint8)
        arr = self.group.create_array(
            key,
            shape=data.shape,
            dtype="uint8",
            chunks=data.shape or (1,),
            compressors=None,
            attributes={NON_TENSOR_ATTR: marker, ALL_CHUNKS_ATTR: True},
            config={"write_empty_chunks": True},
        )
        if data.size:
            arr[...] = data
        self._changed()

    # ------------------------------------------------------------------ the store
    @property
    def filename(self) -> str:
        return str(self.source)

    @property
    def path(self) -> str:
        return "/" + str(self.group.path).strip("/")

    @property
    def mode(self) -> str:
        return "r" if self.group.store.read_only else "r+"

    @property
    def handle(self) -> Any:
        return self.group

    def spec(self) -> tuple[Any, ...]:
        source = self.source
        if not isinstance(source, (str, Path)):
            root = getattr(source, "root", None)  # a LocalStore reopens by its path
            source = str(root) if root is not None else source
        return ("zarr", source, self.path)

    def flush(self) -> None:
        pass  # zarr writes through

    def close(self) -> None:
        store = self.group.store
        if self.mode != "r":
            consolidate(self)
        close = getattr(store, "close", None)
        if close is not None:
            close()


def _array_options(shape: tuple[int, ...], dtype: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Options of ``create_array``: one chunk and no compression unless asked; a ``chunks``
    shorter than the array constrains its leading dimensions."""
    options = dict(kwargs)
    chunks = options.pop("chunks", None)
    if chunks is None:
        chunks = tuple(max(s, 1) for s in shape)
    else:
        chunks = tuple(chunks)[: len(shape)]
        chunks = chunks + tuple(max(s, 1) for s in shape[len(chunks) :])
    options.setdefault("compressors", None)
    # every chunk is stored, zeros included, so that a missing one is noticed when read
    options["config"] = {**dict(options.get("config") or {}), "write_empty_chunks": True}
    options["attributes"] = {**dict(options.get("attributes") or {}), ALL_CHUNKS_ATTR: True}
    return {"shape": shape, "dtype": dtype, "chunks": chunks or (1,), **options}


def _storing_every_chunk(arr: Any) -> Any:
    """``arr``, writing every chunk it touches (zarr would delete a chunk written as zeros)."""
    return arr.with_config({"write_empty_chunks": True})


def _encode(key: str, value: Any, allow_pickle: bool | None) -> tuple[bytes, str]:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="surrogateescape")
    try:
        return json.dumps(value, allow_nan=True).encode("utf-8"), "json"
    except (TypeError, ValueError):
        pass
    if allow_pickle is False:
        raise FormatValueError(
            f"cannot store {key!r} ({type(value).__name__}) in Zarr as JSON, and "
            "allow_pickle=False forbids pickling it. Convert it to JSON-compatible data, or "
            "pass allow_pickle=True (pickled data runs code when it is read)."
        )
    return pickle.dumps(value), "pickle"


def _check_encoding(encoding: Any, where: str) -> None:
    if encoding not in ("json", "pickle"):
        raise FormatValueError(
            f"{where} holds non-tensor data in an unknown encoding {encoding!r} (expected "
            "'json' or 'pickle'). It was written by another program or a newer version."
        )


def _per_element_shape(marker: dict[str, Any], where: str) -> tuple[int, ...] | None:
    shape = marker.get("per_element")
    if shape is None:
        return None
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise FormatValueError(
            f"{where} has a malformed per-element shape {shape!r} (expected a list of "
            "non-negative ints): the store is damaged or was written by another program."
        )
    return tuple(shape)


def _decode(payload: bytes, encoding: str) -> Any:
    """The python value of a payload whose encoding was checked (and allowed) by the caller."""
    if encoding == "json":
        return json.loads(payload.decode("utf-8"))
    return pickle.loads(payload)
