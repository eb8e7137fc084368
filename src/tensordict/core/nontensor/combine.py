"""Stacking and concatenating non-tensor entries (:class:`NonTensorData`, :class:`MetaData`,
:class:`NonTensorStack`): the rules ``torch.stack`` / ``torch.cat`` and the tensordict
combinators apply to them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.nontensor.api import same_value
from tensordict.core.nontensor.data import MetaData, NonTensorData, NonTensorStack, is_non_tensor
from tensordict.core.options import capture_non_tensor_stack

__all__ = ["cat_non_tensor", "stack_non_tensor", "torch_function"]


def torch_function(
    cls: type, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None
) -> Any:
    """``torch.stack`` / ``torch.cat`` of non-tensor entries (``__torch_function__``)."""
    kwargs = kwargs or {}
    if func not in (torch.stack, torch.cat) or not args:
        return NotImplemented
    items = list(args[0])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not items or not all(is_non_tensor(i) for i in items):
        return NotImplemented
    n = len(items[0].batch_size) + (1 if func is torch.stack else 0)
    dim = dim + n if dim < 0 else dim
    out = (stack_non_tensor if func is torch.stack else cat_non_tensor)(items, dim)
    target = kwargs.get("out")
    if target is not None:
        target.update_(out)
        return target
    return out


def stack_non_tensor(
    items: Sequence[NonTensorData | NonTensorStack], dim: int
) -> NonTensorData | NonTensorStack:
    """Stack non-tensor entries as upstream does.

    ``MetaData`` members holding the same object give one ``MetaData``; with
    ``capture_non_tensor_stack()`` on, equal ``NonTensorData`` values give one ``NonTensorData``;
    otherwise the result is a :class:`NonTensorStack`.
    """
    first = items[0]
    bs = first.batch_size
    new_bs = torch.Size((*bs[:dim], len(items), *bs[dim:]))
    if isinstance(first, MetaData) and all(
        isinstance(i, MetaData) and i.data is first.data for i in items[1:]
    ):
        return first._with_batch_size(new_bs)
    if capture_non_tensor_stack() and _all_same_data(items):
        return NonTensorData._new(first.data, new_bs, first.device)  # type: ignore[no-any-return]
    return NonTensorStack.from_array(
        np.stack([i.to_array() for i in items], axis=dim), first.device
    )


def _all_same_data(items: Sequence[NonTensorData | NonTensorStack]) -> bool:
    """Whether every item is a NonTensorData holding the same object."""
    first = items[0]
    return isinstance(first, NonTensorData) and all(
        isinstance(i, NonTensorData) and same_value(first.data, i.data) for i in items[1:]
    )


def cat_non_tensor(
    items: Sequence[NonTensorData | NonTensorStack], dim: int
) -> NonTensorData | NonTensorStack:
    """Concatenate non-tensor entries along a batch dimension (equal values stay one)."""
    first = items[0]
    if _all_same_data(items):
        bs = list(first.batch_size)
        bs[dim] = sum(i.batch_size[dim] for i in items)
        return first._with_batch_size(torch.Size(bs))  # type: ignore[union-attr]
    return NonTensorStack.from_array(
        np.concatenate([i.to_array() for i in items], axis=dim), first.device
    )
