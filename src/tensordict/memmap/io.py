"""Writing and loading memory-mapped tensordicts: memmap_, memmap, memmap_like, load_memmap.

A write runs in four steps, so that bad input writes nothing and an interrupted write never loads:

1. plan: walk the tree, validate every leaf, list the data files and the ``meta.json`` of every
   directory (children before parents);
2. invalidate: remove the ``meta.json`` files already in the target directory;
3. write the data files (in ``num_threads`` threads when asked) and map them;
4. write each ``meta.json`` atomically, deepest first, the root's last.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from tensordict.core.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, key_path
from tensordict.core.lazy_stack import LazyStackedTensorDict
from tensordict.core.non_tensor import NonTensorData, NonTensorStack, _object_array
from tensordict.core.pickling import _DTYPES
from tensordict.errors import (
    AlreadyMemmappedError,
    BatchSizeError,
    IncompleteMemmapError,
    MemmapFormatError,
    PickleNotAllowedError,
)
from tensordict.memmap import format as fmt
from tensordict.memmap.tensor import MemoryMappedTensor, dtype_from_str, write_file

__all__ = [
    "load_memmap",
    "make_memmap",
    "make_memmap_from_tensor",
    "memmap",
    "memmap_",
    "memmap_like",
    "memmap_refresh_",
]

Builder = Callable[[], Any]
CPU = torch.device("cpu")


class _Plan:
    """Everything a write will do, collected before anything is written."""

    def __init__(self, like: bool, inplace: bool) -> None:
        self.like = like
        self.inplace = inplace
        self.files: list[tuple[str, torch.Tensor | None, torch.Size, torch.dtype]] = []
        self.pickles: list[tuple[str, Any]] = []
        self.metas: list[tuple[str, dict[str, Any]]] = []


def _is_tensorclass(value: Any) -> bool:
    return bool(getattr(type(value), "_is_tensorclass", False))


def _type_name(value: Any) -> str:
    if isinstance(value, LazyStackedTensorDict):
        return "LazyStackedTensorDict"
    if isinstance(value, TensorDictBase):
        return "TensorDict"
    return type(value).__name__


# ====================================================================== planning
def _plan_node(value: Any, directory: str, plan: _Plan) -> Builder:
    if isinstance(value, LazyStackedTensorDict):
        return _plan_lazy(value, directory, plan)
    if isinstance(value, TensorDictBase):
        return _plan_td(value, directory, plan)
    if _is_tensorclass(value):
        return _plan_tensorclass(value, directory, plan)
    if isinstance(value, NonTensorData):
        return _plan_non_tensor(value, directory, plan)
    if isinstance(value, NonTensorStack):
        return _plan_non_tensor_stack(value, directory, plan)
    raise TypeError(f"cannot memory-map a {type(value).__name__}.")


def _check_leaf(key: str, value: torch.Tensor, directory: str) -> None:
    if value.layout is not torch.strided or value.is_nested:
        raise MemmapFormatError(
            f"cannot memory-map {key!r} (in {directory}): it is a {value.layout} tensor; only "
            "dense (strided) tensors can be stored. Convert it with .to_dense() first."
        )
    if str(value.dtype) not in _DTYPES:
        raise MemmapFormatError(
            f"cannot memory-map {key!r} (in {directory}): dtype {value.dtype} is not supported."
        )


def _same_file(value: torch.Tensor, path: str) -> bool:
    """Whether ``value`` already *is* the whole file at ``path`` (nothing to write)."""
    return (
        isinstance(value, MemoryMappedTensor)
        and value.filename == path
        and value.storage_offset() == 0
        and value.is_contiguous()
        and value.untyped_storage().nbytes() == value.numel() * value.element_size()
        and os.path.exists(path)
    )


def _plan_td(td: TensorDictBase, directory: str, plan: _Plan) -> Builder:
    entries: dict[str, Any] = {}
    builders: dict[str, Builder] = {}
    for key, value in td._own_items():
        if isinstance(value, torch.Tensor):
            _check_leaf(key, value, directory)
            path = fmt.entry_path(directory, key, ".memmap")
            if plan.like or not _same_file(value, path):
                plan.files.append((path, None if plan.like else value, value.shape, value.dtype))
            entries[key] = fmt.leaf_entry(value)
            builders[key] = _leaf_builder(path, value.dtype, value.shape)
        else:
            entries[key] = {"type": _type_name(value)}
            builders[key] = _plan_node(value, fmt.entry_path(directory, key), plan)
    meta = {
        **entries,
        "shape": list(td.batch_size),
        "device": "cpu",
        "_type": fmt.TYPE_TD,
        "_format_version": fmt.FORMAT_VERSION,
        "_class": fmt.CLASS_TD,
    }
    plan.metas.append((directory, meta))

    def build() -> Any:
        source = {key: b() for key, b in builders.items()}
        if plan.inplace and isinstance(td, TensorDict):
            td._tensordict.clear()
            td._tensordict.update(source)
            out: TensorDict = td
        else:
            out = TensorDict._new_unsafe(source, td.batch_size, CPU, td._names_or_none())
        out._device = CPU
        out._is_memmap = True
        out._memmap_prefix = directory
        return out

    return build


def _leaf_builder(path: str, dtype: torch.dtype, shape: torch.Size) -> Builder:
    return lambda: MemoryMappedTensor._map(path, dtype, shape)


def _plan_lazy(td: LazyStackedTensorDict, directory: str, plan: _Plan) -> Builder:
    members = [
        _plan_node(m, os.path.join(directory, str(i)), plan) for i, m in enumerate(td.tensordicts)
    ]
    plan.metas.append(
        (
            directory,
            {
                "_type": fmt.TYPE_LAZY,
                "stack_dim": td.stack_dim,
                "_format_version": fmt.FORMAT_VERSION,
                "_class": fmt.CLASS_LAZY,
            },
        )
    )

    def build() -> Any:
        built = [b() for b in members]
        if plan.inplace:
            td.tensordicts = built
            td._saved_path = directory  # type: ignore[attr-defined]
            return td
        out = LazyStackedTensorDict(*built, stack_dim=td.stack_dim)
        return out

    return build


def _split_jsonable(fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    inline = {k: v for k, v in fields.items() if fmt.is_jsonable(v)}
    pickled = {k: v for k, v in fields.items() if k not in inline}
    return inline, pickled


def _plan_tensorclass(tc: Any, directory: str, plan: _Plan) -> Builder:
    inner = _plan_td(tc._tensordict, os.path.join(directory, "_tensordict"), plan)
    inline, pickled = _split_jsonable(dict(tc._non_tensordict))
    if pickled:
        plan.pickles.append((os.path.join(directory, "other.pickle"), pickled))
    plan.metas.append((directory, {"_type": fmt.type_string(type(tc)), **inline}))

    def build() -> Any:
        td = inner()
        if plan.inplace:
            return tc
        return type(tc)._from_tensordict(td, dict(tc._non_tensordict))

    return build


def _plan_non_tensor(value: NonTensorData, directory: str, plan: _Plan) -> Builder:
    meta: dict[str, Any] = {"_type": fmt.TYPE_NON_TENSOR}
    if fmt.is_jsonable(value.data):
        meta["data"] = value.data
    else:
        plan.pickles.append((os.path.join(directory, "other.pickle"), {"data": value.data}))
    meta["_metadata"] = None
    meta["_is_non_tensor"] = True
    plan.metas.append((directory, meta))
    return lambda: value


def _plan_non_tensor_stack(value: NonTensorStack, directory: str, plan: _Plan) -> Builder:
    data = value.tolist()
    meta: dict[str, Any] = {"_type": fmt.TYPE_NON_TENSOR_STACK, "stack_dim": 0, "device": None}
    if fmt.is_jsonable(data):
        meta["data"] = data
    else:
        meta["data"] = "pickle.pkl"
        plan.pickles.append((os.path.join(directory, "pickle.pkl"), data))
    plan.metas.append((directory, meta))
    return lambda: value


# ====================================================================== executing
def _execute(plan: _Plan, root: str, build: Builder, num_threads: int) -> Any:
    fmt.invalidate(root)
    if num_threads and num_threads > 0 and len(plan.files) > 1:
        with ThreadPoolExecutor(max_workers=num_threads) as pool:
            list(pool.map(lambda job: write_file(*job), plan.files))
    else:
        for job in plan.files:
            write_file(*job)
    for path, obj in plan.pickles:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump(obj, f)
    result = build()
    for directory, meta in plan.metas:
        fmt.write_meta(directory, meta)
    return result


def _prefix(prefix: Any) -> str:
    return os.path.abspath(os.fspath(prefix))


def _anonymous(td: Any, like: bool, inplace: bool) -> Any:
    def leaf(t: torch.Tensor) -> torch.Tensor:
        if isinstance(t, MemoryMappedTensor) and t.filename is None and not like and inplace:
            return t
        return MemoryMappedTensor.from_tensor(t, filename=None, copy_data=not like)

    if inplace:
        out = td._apply_leaves(leaf, inplace=False)
        _transplant(td, out)
        out = td
    else:
        out = td._apply_leaves(leaf)
    _mark_memmap(out, None)
    return out.lock_()


def _transplant(dst: Any, src: Any) -> None:
    """Put ``src``'s leaves into ``dst`` (same structure), keeping ``dst``'s objects."""
    if isinstance(dst, TensorDict):
        for key, value in src._own_items():
            current = dst._tensordict.get(key)
            if isinstance(current, TensorDictBase) or _is_tensorclass(current):
                _transplant(current, value)
            else:
                dst._tensordict[key] = value
    elif isinstance(dst, LazyStackedTensorDict):
        for a, b in zip(dst.tensordicts, src.tensordicts):
            _transplant(a, b)
    elif _is_tensorclass(dst):
        _transplant(dst._tensordict, src._tensordict)


def _mark_memmap(node: Any, prefix: str | None) -> None:
    if isinstance(node, TensorDict):
        node._is_memmap = True
        node._memmap_prefix = prefix
        node._device = CPU
        for value in node._tensordict.values():
            _mark_memmap(value, None)
    elif isinstance(node, LazyStackedTensorDict):
        for m in node.tensordicts:
            _mark_memmap(m, None)
    elif _is_tensorclass(node):
        _mark_memmap(node._tensordict, None)


def memmap_(
    td: Any,
    prefix: Any = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    existsok: bool = True,
    robust_key: bool | None = None,
    return_early: bool = False,
    share_non_tensor: bool = False,
) -> Any:
    """Write every leaf to memory-mapped files under ``prefix`` and use the files from now on.

    Without ``prefix`` the leaves go to anonymous shared memory (no files; workers of any start
    method receive them by handle). Locks the tensordict. Calling it again with the same prefix
    does nothing.

    Raises:
        AlreadyMemmappedError: already memory-mapped elsewhere and ``copy_existing`` is False.
        FileExistsError: ``prefix`` holds a saved tensordict and ``existsok`` is False.

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(4)}, [4]).memmap_(tempfile.mkdtemp())
        >>> td.is_memmap(), td.is_locked, type(td["x"]).__name__
        (True, True, 'MemoryMappedTensor')
    """
    if return_early:
        raise ValueError(
            "return_early=True is not supported; the write completes before returning."
        )
    if prefix is None:
        if td.is_memmap() and td.saved_path is None:
            return td
        return _anonymous(td, like=False, inplace=True)
    root = _prefix(prefix)
    if td.is_memmap() and td.saved_path is not None and not copy_existing:
        if td.saved_path == root:
            return td
        raise AlreadyMemmappedError(
            f"this tensordict is memory-mapped at {td.saved_path}; memmap_({root!r}) would move "
            "it. Pass copy_existing=True to copy the files, or use td.memmap(prefix) for a copy."
        )
    _check_target(root, existsok)
    plan = _Plan(like=False, inplace=True)
    build = _plan_node(td, root, plan)
    out = _execute(plan, root, build, num_threads)
    return out.lock_()


def memmap(
    td: Any,
    prefix: Any = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    existsok: bool = True,
    robust_key: bool | None = None,
    **kwargs: Any,
) -> Any:
    """A memory-mapped copy of ``td`` under ``prefix`` (locked); ``td`` is left unchanged."""
    if prefix is None:
        return _anonymous(td, like=False, inplace=False)
    root = _prefix(prefix)
    _check_target(root, existsok)
    plan = _Plan(like=False, inplace=False)
    build = _plan_node(td, root, plan)
    return _execute(plan, root, build, num_threads).lock_()


def memmap_like(
    td: Any,
    prefix: Any = None,
    copy_existing: bool = False,
    *,
    existsok: bool = True,
    num_threads: int = 0,
    robust_key: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Zero-filled memory-mapped files with the structure of ``td``; no data is copied.

    Use it to preallocate outputs that worker processes write into (``map(..., out=...)``).

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> out = TensorDict({"y": torch.ones(3)}, [3]).memmap_like(tempfile.mkdtemp())
        >>> out["y"]
        MemoryMappedTensor([0., 0., 0.])
    """
    if prefix is None:
        return _anonymous(td, like=True, inplace=False)
    root = _prefix(prefix)
    _check_target(root, existsok)
    plan = _Plan(like=True, inplace=False)
    build = _plan_node(td, root, plan)
    return _execute(plan, root, build, num_threads).lock_()


