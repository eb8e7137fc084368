"""Planning a memory-mapped write: everything is validated before the directory is touched.

:func:`plan` walks a tensordict (dense, lazy stack, tensorclass, non-tensor data) and returns a
:class:`Plan`: the data files, pickles and ``meta.json`` bytes of the new version, and a builder
that maps the files once they are in place. Bad input raises here, so that it writes nothing:
keys the format cannot hold (reserved names, clashing or too-long file names, paths too long),
unsupported tensors (sparse, nested, unknown dtypes, meta-device data to copy), non-tensor data
that does not pickle, nesting deeper than :data:`~tensordict.memmap.format.MAX_DEPTH`.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.lazy.views import _SubTensorDict
from tensordict.core.nontensor.data import MetaData, NonTensorData, NonTensorStack
from tensordict.core.serial.pickling import _DTYPES
from tensordict.core.unbatched import is_unbatched
from tensordict.errors import (
    FileNameTooLongError,
    MemmapFormatError,
    NotPicklableError,
    UnbatchedMemmapError,
)
from tensordict.memmap import format as fmt
from tensordict.memmap.nested import loaded_nested, nested_buffer, nested_numel, nested_sizes
from tensordict.memmap.tensor import MemoryMappedTensor

__all__ = ["Leaf", "Plan", "plan"]

Builder = Callable[[], Any]
CPU = torch.device("cpu")
#: bytes a path may grow by while it is written in a staging folder beside the prefix
STAGING_MARGIN = 64
PATH_MAX = 4096


@dataclass
class Leaf:
    """One data file of the new version: the tensor's bytes, or zeros when ``value`` is None."""

    path: str
    value: torch.Tensor | None
    shape: torch.Size
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        return int(self.shape.numel()) * torch.empty((), dtype=self.dtype).element_size()


@dataclass
class Plan:
    """Everything a write will put under ``root``, collected before anything is written.

    Paths are final paths (under ``root``); the writer may stage them elsewhere first.
    """

    root: str
    like: bool
    inplace: bool
    leaves: list[Leaf] = field(default_factory=list)
    pickles: list[tuple[str, bytes]] = field(default_factory=list)
    #: ``(directory, meta.json bytes)``, children before their parents, the root's last
    metas: list[tuple[str, bytes]] = field(default_factory=list)

    def directories(self) -> list[str]:
        """Every folder of the new version, parents before children."""
        return [d for d, _ in reversed(self.metas)]

    def names(self) -> dict[str, set[str]]:
        """The names the new version writes in each of its folders."""
        out: dict[str, set[str]] = {d: {fmt.META} for d in self.directories()}
        paths = [leaf.path for leaf in self.leaves] + [p for p, _ in self.pickles]
        for path in paths + [d for d in self.directories() if d != self.root]:
            out.setdefault(os.path.dirname(path), {fmt.META}).add(os.path.basename(path))
        return out


def plan(td: Any, root: str, like: bool, inplace: bool) -> tuple[Plan, Builder]:
    """Validate ``td`` and plan writing it under ``root``; return the plan and its builder.

    Raises:
        MemmapFormatError: a key or tensor the format cannot hold (FileNameTooLongError for names
            and paths longer than the file system allows), or nesting deeper than ``MAX_DEPTH``.
        NotPicklableError: non-tensor data that is neither JSON nor picklable.
        TypeError: an entry that is not a tensor, tensordict, tensorclass or non-tensor data.
    """
    out = Plan(root, like, inplace)
    build = _plan_node(td, root, out, 0)
    return out, build


def _plan_node(value: Any, directory: str, plan: Plan, depth: int) -> Builder:
    if depth > fmt.MAX_DEPTH:
        raise MemmapFormatError(
            f"cannot memory-map {directory}: it is nested deeper than {fmt.MAX_DEPTH} levels "
            "below the prefix, which load_memmap refuses. Flatten the structure."
        )
    _check_path(plan, directory, "")
    if isinstance(value, LazyStackedTensorDict):
        return _plan_lazy(value, directory, plan, depth)
    if isinstance(value, _SubTensorDict):
        return _plan_sub(value, directory, plan, depth)
    if isinstance(value, TensorDictBase):
        return _plan_td(value, directory, plan, depth)
    if _is_tensorclass(value):
        return _plan_tensorclass(value, directory, plan, depth)
    if isinstance(value, NonTensorData):
        return _plan_non_tensor(value, directory, plan)
    if isinstance(value, NonTensorStack):
        return _plan_non_tensor_stack(value, directory, plan)
    raise TypeError(f"cannot memory-map a {type(value).__name__}.")


def _is_tensorclass(value: Any) -> bool:
    return bool(getattr(type(value), "_is_tensorclass", False))


def _type_name(value: Any) -> str:
    if isinstance(value, LazyStackedTensorDict):
        return "LazyStackedTensorDict"
    if isinstance(value, TensorDictBase):
        return "TensorDict"
    return type(value).__name__


