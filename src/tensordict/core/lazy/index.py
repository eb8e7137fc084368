"""Indexing a lazy stack: an index over the stacked batch dims becomes a tree of member indices.

An index is decomposed once (:func:`decompose`) into a small tree:

* :class:`Member` ``(i, index)``: the result is ``members[i][index]``;
* :class:`Stack` ``(children, dim)``: the result is a lazy stack of the children's results along
  ``dim``.

Reading evaluates the tree; writing walks it with the value, splitting the value along each
``Stack`` node's dim. Both follow torch's indexing rules, advanced indices included: index tensors
and lists are broadcast *together* (``td[[0, 1], [0, 1]]`` picks two elements, not a 2x2 block),
the broadcast dims of adjacent advanced indices replace them in place and go first otherwise, and
an index tensor along the stack dim may have any number of dims (each becomes a stack level).

The same tree serves tensors (``td.set_at_(key, value, index)`` on a lazy stack indexes the
members' tensors over their full shape).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from tensordict.core.collection import TensorCollection
from tensordict.core.indexing import is_first_class_dim, plan_index
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.errors import IndexingError, LazyFirstClassDimError, ShapeMismatchError

__all__ = [
    "Member",
    "Stack",
    "decompose",
    "decompose_ragged",
    "evaluate",
    "node_ndim",
    "split_value",
    "stage_writes",
]

_FULL = slice(None)


class Member(NamedTuple):
    """``members[i][sub]`` (``sub == ()``: the member itself)."""

    i: int
    sub: tuple[Any, ...]


class Stack(NamedTuple):
    """A lazy stack of the children's results along ``dim``."""

    children: list[Any]
    dim: int


Node = Member | Stack


def _items(index: Any, shape: torch.Size) -> list[Any]:
    """The planned index as one item per source dim (plus ``None`` items), masks as long
    tensors, trailing dims as full slices."""
    leaf = plan_index(index, shape).leaf_index
    if leaf is Ellipsis:
        raw: tuple[Any, ...] = ()
    elif isinstance(leaf, tuple):
        raw = leaf
    else:
        raw = (leaf,)
    items: list[Any] = []
    for item in raw:
        if isinstance(item, torch.Tensor) and item.dtype == torch.bool:
            if item.ndim == 0:
                raise IndexingError(
                    "a 0-d boolean index is not supported on a LazyStackedTensorDict; use "
                    "td[None] (True) or an empty selection instead."
                )
            items.extend(item.nonzero().unbind(1))
        else:
            items.append(item)
    consumed = sum(1 for i in items if i is not None)
    items.extend([_FULL] * (len(shape) - consumed))
    return items


def _source_dims(items: list[Any]) -> list[int | None]:
    dims: list[int | None] = []
    d = 0
    for item in items:
        if item is None:
            dims.append(None)
        else:
            dims.append(d)
            d += 1
    return dims


def _layout(items: list[Any]) -> tuple[bool, int]:
    """(whether the index tensors are adjacent, where their broadcast dims go in the result).

    Ints do not count (unlike numpy, torch selects them first): ``x[1, :, t]`` keeps ``t``'s
    dims in place.
    """
    basic = [i for i in items if type(i) is not int]
    adv = [k for k, i in enumerate(basic) if isinstance(i, torch.Tensor)]
    if not adv:
        return True, 0
    adjacent = adv == list(range(adv[0], adv[0] + len(adv)))
    if not adjacent:
        return False, 0
    return True, sum(1 for i in basic[: adv[0]] if i is None or isinstance(i, slice))


def _basic_dims_before(items: list[Any], pos: int) -> int:
    return sum(1 for i in items[:pos] if i is None or isinstance(i, slice))


def _trim(index: list[Any]) -> tuple[Any, ...]:
    while index and index[-1] is not None and isinstance(index[-1], slice) and index[-1] == _FULL:
        index = index[:-1]
    return tuple(index)


