"""``td[index] = value``: validate every write first, then perform them all.

The value may be a tensordict, a tensorclass, a dict, a tensor or a scalar. Keys the target lacks
are preallocated (zeros of the target's batch size plus the value's feature shape), so that
``td = TensorDict(batch_size=[N]); td[i] = sample`` fills a buffer. Writing different python objects
into part of a batch turns :class:`NonTensorData` into a :class:`NonTensorStack`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.shape import broadcasts_to
from tensordict.core.collection import TensorCollection
from tensordict.core.indexing import IndexPlan, plan_index
from tensordict.core.keys import key_path
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack, same_value
from tensordict.core.unbatched import is_unbatched
from tensordict.errors import CycleError, LockedError, ShapeMismatchError

__all__ = ["refuse_cycle", "setitem_index", "stage_setitem"]

_MISSING: Any = object()
Write = Callable[[], None]


def _unwrap(value: Any) -> Any:
    return value._tensordict if getattr(type(value), "_is_tensorclass", False) else value


def _nodes(td: Any) -> Any:
    """The tensordicts a value stored in ``td`` really lands in (a lazy stack's members too)."""
    yield td
    yield from getattr(td, "tensordicts", ())


def refuse_cycle(root: Any, path: tuple[str, ...], value: Any) -> None:
    """Raise :class:`~tensordict.errors.CycleError` if storing ``value`` under ``path`` of ``root``
    would make ``root`` contain itself (``td["a"] = td``, ``td["a", "b"] = td``, ...).

    Walks the tensordicts nested in ``value`` (tensors are not visited) looking for ``root`` or a
    tensordict on ``path``.

    Not under torch.compile: the ``id()`` of a tensordict the compiled function received would
    become a guard on that very object, and every call with a new tensordict would recompile.
    """
    inner = _unwrap(value)
    if not isinstance(inner, TensorCollection) or torch.compiler.is_compiling():
        return
    ancestors: set[int] = set()
    node = root
    for part in (None, *path[:-1]):
        node = node if part is None else _unwrap(node._get_str(part, None))
        if not isinstance(node, TensorCollection):
            break
        ancestors.update(id(n) for n in _nodes(node))
    seen: set[int] = set()
    todo = [inner]
    while todo:
        node = todo.pop()
        if id(node) in ancestors:
            key = path[0] if len(path) == 1 else path
            raise CycleError(
                f"cannot set {key!r}: the value contains the tensordict it would be stored in, "
                "and a tensordict that contains itself cannot be used (every operation would "
                "recurse forever). Store a copy instead, e.g. td.set(key, value.clone())."
            )
        if id(node) in seen:
            continue
        seen.add(id(node))
        members = getattr(node, "tensordicts", None)
        if members is not None:  # a lazy stack: its entries are its members'
            todo.extend(members)
            continue
        for _, child in node._own_items():
            child = _unwrap(child)
            if isinstance(child, TensorCollection):
                todo.append(child)


def setitem_index(td: Any, index: Any, value: Any) -> None:
    """Write ``value`` into ``td[index]`` in place, all or nothing."""
    for write in stage_setitem(td, index, value):
        write()


def stage_setitem(td: Any, index: Any, value: Any) -> list[Write]:
    """Validate ``td[index] = value`` and return the writes, without performing any.

    Lazy stacks stage their members' writes through ``_stage_setitem_index``, so that a value
    that fits one member but not the next is refused before the first member is written.
    """
    if hasattr(td, "_stage_setitem_index"):
        return td._stage_setitem_index(index, value)  # type: ignore[no-any-return]
    plan = plan_index(index, td.batch_size)
    writes: list[Write] = []
    if isinstance(value, TensorCollection) or getattr(type(value), "_is_tensorclass", False):
        inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
        if not broadcasts_to(inner.batch_size, plan.batch_size):
            raise ShapeMismatchError(
                f"Cannot broadcast the tensordict of batch_size={list(inner.batch_size)} to "
                f"td[index] of batch size {list(plan.batch_size)}: the value's batch size differs "
                "from the source batch size at that index. Give a value of that batch size (or "
                "one that broadcasts to it)."
            )
        _stage_collection(td, (), inner, inner.batch_size, plan, len(td.batch_size), writes)
    elif isinstance(value, Mapping):
        _stage_mapping(td, (), value, plan, len(td.batch_size), writes)
    else:
        _stage_broadcast(td, value, plan, len(td.batch_size), writes)
    return writes


def _items(value: Any) -> Any:
    if getattr(type(value), "_is_tensorclass", False):
        value = value._tensordict
    if isinstance(value, TensorCollection):
        return value._own_items()
    return _nest(value).items()


def _nest(mapping: Mapping[Any, Any]) -> Mapping[str, Any]:
    """A mapping whose nested keys (``("b", "c")``) become nested dicts, as ``set`` reads them.

    Entries given both ways (``{("b", "c"): x, "b": {"d": y}}``) are merged; the caller's dicts
    are never modified.
    """
    if all(type(k) is str for k in mapping):
        return mapping
    out: dict[str, Any] = {}
    for path, v in flat_items(mapping):
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ShapeMismatchError(
                    f"the value gives both an entry {part!r} and entries nested under it "
                    f"({path!r}): give one or the other."
                )
        node[path[-1]] = v
    return out


def flat_items(mapping: Mapping[Any, Any], prefix: tuple[str, ...] = ()) -> list[tuple[Any, Any]]:
    """``(key path, value)`` of every leaf of a (possibly nested) plain mapping."""
    items: list[tuple[Any, Any]] = []
    for key, v in mapping.items():
        path = prefix + key_path(key)
        if isinstance(v, Mapping) and not isinstance(v, TensorCollection) and v:
            items += flat_items(v, path)
        else:
            items.append((path, v))
    return items


def _stage_mapping(
    td: Any,
    path: tuple[str, ...],
    value: Mapping[str, Any],
    plan: IndexPlan,
    root_bd: int,
    writes: list[Write],
) -> None:
    _stage_collection(td, path, value, plan.batch_size, plan, root_bd, writes)


def _stage_collection(
    container: Any,
    path: tuple[str, ...],
    value: Any,
    value_bs: torch.Size,
    plan: IndexPlan,
    root_bd: int,
    writes: list[Write],
) -> None:
    for key, v in _items(value):
        key_p = path + (key,)
        target = container._get_str(key, _MISSING) if container is not None else _MISSING
        if getattr(type(target), "_is_tensorclass", False):
            target = target._tensordict
        if isinstance(v, (TensorCollection, Mapping)) or getattr(type(v), "_is_tensorclass", False):
            if hasattr(target, "_stage_setitem_index"):
                writes.extend(target._stage_setitem_index(plan.leaf_index, v))
                continue
            # a nested tensordict value may have batch dims of its own beyond the parent's
            nested_bs = v.batch_size if isinstance(v, TensorCollection) else value_bs
            if target is _MISSING:
                nested = _new_container(container, key, key_p, writes)
                _stage_collection(nested, key_p, v, nested_bs, plan, root_bd, writes)
                continue
            _stage_collection(target, key_p, v, nested_bs, plan, root_bd, writes)
        elif isinstance(v, (torch.Tensor, int, float, bool, np.ndarray, np.number)):
            t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v)
            _stage_tensor(container, key, key_p, target, t, value_bs, plan, root_bd, writes)
        else:
            _stage_non_tensor(container, key, target, v, plan, writes)