def _check_target(root: str, existsok: bool) -> None:
    if not existsok and os.path.exists(os.path.join(root, fmt.META)):
        raise FileExistsError(
            f"{root} already holds a saved tensordict. Pass existsok=True to overwrite it."
        )


# ====================================================================== loading
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
    root = _prefix(prefix)
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
        return _load_lazy(directory, meta, allow_pickle)
    if tag == fmt.TYPE_NON_TENSOR:
        return _load_non_tensor(directory, meta, allow_pickle, batch_size)
    if tag == fmt.TYPE_NON_TENSOR_STACK:
        return _load_non_tensor_stack(directory, meta, allow_pickle, batch_size)
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
    try:
        batch_size = torch.Size(meta.get("shape", []))
    except (TypeError, ValueError):
        raise MemmapFormatError(f"{meta_path}: 'shape' must be a list of ints.") from None
    dev = meta.get("device")
    device = None if dev in (None, "None") else torch.device(str(dev))
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
        elif shape is not None and tuple(shape[:n]) != tuple(batch_size):
            raise MemmapFormatError(
                f"{meta_path}: entry {key!r} has shape {list(shape)}, which does not start with "
                f"the batch size {list(batch_size)}."
            )
        source[key] = value
    td = TensorDict._new_unsafe(source, batch_size, device, is_memmap=True)
    td._memmap_prefix = directory
    return td


