"""Writing memory-mapped tensordicts: memmap_, memmap, memmap_like, make_memmap, refresh.

Loading lives in :mod:`tensordict.memmap.load` (``load_memmap`` is re-exported here).

A write runs in four steps, so that bad input writes nothing and an interrupted write never loads:

1. plan: walk the tree, validate every leaf, list the data files and the ``meta.json`` of every
   directory (children before parents);
2. invalidate: remove the ``meta.json`` of every directory about to be rewritten (the root's
   first), and what an earlier save left that the new one would not overwrite;
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
from tensordict.core.non_tensor import (
    MetaData,
    NonTensorData,
    NonTensorStack,
    register_save_hook,
)
from tensordict.core.pickling import _DTYPES
from tensordict.core.unbatched import is_unbatched
from tensordict.errors import (
    AlreadyMemmappedError,
    BatchSizeError,
    MemmapFormatError,
    UnbatchedMemmapError,
)
from tensordict.memmap import format as fmt
from tensordict.memmap.load import load_memmap
from tensordict.memmap.tensor import (
    MemoryMappedTensor,
    is_whole_file,
    write_file,
)

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
        #: files and folders of an earlier save that the new one must not leave behind
        self.stale: list[str] = []


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
    if is_unbatched(value):
        raise UnbatchedMemmapError(
            f"cannot memory-map {key!r} (in {directory}): it is an UnbatchedTensor, which has no "
            f"on-disk layout (upstream tensordict refuses it too). Exclude it first, e.g. "
            f"td.exclude({key!r}), and save it separately (torch.save)."
        )
    if value.layout is not torch.strided or value.is_nested:
        raise MemmapFormatError(
            f"cannot memory-map {key!r} (in {directory}): it is a {value.layout} tensor; only "
            "dense (strided) tensors can be stored. Convert it with .to_dense() first."
        )
    if str(value.dtype) not in _DTYPES:
        raise MemmapFormatError(
            f"cannot memory-map {key!r} (in {directory}): dtype {value.dtype} is not supported."
        )


def _claim_name(taken: dict[str, str], directory: str, key: str, suffix: str) -> None:
    """Refuse, before anything is written, a key the format cannot hold apart from the others."""
    if key in fmt.RESERVED:
        raise MemmapFormatError(
            f"cannot memory-map the entry {key!r} (in {directory}): meta.json uses {key!r} for "
            "the tensordict itself, so the entry would be lost. Rename the key."
        )
    name = fmt.encode_key(key) + suffix
    clash = "the metadata file" if name == fmt.META else taken.get(name)
    if clash is not None:
        raise MemmapFormatError(
            f"cannot memory-map the entry {key!r} (in {directory}): its file name {name!r} is "
            f"also used by {clash}. Rename one of them."
        )
    taken[name] = f"the entry {key!r}"


def _plan_td(td: TensorDictBase, directory: str, plan: _Plan) -> Builder:
    entries: dict[str, Any] = {}
    builders: dict[str, Builder] = {}
    taken: dict[str, str] = {}
    for key, value in td._own_items():
        is_leaf = isinstance(value, torch.Tensor)
        _claim_name(taken, directory, key, ".memmap" if is_leaf else "")
        if isinstance(value, torch.Tensor):
            _check_leaf(key, value, directory)
            path = fmt.entry_path(directory, key, ".memmap")
            if plan.like or not is_whole_file(value, path):
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
    # members of an earlier, longer stack would load as extra members: remove them
    extra = len(members)
    while os.path.lexists(os.path.join(directory, str(extra))):
        plan.stale.append(os.path.join(directory, str(extra)))
        extra += 1
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
        out._saved_path = directory  # type: ignore[attr-defined]
        return out

    return build


def _split_jsonable(fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    inline = {k: v for k, v in fields.items() if fmt.is_jsonable(v)}
    pickled = {k: v for k, v in fields.items() if k not in inline}
    return inline, pickled


def _plan_tensorclass(tc: Any, directory: str, plan: _Plan) -> Builder:
    inner = _plan_td(tc._tensordict, os.path.join(directory, "_tensordict"), plan)
    inline, pickled = _split_jsonable(dict(tc._non_tensordict))
    _plan_pickle(plan, os.path.join(directory, "other.pickle"), pickled or None)
    plan.metas.append((directory, {"_type": fmt.type_string(type(tc)), **inline}))

    def build() -> Any:
        td = inner()
        if plan.inplace:
            return tc
        return type(tc)._from_tensordict(td, dict(tc._non_tensordict))

    return build


def _plan_non_tensor(value: NonTensorData, directory: str, plan: _Plan) -> Builder:
    kind = fmt.TYPE_METADATA if isinstance(value, MetaData) else fmt.TYPE_NON_TENSOR
    meta: dict[str, Any] = {"_type": kind}
    inline = fmt.is_jsonable(value.data)
    if inline:
        meta["data"] = value.data
    pickled = None if inline else {"data": value.data}
    _plan_pickle(plan, os.path.join(directory, "other.pickle"), pickled)
    meta["_metadata"] = None
    meta["_is_non_tensor"] = True
    plan.metas.append((directory, meta))
    return _saved_non_tensor(value, directory, plan)


def _plan_non_tensor_stack(value: NonTensorStack, directory: str, plan: _Plan) -> Builder:
    data = value.tolist()
    device = None if value.device is None else str(value.device)
    meta: dict[str, Any] = {"_type": fmt.TYPE_NON_TENSOR_STACK, "stack_dim": 0, "device": device}
    inline = fmt.is_jsonable(data)
    meta["data"] = data if inline else "pickle.pkl"
    _plan_pickle(plan, os.path.join(directory, "pickle.pkl"), None if inline else data)
    plan.metas.append((directory, meta))
    return _saved_non_tensor(value, directory, plan)


def _saved_non_tensor(value: Any, directory: str, plan: _Plan) -> Builder:
    """The entry as held by the saved tensordict: marked memory-mapped at ``directory``, so that
    an in-place update of its value rewrites its files (see :func:`_rewrite_non_tensor`)."""

    def build() -> Any:
        out = value if plan.inplace else value.copy()
        out._mark_saved(directory)
        return out

    return build


def _rewrite_non_tensor(value: Any, directory: str) -> None:
    """Rewrite the files of a memory-mapped non-tensor entry after its value changed."""
    plan = _Plan(like=False, inplace=True)
    if isinstance(value, NonTensorStack):
        _plan_non_tensor_stack(value, directory, plan)
    else:
        _plan_non_tensor(value, directory, plan)
    _execute(plan, directory, lambda: value, 0)


register_save_hook(_rewrite_non_tensor)


def _plan_pickle(plan: _Plan, path: str, obj: Any) -> None:
    """Pickle ``obj`` to ``path``; with nothing to pickle, remove a stale file left there (an
    upstream loader would let it override the inline data)."""
    if obj is not None:
        plan.pickles.append((path, obj))
    elif os.path.lexists(path):
        plan.stale.append(path)


# ====================================================================== executing
def _execute(plan: _Plan, root: str, build: Builder, num_threads: int) -> Any:
    targets = [job[0] for job in plan.files] + [path for path, _ in plan.pickles] + plan.stale
    for path in targets + [os.path.join(d, fmt.META) for d, _ in plan.metas]:
        fmt.check_write_inside(root, path)
    # the root's meta.json goes first: from here until the end, the directory does not load
    fmt.invalidate([root] + [d for d, _ in reversed(plan.metas)])
    for path in plan.stale:
        fmt.remove(path)
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


def _is_written(node: Any, directory: str | None) -> bool:
    """Whether every leaf already is its file under ``directory`` (any memory-mapped tensor when
    ``directory`` is None), so that memmap_ has nothing to do."""
    if isinstance(node, LazyStackedTensorDict):
        return all(
            _is_written(m, None if directory is None else os.path.join(directory, str(i)))
            for i, m in enumerate(node.tensordicts)
        )
    if _is_tensorclass(node):
        sub = None if directory is None else os.path.join(directory, "_tensordict")
        return _is_written(node._tensordict, sub)
    if not isinstance(node, TensorDictBase):
        return True  # non-tensor data: nothing mapped
    for key, value in node._own_items():
        is_leaf = isinstance(value, torch.Tensor)
        path = None
        if directory is not None:
            path = fmt.entry_path(directory, key, ".memmap" if is_leaf else "")
        if not is_leaf:
            ok = _is_written(value, path)
        elif path is None:
            ok = isinstance(value, MemoryMappedTensor)
        else:
            ok = is_whole_file(value, path)
        if not ok:
            return False
    return True


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
        if td.is_memmap() and td.saved_path is None and td.is_locked and _is_written(td, None):
            return td
        return _anonymous(td, like=False, inplace=True)
    root = _prefix(prefix)
    if td.is_memmap() and td.saved_path is not None and not copy_existing:
        if td.saved_path != root:
            raise AlreadyMemmappedError(
                f"this tensordict is memory-mapped at {td.saved_path}; memmap_({root!r}) would "
                "move it. Pass copy_existing=True to copy the files, or use td.memmap(prefix) for "
                "a copy."
            )
        if td.is_locked and _is_written(td, root):
            return td
        # entries were added or replaced since: rewrite the metadata, and the data files of
        # the leaves that are not already their file
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
    if name in fmt.RESERVED:
        raise MemmapFormatError(
            f"cannot make the memory-mapped entry {name!r} (in {directory}): meta.json uses "
            f"{name!r} for the tensordict itself. Choose another key."
        )
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