# ====================================================================== validation
def _check_leaf(key: str, value: torch.Tensor, directory: str, like: bool) -> None:
    if is_unbatched(value):
        raise UnbatchedMemmapError(
            f"cannot memory-map {key!r} (in {directory}): it is an UnbatchedTensor, which has no "
            f"on-disk layout (upstream tensordict refuses it too). Exclude it first, e.g. "
            f"td.exclude({key!r}), and save it separately (torch.save)."
        )
    if value.layout not in (torch.strided, torch.jagged):
        raise MemmapFormatError(
            f"cannot memory-map {key!r} (in {directory}): it is a {value.layout} tensor; only "
            "dense (strided) and nested tensors can be stored. Convert it with .to_dense() first."
        )
    if str(value.dtype) not in _DTYPES:
        raise MemmapFormatError(
            f"cannot memory-map {key!r} (in {directory}): dtype {value.dtype} is not supported."
        )
    if value.device.type == "meta" and not like:
        raise MemmapFormatError(
            f"cannot memory-map {key!r} (in {directory}): it is on the meta device, which holds "
            "no data to write. Materialise it first, or use memmap_like (shapes only)."
        )


def _claim_name(taken: dict[str, str], directory: str, key: str, suffix: str) -> str:
    """Refuse, before anything is written, a key the format cannot hold apart from the others;
    return its file name."""
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
    size = len(os.fsencode(name))
    if size > fmt.NAME_MAX:
        raise FileNameTooLongError(
            f"cannot memory-map the entry {key[:40]!r}... (in {directory}): its file name is "
            f"{size} bytes long, and file systems allow at most {fmt.NAME_MAX}. Shorten the key."
        )
    taken[name] = f"the entry {key!r}"
    return name


def _check_path(plan: Plan, directory: str, name: str) -> None:
    path = os.path.join(directory, name) if name else directory
    size = len(os.fsencode(path)) + STAGING_MARGIN
    if size >= PATH_MAX:
        raise FileNameTooLongError(
            f"cannot memory-map {path[:80]}...: the path is {size - STAGING_MARGIN} bytes long, "
            f"and paths may have at most {PATH_MAX - STAGING_MARGIN - 1} bytes here. Use shorter "
            "keys or less nesting."
        )


def _pickled(obj: Any, what: str) -> bytes:
    try:
        return pickle.dumps(obj)
    except Exception as err:
        raise NotPicklableError(
            f"cannot memory-map {what}: its value is neither JSON nor picklable ({err}). Store "
            "picklable objects, or drop the entry before saving."
        ) from None


# ====================================================================== tensordicts
def _plan_td(td: TensorDictBase, directory: str, plan: Plan, depth: int) -> Builder:
    entries: dict[str, Any] = {}
    builders: dict[str, Builder] = {}
    taken: dict[str, str] = {}
    for key, value in td._own_items():
        is_leaf = isinstance(value, torch.Tensor)
        name = _claim_name(taken, directory, key, ".memmap" if is_leaf else "")
        _check_path(plan, directory, name)
        path = os.path.join(directory, name)
        if isinstance(value, torch.Tensor) and value.is_nested:
            _check_leaf(key, value, directory, plan.like)
            entries[key], builders[key] = _plan_nested(key, value, path, taken, plan)
        elif isinstance(value, torch.Tensor):
            _check_leaf(key, value, directory, plan.like)
            source = None if plan.like else value
            entries[key] = fmt.leaf_entry(value, "cpu" if value.device.type == "meta" else None)
            if value.numel() == 0:  # as upstream: no file for an empty leaf (the loader knows)
                builders[key] = _empty_builder(value.dtype, value.shape)
                continue
            plan.leaves.append(Leaf(path, source, value.shape, value.dtype))
            builders[key] = _leaf_builder(path, value.dtype, value.shape)
        else:
            entries[key] = {"type": _type_name(value)}
            builders[key] = _plan_node(value, path, plan, depth + 1)
    meta = {
        **entries,
        "shape": list(td.batch_size),
        "device": "cpu",
        "_type": fmt.TYPE_TD,
        "_format_version": fmt.FORMAT_VERSION,
        "_class": fmt.CLASS_TD,
    }
    plan.metas.append((directory, fmt.dumps(meta)))

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


def _plan_nested(
    key: str, value: torch.Tensor, path: str, taken: dict[str, str], plan: Plan
) -> tuple[dict[str, Any], Builder]:
    """A nested tensor as upstream stores it: its values one element after another in
    ``<key>.memmap``, the ``(n, ndim)`` int64 element sizes in ``<key>.shape.memmap``."""
    directory = os.path.dirname(path)
    shape_path = os.path.join(directory, _claim_name(taken, directory, key, ".shape.memmap"))
    _check_path(plan, directory, os.path.basename(shape_path))
    sizes = nested_sizes(value)
    numel = nested_numel(sizes)
    device = "cpu" if value.device.type == "meta" else str(value.device)
    entry: dict[str, Any] = {"device": device, "shape": list(sizes.shape)}
    entry.update(dtype=str(value.dtype), is_nested=True)
    plan.leaves.append(Leaf(shape_path, sizes, sizes.shape, torch.int64))
    if numel == 0:
        return entry, lambda: loaded_nested(torch.empty(0, dtype=value.dtype), sizes)
    data = None if plan.like else nested_buffer(value)
    plan.leaves.append(Leaf(path, data, torch.Size([numel]), value.dtype))
    flat = _leaf_builder(path, value.dtype, torch.Size([numel]))
    return entry, lambda: loaded_nested(flat(), sizes)


