"""Loading memory-mapped tensordicts saved here or by upstream tensordict: load_memmap.

The loader reads each directory's ``meta.json`` and dispatches on ``_class`` (written here) or
``_type`` (upstream's class string, the only tag older directories have). Nothing is trusted: every
entry name is resolved inside the prefix (``..``, absolute paths and symlinks leading out are
refused), every shape, dtype, device and file size is checked against the metadata, and nothing
is unpickled unless the caller passes ``allow_pickle=True``. Errors name the file at fault.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import torch

from tensordict.core.dense import TensorDict
from tensordict.core.lazy_stack import LazyStackedTensorDict
from tensordict.core.non_tensor import MetaData, NonTensorData, NonTensorStack, _object_array
from tensordict.errors import IncompleteMemmapError, MemmapFormatError, PickleNotAllowedError
from tensordict.memmap import format as fmt
from tensordict.memmap.tensor import MemoryMappedTensor, dtype_from_str

__all__ = ["load_memmap"]

CPU = torch.device("cpu")


def load_memmap(
    prefix: Any,
    device: Any = None,
    *,
    allow_pickle: bool = False,
    non_blocking: bool = False,
    out: Any = None,
    robust_key: bool | None = None,
) -> Any:
    """Load a tensordict saved by :func:`memmap_` / :func:`memmap` (here or by upstream tensordict).

    The leaves are :class:`MemoryMappedTensor` (nothing is read until used); the result is not
    locked. Nothing is unpickled unless ``allow_pickle=True``.

    Raises:
        IncompleteMemmapError: missing ``meta.json`` or data files (e.g. an interrupted write).
        MemmapFormatError: malformed metadata, unknown dtype, a file of the wrong size.
        UnsafeKeyError: an entry that would be read from outside ``prefix``.
        PickleNotAllowedError: an entry needs unpickling and ``allow_pickle`` is False.

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> _ = TensorDict({"a": {"b": torch.arange(3)}}, [3]).memmap(d)
        >>> TensorDict.load_memmap(d)["a", "b"]
        MemoryMappedTensor([0, 1, 2])
    """
    root = os.path.abspath(os.fspath(prefix))
    node = _load_node(root, fmt.read_meta(root), allow_pickle, None)
    if device is not None and torch.device(device) != CPU:
        node = node.to(device)
    if out is not None:
        out.update_(node)
        return out
    return node


def _load_node(directory: str, meta: dict[str, Any], allow_pickle: bool, batch_size: Any) -> Any:
    tag = meta.get("_class") or meta.get("_type")
    if tag in (fmt.CLASS_TD, fmt.TYPE_TD) or tag is None:
        return _load_td(directory, meta, allow_pickle)
    if tag in (fmt.CLASS_LAZY, fmt.TYPE_LAZY):
        return _load_lazy(directory, meta, allow_pickle, batch_size)
    if tag in (fmt.TYPE_NON_TENSOR, fmt.TYPE_METADATA):
        entry = _load_non_tensor(directory, meta, allow_pickle, batch_size)
        if tag == fmt.TYPE_METADATA:
            entry = MetaData._new(entry.data, entry.batch_size, entry.device)
        entry._mark_saved(directory)
        return entry
    if tag == fmt.TYPE_NON_TENSOR_STACK:
        entry = _load_non_tensor_stack(directory, meta, allow_pickle, batch_size)
        if isinstance(entry, NonTensorStack):
            entry._mark_saved(directory)
        return entry
    meta_path = os.path.join(directory, fmt.META)
    cls = fmt.resolve_class(str(tag), meta_path)
    if not getattr(cls, "_is_tensorclass", False):
        raise MemmapFormatError(f"{meta_path}: {tag} is not a tensordict class or a tensorclass.")
    return _load_tensorclass(cls, directory, meta, allow_pickle)


def _read_pickle(path: str, allow_pickle: bool) -> Any:
    if not allow_pickle:
        raise PickleNotAllowedError(
            f"{path} can only be read by unpickling it, which can run arbitrary code. Pass "
            "allow_pickle=True to load_memmap if you trust where this directory came from."
        )
    with open(path, "rb") as f:
        return pickle.load(f)


def _load_td(directory: str, meta: dict[str, Any], allow_pickle: bool) -> TensorDict:
    meta_path = os.path.join(directory, fmt.META)
    batch_size = _size(meta.get("shape", []), "'shape'", meta_path)
    device = _device(meta.get("device"), meta_path)
    source: dict[str, Any] = {}
    n = len(batch_size)
    for key, entry in meta.items():
        if key in fmt.RESERVED and not isinstance(entry, dict):
            continue
        if not isinstance(entry, dict):
            continue
        if "type" in entry:
            sub = fmt.find_entry(directory, key)
            if sub is None:
                raise IncompleteMemmapError(
                    f"{meta_path} lists {key!r} but its directory "
                    f"{fmt.entry_path(directory, key)} is missing."
                )
            value = _load_node(sub, fmt.read_meta(sub), allow_pickle, batch_size)
        elif "dtype" in entry and "shape" in entry:
            value = _load_leaf(directory, key, entry, meta_path)
        else:
            continue
        shape = (
            getattr(value, "batch_size", None)
            if not isinstance(value, torch.Tensor)
            else value.shape
        )
        if isinstance(value, NonTensorData):
            value = value._with_batch_size(batch_size)
            value._mark_saved(sub)  # type: ignore[arg-type]
        elif shape is not None and tuple(shape[:n]) != tuple(batch_size):
            raise MemmapFormatError(
                f"{meta_path}: entry {key!r} has shape {list(shape)}, which does not start with "
                f"the batch size {list(batch_size)}."
            )
        source[key] = value
    td = TensorDict._new_unsafe(source, batch_size, device, is_memmap=True)
    td._memmap_prefix = directory
    return td


def _size(value: Any, what: str, meta_path: str) -> torch.Size:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise MemmapFormatError(
            f"{meta_path}: {what} must be a list of non-negative ints, got {value!r}."
        )
    return torch.Size(value)


def _device(value: Any, meta_path: str) -> torch.device | None:
    if value in (None, "None"):
        return None
    try:
        return torch.device(str(value))
    except RuntimeError:
        raise MemmapFormatError(f"{meta_path}: {value!r} is not a device.") from None


def _load_leaf(directory: str, key: str, entry: dict[str, Any], meta_path: str) -> torch.Tensor:
    if entry.get("is_nested"):
        raise MemmapFormatError(
            f"{meta_path}: {key!r} is a nested (jagged) tensor, which this library does not store."
        )
    dtype = dtype_from_str(str(entry["dtype"]), meta_path)
    shape = _size(entry["shape"], f"the shape of {key!r}", meta_path)
    numel = shape.numel()
    path = fmt.find_entry(directory, key, ".memmap")
    if path is None:
        if numel == 0:
            return MemoryMappedTensor.from_tensor(torch.empty(shape, dtype=dtype))
        raise IncompleteMemmapError(
            f"{meta_path} lists {key!r} but its data file "
            f"{fmt.entry_path(directory, key, '.memmap')} "
            "is missing (an interrupted write, or files removed)."
        )
    expected = numel * torch.empty((), dtype=dtype).element_size()
    size = os.path.getsize(path)
    if size != expected:
        raise MemmapFormatError(
            f"{path} holds {size} bytes, but {meta_path} describes {key!r} as {list(shape)} "
            f"{dtype} ({expected} bytes). The file is truncated or does not match its metadata."
        )
    return MemoryMappedTensor.from_filename(path, dtype, shape)


def _load_members(
    directory: str, meta: dict[str, Any], allow_pickle: bool, batch_size: Any
) -> tuple[list[Any], int]:
    """The members ``0/``, ``1/``, ... of a saved stack, and its stack dimension."""
    meta_path = os.path.join(directory, fmt.META)
    stack_dim = meta.get("stack_dim", 0)
    if not isinstance(stack_dim, int) or isinstance(stack_dim, bool):
        raise MemmapFormatError(f"{meta_path}: 'stack_dim' must be an int, got {stack_dim!r}.")
    member_bs = None
    if batch_size is not None and 0 <= stack_dim < len(batch_size):
        member_bs = torch.Size([*batch_size[:stack_dim], *batch_size[stack_dim + 1 :]])
    members: list[Any] = []
    while True:
        sub = fmt.find_entry(directory, str(len(members)))
        if sub is None or not os.path.isdir(sub):
            break
        members.append(_load_node(sub, fmt.read_meta(sub), allow_pickle, member_bs))
    if not members:
        raise IncompleteMemmapError(
            f"{directory} is a saved stack with no members: expected folders 0/, 1/, ... next to "
            f"{meta_path}."
        )
    return members, stack_dim


def _load_lazy(
    directory: str, meta: dict[str, Any], allow_pickle: bool, batch_size: Any = None
) -> LazyStackedTensorDict:
    members, stack_dim = _load_members(directory, meta, allow_pickle, batch_size)
    try:
        out = LazyStackedTensorDict(*members, stack_dim=stack_dim)
    except (ValueError, RuntimeError, IndexError) as err:
        raise MemmapFormatError(
            f"{os.path.join(directory, fmt.META)}: cannot stack the saved members: {err}"
        ) from None
    out._saved_path = directory  # type: ignore[attr-defined]
    return out


def _load_non_tensor(
    directory: str, meta: dict[str, Any], allow_pickle: bool, batch_size: Any
) -> NonTensorData:
    if "data" in meta:
        data = meta["data"]
    else:
        path = os.path.join(directory, "other.pickle")
        if os.path.exists(path):
            data = _read_pickle(path, allow_pickle).get("data")
        elif os.path.exists(os.path.join(directory, "_tensordict")):
            data = None
        else:
            raise IncompleteMemmapError(
                f"{directory}: non-tensor entry without data or other.pickle."
            )
    return NonTensorData(data, batch_size=batch_size if batch_size is not None else [])


def _load_non_tensor_stack(
    directory: str, meta: dict[str, Any], allow_pickle: bool, batch_size: Any
) -> Any:
    data = meta.get("data")
    if data == "pickle.pkl":
        data = _read_pickle(os.path.join(directory, "pickle.pkl"), allow_pickle)
    elif isinstance(data, str):
        raise MemmapFormatError(f"{directory}: invalid pickled NonTensorStack file name {data!r}.")
    if data is None:  # the older layout: one folder per member
        members, stack_dim = _load_members(directory, meta, allow_pickle, batch_size)
        if not all(isinstance(m, (NonTensorData, NonTensorStack)) for m in members):
            return _load_lazy(directory, meta, allow_pickle, batch_size)
        return NonTensorStack.from_array(np.stack([m.to_array() for m in members], stack_dim))
    shape = list(batch_size) if batch_size is not None else None
    if shape is not None and not _has_shape(data, shape):
        raise MemmapFormatError(
            f"{os.path.join(directory, fmt.META)}: the stacked data does not have the batch "
            f"shape {shape} of its tensordict."
        )
    return NonTensorStack.from_array(_object_array(data, shape))


def _has_shape(data: Any, shape: list[int]) -> bool:
    if not shape:
        return True
    if not isinstance(data, list) or len(data) != shape[0]:
        return False
    return all(_has_shape(d, shape[1:]) for d in data)


def _load_tensorclass(cls: type, directory: str, meta: dict[str, Any], allow_pickle: bool) -> Any:
    fields = {k: v for k, v in meta.items() if k != "_type"}
    pickled = os.path.join(directory, "other.pickle")
    if os.path.exists(pickled):
        fields.update(_read_pickle(pickled, allow_pickle))
    inner_dir = os.path.join(directory, "_tensordict")
    td = _load_td(inner_dir, fmt.read_meta(inner_dir), allow_pickle)
    return cls._from_tensordict(td, fields)  # type: ignore[attr-defined]
