"""Tensordicts as pytree nodes of ``torch.utils._pytree`` (``tree_map``, ``tree_flatten``, ...).

A :class:`~tensordict.TensorDict` flattens into its tensors and nested tensordicts, in key order;
non-tensor entries, the batch size, names and device travel in the context. Unflattening keeps the
batch size when the new leaves still start with it, else takes the leading dims they share (see
``_new_batch_size``), and the device when every tensor is still on it. A lazy stack
flattens into its members.

``_exclude_td_from_pytree`` lifts the registration for the length of a ``with`` block, so that
code that walks pytrees (vmap's argument handling, TorchRL's ``pseudo_vmap``) sees tensordicts
as leaves.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import is_non_tensor

__all__ = [
    "PYTREE_REGISTERED_LAZY_TDS",
    "PYTREE_REGISTERED_TDS",
    "_exclude_td_from_pytree",
    "register_pytree_nodes",
]

_REGISTERED: list[type] = []
# the classes registered as pytree nodes (upstream's names): dense ones, lazy stacks
PYTREE_REGISTERED_TDS: tuple[type, ...] = (TensorDict,)
PYTREE_REGISTERED_LAZY_TDS: tuple[type, ...] = (LazyStackedTensorDict,)


class _BatchSizeContext:
    """The batch size of a tensordict in its pytree context.

    Two compare equal when they have as many dims: like a tensor leaf's shape, the batch size is
    not part of the tree structure (``torch.func.vjp`` checks that cotangents have the structure
    of the outputs; ``jacrev``'s cotangents carry one more leading dim).
    """

    __slots__ = ("size",)

    def __init__(self, size: torch.Size) -> None:
        self.size = size

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):  # the number of dims a traced flatten records
            return len(self.size) == other
        if not isinstance(other, _BatchSizeContext):
            return NotImplemented
        return len(self.size) == len(other.size)

    def __hash__(self) -> int:
        return hash(len(self.size))

    def __repr__(self) -> str:
        return f"batch_size={list(self.size)}"


def _flatten_td(td: TensorDict) -> tuple[list[Any], Any]:
    keys, children, fixed = [], [], {}
    for key, value in td._own_items():
        if is_non_tensor(value):
            fixed[key] = value
        else:
            keys.append(key)
            children.append(value)
    order = list(td._own_keys())
    context = (keys, order, fixed, _batch_context(td.batch_size), td._names_or_none(), td.device)
    return children, context


def _batch_context(batch_size: torch.Size) -> Any:
    """The batch size as the context keeps it: while torch.compile or torch.export traces, or
    when it holds symbolic sizes, only its number of dims (an int: a tree spec must be made of
    python constants there, and a symbolic size would be stale after the trace); the batch size
    is then taken back from the leaves when unflattening."""
    if torch.compiler.is_compiling() or any(isinstance(d, torch.SymInt) for d in batch_size):
        return len(batch_size)
    return _BatchSizeContext(batch_size)


def _traced_batch_size(batch_dims: int, values: list[Any]) -> torch.Size:
    """The batch size of a tensordict whose context kept ``batch_dims`` only: the leading dims
    of its first tensor or non-empty tensordict (zeros if it has none)."""
    for value in values:
        if is_non_tensor(value):
            continue
        if hasattr(value, "batch_size") and value.is_empty():
            continue
        shape = _value_shape(value)
        if shape is not None:
            return torch.Size(shape[:batch_dims])
    return torch.Size([0] * batch_dims)


def _flatten_td_with_keys(td: TensorDict) -> tuple[list[tuple[Any, Any]], Any]:
    children, context = _flatten_td(td)
    return [(pytree.MappingKey(k), v) for k, v in zip(context[0], children)], context


def _value_shape(value: Any) -> torch.Size | None:
    shape = getattr(value, "batch_size", None)
    return getattr(value, "shape", None) if shape is None else shape


def _new_batch_size(batch_size: torch.Size, values: list[Any]) -> torch.Size:
    """The batch size of the unflattened tensordict, as upstream: ``batch_size`` if every new
    leaf still starts with it; else the leading dims the leaves share, at most as many as
    ``batch_size`` has, or one more if they all carry one extra leading dim before it (the basis
    vectors of ``jacrev`` / ``jacfwd``)."""
    shapes = [s for s in map(_value_shape, values) if s is not None]
    n = len(batch_size)
    if all(s[:n] == batch_size for s in shapes):
        return batch_size
    basis = all(s[1 : n + 1] == batch_size for s in shapes)
    limit = min(min(len(s) for s in shapes), n + int(basis))
    common = 0
    while common < limit and all(s[common] == shapes[0][common] for s in shapes):
        common += 1
    return torch.Size(shapes[0][:common])


def _common_device(device: torch.device | None, values: list[Any]) -> torch.device | None:
    if device is None:
        return None
    for value in values:
        if isinstance(value, torch.Tensor) and value.device != device:
            return None
        if hasattr(value, "batch_size") and getattr(value, "device", device) != device:
            return None
    return device


def _unflatten_td(values: Any, context: Any) -> TensorDict:
    keys, order, fixed, batch_ctx, names, device = context
    values = list(values)
    if isinstance(batch_ctx, int):
        batch_size = new_bs = _traced_batch_size(batch_ctx, values)
    else:
        batch_size = batch_ctx.size
        new_bs = _new_batch_size(batch_size, values)
    by_key = dict(zip(keys, values))
    source = {k: by_key[k] if k in by_key else fixed[k] for k in order}
    out = TensorDict(source, batch_size=new_bs)
    out._device = _common_device(device, values)
    if names is not None and new_bs == batch_size:
        out.names = names
    return out


def _flatten_lazy(td: LazyStackedTensorDict) -> tuple[list[Any], Any]:
    return list(td.tensordicts), td.stack_dim


def _flatten_lazy_with_keys(td: LazyStackedTensorDict) -> tuple[list[tuple[Any, Any]], Any]:
    return [(pytree.SequenceKey(i), m) for i, m in enumerate(td.tensordicts)], td.stack_dim


def _unflatten_lazy(values: Any, context: Any) -> LazyStackedTensorDict:
    return LazyStackedTensorDict(*values, stack_dim=context)


def register_pytree_nodes() -> None:
    """Register the tensordict classes with ``torch.utils._pytree`` (done once, at import)."""
    if _REGISTERED:
        return
    pytree.register_pytree_node(
        TensorDict,
        _flatten_td,
        _unflatten_td,
        flatten_with_keys_fn=_flatten_td_with_keys,
    )
    pytree.register_pytree_node(
        LazyStackedTensorDict,
        _flatten_lazy,
        _unflatten_lazy,
        flatten_with_keys_fn=_flatten_lazy_with_keys,
    )
    _REGISTERED.extend([TensorDict, LazyStackedTensorDict])


class _exclude_td_from_pytree:
    """Within the block (or between ``set()`` and ``unset()``), pytree functions treat
    tensordicts as leaves.

    Examples:
        >>> import torch
        >>> from torch.utils._pytree import tree_flatten
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "b": torch.ones(2)}, [2])
        >>> len(tree_flatten(td)[0])
        2
        >>> with _exclude_td_from_pytree():
        ...     tree_flatten(td)[0][0] is td
        True
        >>> excluder = _exclude_td_from_pytree()
        >>> excluder.set()
        >>> tree_flatten(td)[0][0] is td
        True
        >>> excluder.unset()
        >>> len(tree_flatten(td)[0])
        2
    """

    def __init__(self) -> None:
        self._removed: dict[type, Any] = {}

    def set(self) -> None:
        """Lift the registration of the tensordict classes (until :meth:`unset`)."""
        for cls in PYTREE_REGISTERED_TDS + PYTREE_REGISTERED_LAZY_TDS:
            node = pytree.SUPPORTED_NODES.pop(cls, None)
            if node is not None:
                self._removed[cls] = node

    def unset(self) -> None:
        """Register again the classes that :meth:`set` lifted."""
        pytree.SUPPORTED_NODES.update(self._removed)
        self._removed = {}

    def __enter__(self) -> None:
        self.set()

    def __exit__(self, *exc: object) -> None:
        self.unset()
