"""Batch-shape arithmetic clients use directly: the shape an index gives, ellipsis expansion,
negative dimensions, and right-expansion of a tensor to a leaf's shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn.parameter import UninitializedTensorMixin  # type: ignore[attr-defined]

from tensordict.core.indexing import plan_index
from tensordict.errors import IndexingError, MultipleEllipsisError

__all__ = [
    "is_uninitialized",
    "convert_ellipsis_to_idx",
    "expand_as_right",
    "expand_right",
    "getitem_batch_size",
    "leaf_shape",
    "maybe_correct_neg_dim",
]


def getitem_batch_size(batch_size: Sequence[int], index: Any) -> torch.Size:
    """The batch size that indexing a batch of ``batch_size`` with ``index`` gives.

    Same rules as indexing a tensor of that shape (ints, slices, ``None``, ``...``, index
    tensors, lists, boolean masks).

    Examples:
        >>> getitem_batch_size(torch.Size([3, 4, 5]), (slice(None), 0))
        torch.Size([3, 5])
        >>> getitem_batch_size(torch.Size([3, 4]), (None, torch.tensor([0, 2])))
        torch.Size([1, 2, 4])
    """
    return plan_index(index, torch.Size(batch_size)).batch_size


def _dims_used(item: Any) -> int:
    if item is None or item is Ellipsis:
        return 0
    if isinstance(item, torch.Tensor) and item.dtype is torch.bool:
        return max(item.ndim, 1)
    return 1


def convert_ellipsis_to_idx(idx: Any, batch_size: Sequence[int]) -> Any:
    """Replace the ``...`` of an index by as many full slices as the dimensions it spans.

    A non-tuple index other than ``...`` is returned unchanged.

    Raises:
        MultipleEllipsisError: more than one ``...`` (a ``RuntimeError`` too, as upstream).

    Examples:
        >>> convert_ellipsis_to_idx((0, ..., 1), [2, 3, 4])
        (0, slice(None, None, None), 1)
        >>> convert_ellipsis_to_idx(..., [2, 3])
        (slice(None, None, None), slice(None, None, None))
    """
    if idx is Ellipsis:
        return (slice(None),) * len(batch_size)
    if not isinstance(idx, tuple):
        return idx
    count = sum(1 for item in idx if item is Ellipsis)
    if count > 1:
        raise MultipleEllipsisError(
            f"An index can only have one ellipsis at most, got {idx!r}: keep a single '...'."
        )
    if count == 0:
        return idx
    used = sum(_dims_used(item) for item in idx)
    fill = (slice(None),) * max(len(batch_size) - used, 0)
    out: list[Any] = []
    for item in idx:
        out.extend(fill if item is Ellipsis else (item,))
    return tuple(out)


def maybe_correct_neg_dim(dim: int, shape: torch.Size | None, ndim: int | None = None) -> int:
    """Turn a negative dimension into its positive form, checking it is in range.

    Args:
        dim: the dimension.
        shape: the shape it indexes (or ``None`` to give ``ndim``).
        ndim: the number of dimensions when ``shape`` is ``None``.

    Raises:
        IndexingError: ``dim`` out of range.

    Examples:
        >>> maybe_correct_neg_dim(-1, torch.Size([2, 3])), maybe_correct_neg_dim(-1, None, 4)
        (1, 3)
    """
    n = len(shape) if shape is not None else ndim
    if n is None:
        raise ValueError("maybe_correct_neg_dim needs a shape or ndim, got neither.")
    what = f"shape {shape}" if shape is not None else f"batch dims {n}"
    if dim < -n or dim >= n:
        raise IndexingError(f"Incompatible dim {dim} for tensordict with {what}.")
    return dim + n if dim < 0 else dim


def expand_right(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Expand ``tensor`` to ``shape`` by adding dimensions on the RIGHT (not the left as
    :meth:`torch.Tensor.expand` does).

    Raises:
        RuntimeError: the leading dimensions do not match ``shape``.

    Examples:
        >>> expand_right(torch.zeros(2, 3), (2, 3, 4)).shape
        torch.Size([2, 3, 4])
        >>> expand_right(torch.tensor(True), torch.Size([]))
        tensor(True)
    """
    extra = len(shape) - tensor.ndim
    if extra < 0:
        raise RuntimeError(
            f"expand_right: the tensor has {tensor.ndim} dims, more than the target shape "
            f"{list(shape)}."
        )
    # (tuple forms: a 0-dim tensor and an empty shape give reshape(()) and expand(()))
    return tensor.reshape((*tensor.shape, *([1] * extra))).expand(tuple(shape))


def expand_as_right(tensor: Any, dest: Any) -> Any:
    """Expand ``tensor`` (or a tensordict) on the right to the shape of ``dest``.

    A dimension of size 1 in ``tensor`` is broadcast to the matching one of ``dest`` (as
    upstream).

    Raises:
        RuntimeError: ``tensor`` has more dimensions than ``dest``, or its dimensions do not
            match (nor broadcast to) the leading ones of ``dest``.

    Examples:
        >>> expand_as_right(torch.zeros(2), torch.zeros(2, 3, 4)).shape
        torch.Size([2, 3, 4])
        >>> expand_as_right(torch.zeros(2, 1), torch.zeros(2, 4, 1)).shape
        torch.Size([2, 4, 1])
    """
    if dest.ndimension() < tensor.ndimension():
        raise RuntimeError(
            f"expand_as_right: tensor has {tensor.ndimension()} dims, more than dest "
            f"({dest.ndimension()})."
        )
    if any(s != d and s != 1 for s, d in zip(tensor.shape, dest.shape)):
        raise RuntimeError(
            f"expand_as_right: tensor of shape {tuple(tensor.shape)} does not match the leading "
            f"dimensions of dest, of shape {tuple(dest.shape)}."
        )
    for _ in range(dest.ndimension() - tensor.ndimension()):
        tensor = tensor.unsqueeze(-1)
    return tensor.expand(dest.shape)


def leaf_shape(tensor: Any, nested_shape: bool = False) -> Any:
    """The shape of a leaf; for a nested tensor, ``-1`` where its components differ (or, with
    ``nested_shape=True``, the tensor of component shapes).

    Examples:
        >>> leaf_shape(torch.zeros(2, 3))
        torch.Size([2, 3])
    """
    if not isinstance(tensor, torch.Tensor) or not tensor.is_nested:
        return tensor.shape
    sizes = [t.shape for t in tensor.unbind()]
    if nested_shape:
        return torch.tensor([list(s) for s in sizes])
    if not sizes:
        return torch.Size([0])
    dims = [col[0] if all(c == col[0] for c in col) else -1 for col in zip(*sizes)]
    return torch.Size([len(sizes), *dims])


def is_uninitialized(value: Any) -> bool:
    """Whether ``value`` is a lazy module's tensor that has no shape yet (an uninitialized
    parameter or buffer): batch-size checks leave it out.

    Examples:
        >>> from torch.nn.parameter import UninitializedParameter
        >>> is_uninitialized(UninitializedParameter()), is_uninitialized(torch.zeros(1))
        (True, False)
    """
    return isinstance(value, UninitializedTensorMixin)