def decompose(index: Any, shape: torch.Size, stack_dim: int) -> Node | None:
    """The tree of member indices for ``stacked[index]``; None when it selects no member.

    ``shape`` is the stacked shape (the lazy stack's batch size, or a stacked entry's shape).

    Examples:
        >>> decompose(1, torch.Size([2, 3]), 0)
        Member(i=1, sub=())
        >>> decompose((slice(None), 0), torch.Size([2, 3]), 0)
        Stack(children=[Member(i=0, sub=(0,)), Member(i=1, sub=(0,))], dim=0)
        >>> decompose(([0, 1], [2, 0]), torch.Size([2, 3]), 0)
        Stack(children=[Member(i=0, sub=(2,)), Member(i=1, sub=(0,))], dim=0)
    """
    items = _items(index, shape)
    src = _source_dims(items)
    pos = src.index(stack_dim)
    stack_item = items[pos]
    if is_first_class_dim(stack_item):
        raise LazyFirstClassDimError(
            f"Cannot index a lazy stack along its stack dimension ({stack_dim}) with a "
            "first-class dimension: the members are separate tensordicts. Index another "
            "dimension, or densify the stack first (torch.stack(list(td)) / td.contiguous())."
        )
    rest = items[:pos] + items[pos + 1 :]
    n = shape[stack_dim]
    if not any(isinstance(i, torch.Tensor) for i in items):
        if type(stack_item) is int:
            return Member(stack_item % n, _trim(rest))
        ids = range(n)[stack_item]
        if not ids:
            return None
        member_index = _trim(rest)
        return Stack([Member(i, member_index) for i in ids], _basic_dims_before(items, pos))
    full_adjacent, _ = _layout(items)
    member_adjacent, member_pos = _layout(rest)
    keeps_layout = full_adjacent or not member_adjacent or member_pos == 0
    if not isinstance(stack_item, torch.Tensor) and keeps_layout:
        # the stack dim is not indexed by a tensor: each member takes the rest of the index
        if type(stack_item) is int:
            return Member(stack_item % n, _trim(rest))
        ids = range(n)[stack_item]
        if not ids:
            return None
        stack_pos = _result_pos(items, pos)
        return Stack([Member(i, _trim(rest)) for i in ids], stack_pos)
    return _advanced(items, pos, n)


def decompose_ragged(index: Any, shape: torch.Size, stack_dim: int) -> Node | None:
    """:func:`decompose` for a lazy stack whose members differ in batch size (``-1`` in
    ``shape``): basic indexing only (ints, slices, ``...``), each member taking the items of its
    own dims as they are (a member bounds them by its own size); along the stack dim an int, a
    slice, or a list / 1-d tensor of members.

    Raises:
        IndexingError: ``None``, a mask or an index tensor on the members' dims.

    Examples:
        >>> decompose_ragged((slice(None), 0), torch.Size([2, -1]), 0)
        Stack(children=[Member(i=0, sub=(0,)), Member(i=1, sub=(0,))], dim=0)
    """
    items = list(index) if isinstance(index, tuple) else [index]
    if any(i is Ellipsis for i in items):
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        fill = len(shape) - (len(items) - 1)
        items[at : at + 1] = [_FULL] * fill
    items += [_FULL] * (len(shape) - len(items))
    if len(items) > len(shape):
        raise IndexingError(
            f"too many indices for a lazy stack of batch_size={list(shape)}: got {len(items)}."
        )
    stack_item, rest = items[stack_dim], items[:stack_dim] + items[stack_dim + 1 :]
    if any(not (i.__class__ is int or isinstance(i, slice)) for i in rest):
        raise IndexingError(
            f"a lazy stack whose members have different batch sizes (batch_size={list(shape)}) "
            "takes ints and slices on the members' dims, got "
            f"{[type(i).__name__ for i in rest]}. Index the members one by one "
            "(td.tensordicts[i][...])."
        )
    n = shape[stack_dim]
    sub = _trim(rest)
    if stack_item.__class__ is int:
        if not -n <= stack_item < n:
            raise IndexingError(f"index {stack_item} is out of bounds for the {n} members.")
        return Member(stack_item % n, sub)
    if isinstance(stack_item, slice):
        ids: Sequence[int] = range(n)[stack_item]
    else:
        ids = [int(i) % n for i in torch.as_tensor(stack_item).reshape(-1).tolist()]
    if not ids:
        return None
    dim = sum(1 for i in items[:stack_dim] if i.__class__ is not int)
    return Stack([Member(i, sub) for i in ids], dim)


