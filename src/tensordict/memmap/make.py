"""Adding one memory-mapped leaf to a tensordict saved to a directory: ``make_memmap``,
``make_memmap_from_tensor``, ``make_memmap_from_storage`` (upstream's names and behaviour).

Missing levels of a nested key become memory-mapped sub-folders (locked like their parent); the
new file and the folder's ``meta.json`` are each written whole and renamed in, under the prefix's
lock. Nested (jagged) tensors are stored as :mod:`tensordict.memmap.plan` stores them: values in
``<key>.memmap``, element sizes in ``<key>.shape.memmap``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, key_path
from tensordict.errors import (
    BatchSizeError,
    MemmapExistsError,
    MemmapFormatError,
    MemmapStorageError,
    NotMemmappedError,
)
from tensordict.memmap import format as fmt
from tensordict.memmap import transaction as tx
from tensordict.memmap.nested import (
    is_nested_shape,
    loaded_nested,
    nested_buffer,
    nested_numel,
    nested_sizes,
)
from tensordict.memmap.tensor import MemoryMappedTensor, write_file

__all__ = ["make_memmap", "make_memmap_from_storage", "make_memmap_from_tensor"]


def _memmap_parent(td: Any, key: NestedKey) -> tuple[TensorDict, str]:
    """The memory-mapped tensordict that will hold ``key`` (missing levels are created, each a
    memory-mapped sub-folder, as upstream) and the name of the new entry in it."""
    path = key_path(key)
    parent = td
    for depth, part in enumerate(path[:-1]):
        _check_memmapped(parent, key)
        child = parent._get_str(part, None)
        if child is None:
            child = _add_child(parent, part)
        elif not isinstance(child, TensorDict):
            raise MemmapFormatError(
                f"make_memmap({key!r}): {path[: depth + 1]!r} is a {type(child).__name__}, not a "
                "memory-mapped tensordict. Use another key."
            )
        parent = child
    _check_memmapped(parent, key)
    if path[-1] in parent._tensordict:
        raise MemmapExistsError(
            f"The key {path[-1]} already exists within the target tensordict. Delete that entry "
            "before overwriting it."
        )
    return parent, path[-1]


def _check_memmapped(td: Any, key: NestedKey) -> None:
    if not isinstance(td, TensorDict) or td.saved_path is None:
        raise NotMemmappedError(
            "Can only make a memmap tensor within a memory-mapped tensordict: "
            f"make_memmap({key!r}) needs one saved to a directory, with td.memmap_(prefix) or "
            "TensorDict.load_memmap(prefix)."
        )


def _add_child(parent: TensorDict, name: str) -> TensorDict:
    """A new empty nested tensordict ``name``, memory-mapped to its own sub-folder."""
    directory = str(parent.saved_path)
    if name in fmt.RESERVED:
        raise MemmapFormatError(
            f"cannot make the nested entry {name!r} (in {directory}): meta.json uses {name!r} "
            "for the tensordict itself. Choose another key."
        )
    child = TensorDict({}, parent.batch_size).memmap_(fmt.entry_path(directory, name))
    with tx.prefix_lock(os.path.realpath(directory)):
        meta = fmt.read_meta(directory)
        tail = {k: meta.pop(k) for k in fmt.RESERVED if k in meta and not isinstance(meta[k], dict)}
        meta[name] = {"type": "TensorDict"}
        meta.update(tail)
        tx.write_bytes(os.path.join(directory, fmt.META), fmt.dumps(meta))
        tx.fsync_path(directory)
    parent._tensordict[name] = child
    child._set_locked(parent.is_locked, parent if parent.is_locked else None)
    return child


def make_memmap(
    td: Any, key: NestedKey, shape: Sequence[int], *, dtype: Any = None
) -> MemoryMappedTensor:
    """Create a zero-filled memory-mapped leaf under ``key`` in the memory-mapped ``td``
    (``td.make_memmap(key, shape)``; locked tensordicts too); return it.

    Raises:
        NotMemmappedError: ``td`` is not memory-mapped to a directory.

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> td = TensorDict().memmap_(tempfile.mkdtemp())
        >>> td.make_memmap("x", [2, 3]).shape, td["x"].sum().item()
        (torch.Size([2, 3]), 0.0)
    """
    parent, name = _memmap_parent(td, key)
    dtype = dtype or torch.get_default_dtype()
    if is_nested_shape(shape):  # one row of sizes per element: a nested tensor
        return _add_nested(parent, name, torch.as_tensor(shape, dtype=torch.int64), dtype, None)
    return _add_leaf(parent, name, torch.Size(shape), dtype, None)


def make_memmap_from_tensor(
    td: Any, key: NestedKey, tensor: torch.Tensor, *, copy_data: bool = True
) -> MemoryMappedTensor:
    """Create a memory-mapped leaf holding a copy of ``tensor`` under ``key`` in the memory-mapped
    ``td`` (``td.make_memmap_from_tensor(key, tensor)``); ``copy_data=False`` allocates the file
    with the tensor's shape and dtype without copying its values.

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> td = TensorDict().memmap_(tempfile.mkdtemp())
        >>> td.make_memmap_from_tensor(("n", "y"), torch.arange(3)).tolist()
        [0, 1, 2]
    """
    parent, name = _memmap_parent(td, key)
    if tensor.is_nested:
        data = nested_buffer(tensor) if copy_data else None
        return _add_nested(parent, name, nested_sizes(tensor), tensor.dtype, data)
    return _add_leaf(parent, name, tensor.shape, tensor.dtype, tensor if copy_data else None)


def make_memmap_from_storage(
    td: Any, key: NestedKey, storage: Any, shape: Sequence[int], *, dtype: Any = None
) -> MemoryMappedTensor:
    """Create a memory-mapped leaf under ``key`` in the memory-mapped ``td`` holding
    ``storage``'s bytes (``td.make_memmap_from_storage(key, storage, shape)``): the storage's
    own file when it is mapped from the entry's path already, else a copy into that new file.

    Raises:
        MemmapStorageError: the storage is mapped from another file, or is too small.
        NotMemmappedError: ``td`` is not memory-mapped to a directory.

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> td = TensorDict().memmap_(tempfile.mkdtemp())
        >>> storage = torch.arange(4.0).untyped_storage()
        >>> t = td.make_memmap_from_storage(("x", "y"), storage, shape=[2], dtype=torch.float32)
        >>> t.tolist(), td["x"].saved_path is not None
        ([0.0, 1.0], True)
    """
    parent, name = _memmap_parent(td, key)
    dtype = dtype or torch.get_default_dtype()
    shape = torch.Size(shape)
    path = fmt.entry_path(str(parent.saved_path), name, ".memmap")
    own = getattr(storage, "filename", None)
    if own is not None and os.path.realpath(own) != os.path.realpath(path):
        raise MemmapStorageError(
            "Providing a storage with an associated filename that differs from the filename "
            f"argument is not permitted: the entry {name!r} lives in {path}, the storage is "
            f"mapped from {own}. Pass a storage that is not mapped from a file (it is copied) "
            "or use make_memmap_from_tensor."
        )
    data = torch.empty(0, dtype=torch.uint8).set_(storage.untyped())
    nbytes = shape.numel() * torch.empty((), dtype=dtype).element_size()
    if data.numel() < nbytes:
        raise MemmapStorageError(
            f"make_memmap_from_storage({key!r}): the storage holds {data.numel()} bytes, the "
            f"shape {list(shape)} of {dtype} needs {nbytes}. Pass a matching shape and dtype."
        )
    keep = own is not None and os.path.exists(path)  # (else: the file went, the mapping stays)
    source = None if keep else data[:nbytes].view(dtype).view(shape)
    return _add_leaf(parent, name, shape, dtype, source, keep_file=keep)


def _add_nested(
    parent: TensorDict, name: str, sizes: torch.Tensor, dtype: torch.dtype, data: Any
) -> Any:
    """A nested-tensor leaf: its element sizes file, then its values file and the metadata."""
    _check_name(parent, name)
    directory = str(parent.saved_path)
    shape_path = fmt.entry_path(directory, name, ".shape.memmap")
    with tx.prefix_lock(os.path.realpath(directory)):
        write_file(shape_path, sizes, sizes.shape, torch.int64)
        tx.fsync_path(shape_path)
    numel = torch.Size([nested_numel(sizes)])
    flat = _add_leaf(parent, name, numel, dtype, data, batch_checked=True)
    with tx.prefix_lock(os.path.realpath(directory)):
        meta = fmt.read_meta(directory)
        meta[name] = {"device": "cpu", "shape": list(sizes.shape), "dtype": str(dtype)}
        meta[name]["is_nested"] = True
        tx.write_bytes(os.path.join(directory, fmt.META), fmt.dumps(meta))
        tx.fsync_path(directory)
    leaf = loaded_nested(flat, sizes)
    parent._tensordict[name] = leaf
    return leaf


def _check_name(parent: TensorDict, name: str) -> None:
    if name in fmt.RESERVED:
        raise MemmapFormatError(
            f"cannot make the memory-mapped entry {name!r} (in {parent.saved_path}): meta.json "
            f"uses {name!r} for the tensordict itself. Choose another key."
        )


def _add_leaf(
    parent: TensorDict,
    name: str,
    shape: torch.Size,
    dtype: torch.dtype,
    data: Any,
    keep_file: bool = False,
    batch_checked: bool = False,
) -> MemoryMappedTensor:
    bs = parent.batch_size
    if not batch_checked and tuple(shape[: len(bs)]) != tuple(bs):
        raise BatchSizeError(
            f"cannot make {name!r} of shape {list(shape)}: it must start with the batch size "
            f"{list(bs)}."
        )
    directory = str(parent.saved_path)
    _check_name(parent, name)
    path = fmt.entry_path(directory, name, ".memmap")
    # one new file and one folder's metadata, each renamed into place whole under the prefix's
    # lock: a crash leaves the old metadata (and at most an unused file)
    with tx.prefix_lock(os.path.realpath(directory)):
        if not keep_file:
            write_file(path, data, shape, dtype)
        leaf = MemoryMappedTensor._map(path, dtype, shape)
        meta = fmt.read_meta(directory)
        tail = {k: meta.pop(k) for k in fmt.RESERVED if k in meta and not isinstance(meta[k], dict)}
        meta[name] = fmt.leaf_entry(leaf, "cpu")
        meta.update(tail)
        tx.fsync_path(path)
        tx.write_bytes(os.path.join(directory, fmt.META), fmt.dumps(meta))
        tx.fsync_path(directory)
    parent._tensordict[name] = leaf
    return leaf