def _load_leaf(directory: str, key: str, entry: dict[str, Any], meta_path: str) -> torch.Tensor:
    if entry.get("is_nested"):
        raise MemmapFormatError(
            f"{meta_path}: {key!r} is a nested (jagged) tensor, which this library does not store."
        )
    dtype = dtype_from_str(str(entry["dtype"]), meta_path)
    try:
        shape = torch.Size(entry["shape"])
    except (TypeError, ValueError):
        raise MemmapFormatError(
            f"{meta_path}: the shape of {key!r} must be a list of ints."
        ) from None
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


def _load_lazy(directory: str, meta: dict[str, Any], allow_pickle: bool) -> LazyStackedTensorDict:
    members = []
    i = 0
    while os.path.isdir(os.path.join(directory, str(i))):
        sub = os.path.join(directory, str(i))
        members.append(_load_node(sub, fmt.read_meta(sub), allow_pickle, None))
        i += 1
    if not members:
        raise IncompleteMemmapError(
            f"{directory} is a saved lazy stack with no members (0/, 1/, ...)."
        )
    out = LazyStackedTensorDict(*members, stack_dim=int(meta.get("stack_dim", 0)))
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
    if data is None:
        return _load_lazy(directory, meta, allow_pickle)
    shape = list(batch_size) if batch_size is not None else None
    return NonTensorStack.from_array(_object_array(data, shape))


