"""``td.new_zeros(size, empty_lazy=True)`` (and ``new_ones`` / ``new_empty`` / ``new_full``):
upstream's rule for lazy stacks, whose members may hold different keys and shapes.

A lazy stack (at any depth) becomes a lazy stack of ``size[stack_dim]`` copies of its first
member's structure, with no leaves: the slots are meant to be filled by writes such as
``out[mask] = stack``. A non-tensor stack repeats its first element. Dense tensordicts treat each
entry on its own: tensors as ``tensor.new_zeros(size + feature dims)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack

__all__ = ["new_like_lazy"]


def new_like_lazy(
    td: Any, size: Sequence[int], method: str, args: tuple[Any, ...], kw: dict[str, Any]
) -> Any:
    """``td.<method>(size, *args, **kw, empty_lazy=True)`` (see the module docstring)."""
    size = torch.Size(size)
    if isinstance(td, NonTensorStack):
        return _repeat_first(td, size)
    if isinstance(td, NonTensorData):
        return NonTensorData(td.data, batch_size=size, device=td.device)
    members = getattr(td, "tensordicts", None)
    sd = getattr(td, "stack_dim", None)
    if members and sd is not None and len(size) > sd:
        sub = torch.Size([*size[:sd], *size[sd + 1 :]])
        proto = new_like_lazy(members[0].empty(recurse=True), sub, "new_empty", (), kw)
        # (clones: the members must not share their non-tensor stacks, written in place later)
        return LazyStackedTensorDict(*[proto.clone() for _ in range(size[sd])], stack_dim=sd)
    return _dense(td, size, method, args, kw)


def _dense(td: Any, size: torch.Size, method: str, args: tuple[Any, ...], kw: Any) -> Any:
    n = len(td.batch_size)
    dtype, device = kw.get("dtype"), kw.get("device")
    entries: dict[str, Any] = {}
    for key, value in td._own_items():
        if isinstance(value, torch.Tensor):
            shape = (*size, *value.shape[n:])
            entries[key] = getattr(value, method)(
                shape, *args, dtype=dtype or value.dtype, device=device or value.device
            )
        else:
            inner = torch.Size([*size, *value.batch_size[n:]])
            entries[key] = new_like_lazy(value, inner, method, args, kw)
    names = td._names_or_none() if len(size) == n else None
    out_device = device if device is not None else td.device
    return TensorDict(entries, batch_size=size, device=out_device, names=names)


def _repeat_first(stack: NonTensorStack, size: torch.Size) -> NonTensorStack:
    """A non-tensor stack of batch size ``size`` holding ``stack``'s first element throughout."""
    values = np.asarray(stack._values)
    first = values.flat[0] if values.size else None
    out = np.empty(tuple(size), dtype=object)
    for idx in np.ndindex(*out.shape):
        out[idx] = first
    return NonTensorStack.from_array(out, stack.device)