def _empty_builder(dtype: torch.dtype, shape: torch.Size) -> Builder:
    return lambda: MemoryMappedTensor.from_tensor(torch.empty(shape, dtype=dtype))


def _leaf_builder(path: str, dtype: torch.dtype, shape: torch.Size) -> Builder:
    return lambda: MemoryMappedTensor._map(path, dtype, shape)


def _plan_lazy(td: LazyStackedTensorDict, directory: str, plan: Plan, depth: int) -> Builder:
    members = [
        _plan_node(m, os.path.join(directory, str(i)), plan, depth + 1)
        for i, m in enumerate(td.tensordicts)
    ]
    meta = {
        "_type": fmt.TYPE_LAZY,
        "_format_version": fmt.FORMAT_VERSION,
        "_class": fmt.CLASS_LAZY,
        "stack_dim": td.stack_dim,
        "stack_dim_name": getattr(td, "_td_dim_name", None),
        # not written by upstream (which ignores it): a missing member folder is then an error
        "num_members": len(members),
    }
    plan.metas.append((directory, fmt.dumps(meta)))

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


def _plan_sub(td: _SubTensorDict, directory: str, plan: Plan, depth: int) -> Builder:
    """A sub-tensordict as upstream saves it: its whole source in ``_source/``, its index in
    ``meta.json``."""
    source = _plan_node(td._source, os.path.join(directory, "_source"), plan, depth + 1)
    meta = {
        "_type": fmt.TYPE_SUB,
        "_format_version": fmt.FORMAT_VERSION,
        "_class": fmt.CLASS_SUB,
        "index": fmt.encode_index(td.idx),
    }
    plan.metas.append((directory, fmt.dumps(meta)))

    def build() -> Any:
        built = source()
        return td if plan.inplace else _SubTensorDict(built, td.idx)

    return build


def _plan_tensorclass(tc: Any, directory: str, plan: Plan, depth: int) -> Builder:
    inner = _plan_td(tc._tensordict, os.path.join(directory, "_tensordict"), plan, depth + 1)
    fields = dict(tc._non_tensordict)
    inline = {k: v for k, v in fields.items() if fmt.is_jsonable(v)}
    pickled = {k: v for k, v in fields.items() if k not in inline}
    if pickled:
        what = f"the fields {sorted(pickled)} of {type(tc).__name__} (in {directory})"
        plan.pickles.append((os.path.join(directory, "other.pickle"), _pickled(pickled, what)))
    plan.metas.append((directory, fmt.dumps({"_type": fmt.type_string(type(tc)), **inline})))

    def build() -> Any:
        td = inner()
        if plan.inplace:
            return tc
        return type(tc)._from_tensordict(td, dict(tc._non_tensordict))

    return build


def _plan_non_tensor(value: NonTensorData, directory: str, plan: Plan) -> Builder:
    kind = fmt.TYPE_METADATA if isinstance(value, MetaData) else fmt.TYPE_NON_TENSOR
    meta: dict[str, Any] = {"_type": kind}
    if fmt.is_jsonable(value.data):
        meta["data"] = value.data
    else:
        what = f"the non-tensor entry {os.path.basename(directory)!r} (in {directory})"
        plan.pickles.append(
            (os.path.join(directory, "other.pickle"), _pickled({"data": value.data}, what))
        )
    meta["_metadata"] = None
    meta["_is_non_tensor"] = True
    plan.metas.append((directory, fmt.dumps(meta)))
    return _saved_non_tensor(value, directory, plan)


def _plan_non_tensor_stack(value: NonTensorStack, directory: str, plan: Plan) -> Builder:
    data = value.tolist()
    meta: dict[str, Any] = {
        "_type": fmt.TYPE_NON_TENSOR_STACK,
        "_format_version": fmt.FORMAT_VERSION,
        "_class": fmt.CLASS_NON_TENSOR_STACK,
        "stack_dim": 0,
        "device": None,
    }
    if fmt.is_jsonable(data):
        meta["data"] = data
    else:
        meta["data"] = "pickle.pkl"
        what = f"the non-tensor stack {os.path.basename(directory)!r} (in {directory})"
        plan.pickles.append((os.path.join(directory, "pickle.pkl"), _pickled(data, what)))
    plan.metas.append((directory, fmt.dumps(meta)))
    return _saved_non_tensor(value, directory, plan)


def _saved_non_tensor(value: Any, directory: str, plan: Plan) -> Builder:
    """The entry as held by the saved tensordict: marked memory-mapped at ``directory``, so that
    an in-place update of its value rewrites its files (``io._rewrite_non_tensor``)."""

    def build() -> Any:
        out = value if plan.inplace else value.copy()
        out._mark_saved(directory)
        return out

    return build