def _load_tensorclass(cls: type, directory: str, meta: dict[str, Any], allow_pickle: bool) -> Any:
    fields = {k: v for k, v in meta.items() if k != "_type"}
    pickled = os.path.join(directory, "other.pickle")
    if os.path.exists(pickled):
        fields.update(_read_pickle(pickled, allow_pickle))
    inner_dir = os.path.join(directory, "_tensordict")
    td = _load_td(inner_dir, fmt.read_meta(inner_dir), allow_pickle)
    return cls._from_tensordict(td, fields)  # type: ignore[attr-defined]


# ====================================================================== in-place updates
def memmap_refresh_(td: Any) -> Any:
    """Reload the leaves from the directory (after another process rewrote its metadata)."""
    if td.saved_path is None:
        raise MemmapFormatError(
            "memmap_refresh_ needs a tensordict memory-mapped to a directory; this one has none."
        )
    fresh = load_memmap(td.saved_path)
    if isinstance(td, TensorDict):
        td._tensordict.clear()
        td._tensordict.update(fresh._tensordict)
        td._batch_size = fresh.batch_size
        if td.is_locked:
            td._set_locked(True)
        return td
    _transplant(td, fresh)
    return td


def _memmap_parent(td: Any, key: NestedKey) -> tuple[TensorDict, str]:
    path = key_path(key)
    parent = td._parent_for_write(path, create=False)
    if not isinstance(parent, TensorDict) or parent.saved_path is None:
        raise MemmapFormatError(
            f"make_memmap({key!r}) needs a tensordict memory-mapped to a directory "
            "(td.memmap_(prefix) or TensorDict.load_memmap(prefix)); this one has no directory."
        )
    return parent, path[-1]


