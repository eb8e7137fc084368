"""Nested (jagged) memory-mapped tensors: one flat buffer, elements laid out one after another.

A nested tensor of ``n`` elements is described by a ``(n, ndim)`` integer tensor of sizes (the
``shape`` upstream's constructors accept). Its bytes on disk are the elements' values, C-contiguous,
in order: the same layout upstream writes, so files interchange.
"""

from __future__ import annotations

import torch

__all__ = ["is_nested_shape", "nested_buffer", "nested_numel", "nested_view"]


def is_nested_shape(shape: object) -> bool:
    """Whether ``shape`` describes a nested tensor: a 2-d integer tensor, one row per element."""
    return isinstance(shape, torch.Tensor) and shape.ndim == 2


def nested_numel(sizes: torch.Tensor) -> int:
    """How many values a contiguous nested tensor with these per-element sizes holds."""
    if sizes.numel() == 0:
        return 0
    return int(sizes.prod(-1).sum())


def _contiguous_strides(sizes: torch.Tensor) -> torch.Tensor:
    ones = torch.ones_like(sizes[:, :1])
    # stride of dim d = product of the sizes after d
    tail = torch.cat([sizes[:, 1:], ones], dim=1)
    return tail.flip(1).cumprod(1).flip(1)


def nested_view(buffer: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """A nested tensor viewing ``buffer`` (1-d) with the elements' ``sizes`` laid out in order.

    Examples:
        >>> t = nested_view(torch.arange(10.0), torch.tensor([[2, 2], [2, 3]]))
        >>> t[1]
        tensor([[4., 5., 6.],
                [7., 8., 9.]])
    """
    sizes = sizes.to(torch.int64)
    numels = sizes.prod(-1)
    offsets = torch.cat([numels.new_zeros(1), numels.cumsum(0)[:-1]])
    return torch._nested_view_from_buffer(  # type: ignore[attr-defined]
        buffer, sizes, _contiguous_strides(sizes), offsets
    )


def nested_buffer(t: torch.Tensor) -> torch.Tensor:
    """The values of the nested tensor ``t`` as one flat, contiguous CPU tensor (in order)."""
    parts = [e.detach().cpu().reshape(-1) for e in t.unbind(0)]
    if not parts:
        return torch.empty(0, dtype=t.dtype)
    return torch.cat(parts)