class _Pending:
    """A nested tensordict that will be created when the writes are committed."""

    def __init__(self, parent: Any, key: str, path: tuple[str, ...]) -> None:
        self.parent, self.key, self.path = parent, key, path
        self.children: dict[str, Any] = {}
        self.td: Any = None

    @property
    def batch_size(self) -> torch.Size:
        return self.parent.batch_size

    @property
    def device(self) -> Any:
        return self.parent.device

    def _get_str(self, key: str, default: Any) -> Any:
        return default

    def materialise(self) -> Any:
        if self.td is None:
            parent = self.parent.materialise() if isinstance(self.parent, _Pending) else self.parent
            self.td = parent._new_dense({}, parent.batch_size)
            parent._set_str(self.key, self.td, validated=True)
        return self.td


def _new_container(container: Any, key: str, path: tuple[str, ...], writes: list[Write]) -> Any:
    _check_unlocked(container, path)
    return _Pending(container, key, path)


def _check_unlocked(container: Any, path: tuple[str, ...]) -> None:
    root = container
    while isinstance(root, _Pending):
        root = root.parent
    if getattr(root, "is_locked", False):
        raise LockedError(
            f"cannot preallocate the missing entry {path!r} while writing td[index] = ...: the "
            "tensordict is locked. Add the key first (with td.unlock_()), or write only existing "
            "keys."
        )


def _resolve(container: Any) -> Any:
    return container.materialise() if isinstance(container, _Pending) else container