def make_memmap(
    td: Any, key: NestedKey, shape: Sequence[int], *, dtype: Any = None
) -> MemoryMappedTensor:
    """Add a zero-filled memory-mapped leaf under ``key`` (works on locked tensordicts)."""
    parent, name = _memmap_parent(td, key)
    return _add_leaf(parent, name, torch.Size(shape), dtype or torch.get_default_dtype(), None)


def make_memmap_from_tensor(
    td: Any, key: NestedKey, tensor: torch.Tensor, *, copy_data: bool = True
) -> MemoryMappedTensor:
    """Add a memory-mapped leaf holding a copy of ``tensor`` under ``key``."""
    parent, name = _memmap_parent(td, key)
    return _add_leaf(parent, name, tensor.shape, tensor.dtype, tensor if copy_data else None)


def _add_leaf(
    parent: TensorDict, name: str, shape: torch.Size, dtype: torch.dtype, data: Any
) -> MemoryMappedTensor:
    bs = parent.batch_size
    if tuple(shape[: len(bs)]) != tuple(bs):
        raise BatchSizeError(
            f"cannot make {name!r} of shape {list(shape)}: it must start with the batch size "
            f"{list(bs)}."
        )
    directory = str(parent.saved_path)
    path = fmt.entry_path(directory, name, ".memmap")
    write_file(path, data, shape, dtype)
    leaf = MemoryMappedTensor._map(path, dtype, shape)
    parent._tensordict[name] = leaf
    meta = fmt.read_meta(directory)
    tail = {k: meta.pop(k) for k in fmt.RESERVED if k in meta and not isinstance(meta[k], dict)}
    meta[name] = fmt.leaf_entry(leaf, "cpu")
    meta.update(tail)
    fmt.write_meta(directory, meta)
    return leaf