def _result_pos(items: list[Any], pos: int) -> int:
    """Where the (basic) stack dim at ``items[pos]`` lands in the result."""
    adjacent, _ = _layout(items)
    basic_before = _basic_dims_before(items, pos)
    bdims = len(torch.broadcast_shapes(*[i.shape for i in items if isinstance(i, torch.Tensor)]))
    if not adjacent:
        return bdims + basic_before
    first_adv = next(k for k, i in enumerate(items) if isinstance(i, torch.Tensor))
    return basic_before + (bdims if first_adv < pos else 0)


def _advanced(items: list[Any], pos: int, n: int) -> Node | None:
    """The stack dim takes part in advanced indexing: one member index per broadcast element."""
    adv_pos = [k for k, i in enumerate(items) if isinstance(i, torch.Tensor) or type(i) is int]
    tensors = [torch.as_tensor(items[k]) for k in adv_pos]
    bshape = torch.broadcast_shapes(*[t.shape for t in tensors])
    if math.prod(bshape) == 0:
        return None
    values = [t.expand(bshape).reshape(-1).tolist() for t in tensors]
    stack_item = items[pos]
    stack_is_adv = pos in adv_pos
    ids = None if stack_is_adv else range(n)[stack_item]
    if ids is not None and not ids:
        return None
    # within one element every advanced item is an int: the member result keeps the basic dims
    basic_stack_pos = _basic_dims_before(items, pos)
    elements: list[Node] = []
    for e in range(math.prod(bshape)):
        index = list(items)
        for k, vals in zip(adv_pos, values):
            index[k] = vals[e]
        if stack_is_adv:
            i = index.pop(pos) % n
            elements.append(Member(i, _trim(index)))
        else:
            del index[pos]
            sub = _trim(index)
            elements.append(Stack([Member(i, sub) for i in ids], basic_stack_pos))  # type: ignore[union-attr]
    _, block = _layout(items)
    return _nest(elements, list(bshape), block)


def _nest(elements: list[Node], bshape: list[int], dim: int) -> Node:
    """Arrange the flat elements of a broadcast shape into nested stacks at ``dim``."""
    if len(bshape) == 1:
        return Stack(elements, dim)
    step = len(elements) // bshape[0]
    return Stack(
        [_nest(elements[k * step : (k + 1) * step], bshape[1:], dim) for k in range(bshape[0])],
        dim,
    )


def node_ndim(node: Node, member_shape: Sequence[int]) -> int:
    """The number of dims of the node's result (``member_shape``: a member's shape)."""
    if isinstance(node, Stack):
        return node_ndim(node.children[0], member_shape) + 1
    if not node.sub:
        return len(member_shape)
    return len(plan_index(node.sub, torch.Size(member_shape)).batch_size)


# ====================================================================== reading and writing
def evaluate(node: Node, members: Sequence[Any], build: Any) -> Any:
    """The result of the tree: ``build(results, dim)`` makes a lazy stack."""
    if isinstance(node, Member):
        member = members[node.i]
        return member[node.sub] if node.sub else member
    return build([evaluate(c, members, build) for c in node.children], node.dim)


def first_member(node: Node) -> Member:
    while isinstance(node, Stack):
        node = node.children[0]
    return node


class LeafProbe:
    """The feature dims of the leaves a write goes to, read from one member tensordict."""

    def __init__(self, member: Any) -> None:
        self.member = member

    def feature_dims(self, path: tuple[str, ...]) -> int | None:
        """Dims of the leaf at ``path`` after the batch dims; None for a key it lacks."""
        try:
            leaf = self.member._get_path(path, None)
        except ShapeMismatchError:  # a ragged nested lazy stack: the first of its members
            leaf = _ragged_leaf(self.member, path)
        if not isinstance(leaf, torch.Tensor):
            return None
        return leaf.ndim - len(self.member.batch_size)

    def tensor_paths(self) -> list[tuple[str, ...]]:
        paths = []
        for key in self.member.keys(
            include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
        ):
            path = key if isinstance(key, tuple) else (key,)
            if self.feature_dims(path) is not None:
                paths.append(path)
        return paths