def _stage_tensor(
    container: Any,
    key: str,
    path: tuple[str, ...],
    target: Any,
    value: torch.Tensor,
    value_bs: torch.Size,
    plan: IndexPlan,
    root_bd: int,
    writes: list[Write],
) -> None:
    leaf_index = plan.leaf_index
    if is_unbatched(target) or is_unbatched(value):
        return  # an unbatched entry has no batch elements to write: it stays as it is
    if target is _MISSING:
        _check_unlocked(container, path)
        feature = value.shape[len(value_bs) :]
        bs = container.batch_size
        expected = plan.batch_size + bs[root_bd:] + feature
        _check_broadcast(path, value, expected)
        dtype, device = value.dtype, container.device or value.device

        def create() -> None:
            parent = _resolve(container)
            buf = torch.zeros((*parent.batch_size, *feature), dtype=dtype, device=device)
            buf[leaf_index] = value
            parent._set_str(key, buf, validated=True)

        writes.append(create)
        return
    if not isinstance(target, torch.Tensor):
        raise ShapeMismatchError(
            f"cannot write a tensor into {path!r}, which holds a {type(target).__name__}."
        )
    expected = plan.batch_size + target.shape[root_bd:]
    _check_broadcast(path, value, expected)
    value = _cast_like(value, target)

    def write() -> None:
        target[leaf_index] = value

    writes.append(write)


def _cast_like(value: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # Cast while validating: advanced-index writes (index_put) refuse a dtype mismatch, which
    # would otherwise fail half-way through the writes.
    if value.dtype != target.dtype or value.device != target.device:
        return value.to(dtype=target.dtype, device=target.device)
    return value


def _check_broadcast(path: tuple[str, ...], value: torch.Tensor, expected: torch.Size) -> None:
    if not broadcasts_to(value.shape, expected):
        raise ShapeMismatchError(
            f"cannot write {path!r}: the value has shape {list(value.shape)} but the indexed "
            f"entry has shape {list(expected)}. Give a value of that shape (or one that "
            "broadcasts)."
        )


def _stage_non_tensor(
    container: Any, key: str, target: Any, value: Any, plan: IndexPlan, writes: list[Write]
) -> None:
    leaf_index = plan.leaf_index
    if target is _MISSING:
        _check_unlocked(container, (key,))

        def create() -> None:
            parent = _resolve(container)
            if not isinstance(value, NonTensorStack):  # one value: it fills the batch (upstream)
                data = value.data if isinstance(value, NonTensorData) else value
                entry = NonTensorData._new(data, parent.batch_size, parent.device)
                parent._set_str(key, entry, validated=True)
                return
            values = np.empty(tuple(parent.batch_size), dtype=object)
            stack = NonTensorStack.from_array(values, parent.device)
            stack._setitem(leaf_index, value)
            parent._set_str(key, stack.maybe_collapse(), validated=True)

        writes.append(create)
        return
    if isinstance(target, NonTensorData):
        new = value.data if isinstance(value, NonTensorData) else value
        if not isinstance(value, NonTensorStack) and same_value(target.data, new):
            return

        def convert() -> None:
            stack = NonTensorStack.from_array(target.to_array().copy(), target.device)
            stack._setitem(leaf_index, value)
            container._set_str(key, stack, validated=True)

        writes.append(convert)
        return
    if isinstance(target, NonTensorStack):
        writes.append(lambda: target._setitem(leaf_index, value))
        return
    raise ShapeMismatchError(
        f"cannot write the python object {value!r} into {key!r}, which holds a "
        f"{type(target).__name__}. Store python objects under their own key."
    )


def _stage_broadcast(
    td: Any,
    value: Any,
    plan: IndexPlan,
    root_bd: int,
    writes: list[Write],
    prefix: tuple[str, ...] = (),
) -> None:
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    # walk the stored entries: a nested lazy stack writes into its members itself (its values
    # read as stacked copies)
    for key, target in td._own_items():
        path = prefix + (key,)
        if getattr(type(target), "_is_tensorclass", False):
            target = target._tensordict
        if hasattr(target, "_stage_setitem_index"):
            writes.extend(target._stage_setitem_index(plan.leaf_index, t))
        elif isinstance(target, TensorCollection):
            _stage_broadcast(target, t, plan, root_bd, writes, path)
        elif isinstance(target, torch.Tensor):
            expected = plan.batch_size + target.shape[root_bd:]
            _check_broadcast(path, t, expected)
            writes.append(_writer(target, plan.leaf_index, _cast_like(t, target)))


def _writer(target: torch.Tensor, leaf_index: Any, value: torch.Tensor) -> Write:
    def write() -> None:
        target[leaf_index] = value

    return write