def _ragged_leaf(td: Any, path: tuple[str, ...]) -> Any:
    node = td
    for part in path:
        while hasattr(node, "stack_dim"):
            node = node.tensordicts[0]
        node = node._get_str(part, None)
        if node is None:
            return None
    return node if isinstance(node, torch.Tensor) else None


def split_value(value: Any, n: int, dim: int, ndim: int, probe: LeafProbe | None) -> list[Any]:
    """``value`` (written into a result of ``ndim`` batch dims) cut into the ``n`` parts written
    into the children of a stack along ``dim``; parts broadcast where the value does.

    ``probe`` is None when the stacked things are tensors (the value aligns from the right).
    """
    if getattr(type(value), "_is_tensorclass", False) or isinstance(value, TensorCollection):
        vb = len(value.batch_size)
        return _split_along(value, n, dim - (ndim - vb), "a tensordict")
    if isinstance(value, Mapping):  # (a plain dict: tensordicts are Mappings too)
        return _split_mapping(value, n, dim, ndim, probe, ())
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim > 0:
        t = torch.as_tensor(value)
        if probe is None:
            return _split_along(t, n, dim - (ndim - t.ndim), "a tensor")
        # a tensor written into every leaf: each leaf aligns it with its own feature dims
        leaves = {path: t for path in probe.tensor_paths()}
        return _split_mapping(leaves, n, dim, ndim, probe, (), nested_keys=True)
    return [value] * n


def _split_along(value: Any, n: int, axis: int, what: str) -> list[Any]:
    if axis < 0:
        return [value] * n  # the stack dim is one the value broadcasts over
    size = value.shape[axis]
    if size == n:
        return list(value.unbind(axis))
    if size == 1:
        part = value[(slice(None),) * axis + (0,)]
        return [part] * n
    raise ShapeMismatchError(
        f"cannot write {what} of shape {list(value.shape)} into {n} stacked elements: its dim "
        f"{axis} has size {size}, expected {n} (or 1 to broadcast)."
    )


def _split_mapping(
    value: Mapping[Any, Any],
    n: int,
    dim: int,
    ndim: int,
    probe: LeafProbe | None,
    prefix: tuple[str, ...],
    nested_keys: bool = False,
) -> list[Any]:
    parts: list[dict[Any, Any]] = [{} for _ in range(n)]
    for key, v in value.items():
        path = key if nested_keys else prefix + (key if isinstance(key, tuple) else (key,))
        if isinstance(v, Mapping) and not isinstance(v, TensorCollection):
            pieces = _split_mapping(v, n, dim, ndim, probe, path)
        elif isinstance(v, (torch.Tensor, np.ndarray)) and v.ndim > 0:
            t = torch.as_tensor(v)
            f = probe.feature_dims(path) if probe is not None else 0
            # an existing leaf aligns the value from the right (as a dense write does); a new
            # key's value starts with the batch dims of the result
            axis = dim if f is None else dim - (ndim + f - t.ndim)
            pieces = _split_along(t, n, axis, f"{path!r}")
        else:
            pieces = [v] * n
        for part, piece in zip(parts, pieces):
            part[key] = piece
    return parts


def stage_writes(
    node: Node, value: Any, member_shape: Sequence[int], stage_member: Any, probe: LeafProbe | None
) -> list[Any]:
    """The validated writes of ``stacked[index] = value`` along the tree (none performed)."""
    if isinstance(node, Member):
        return stage_member(node.i, node.sub, value)  # type: ignore[no-any-return]
    ndim = node_ndim(node, member_shape)
    parts = split_value(value, len(node.children), node.dim, ndim, probe)
    writes: list[Any] = []
    for child, part in zip(node.children, parts):
        writes.extend(stage_writes(child, part, member_shape, stage_member, probe))
    return writes
