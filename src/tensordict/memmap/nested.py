"""Nested (jagged) memory-mapped tensors: one flat buffer, elements laid out one after another.

A nested tensor of ``n`` elements is described by a ``(n, ndim)`` integer tensor of sizes (the
``shape`` upstream's constructors accept). Its bytes on disk are the elements' values, C-contiguous,
in order: the same layout upstream writes, so files interchange.
"""

from __future__ import annotations

import torch

__all__ = [
    "flat_buffer",
    "is_nested_shape",
    "loaded_nested",
    "nested_buffer",
    "nested_numel",
    "nested_sizes",
    "nested_view",
]


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


def nested_sizes(t: torch.Tensor) -> torch.Tensor:
    """The ``(n, ndim)`` int64 sizes of the elements of the nested tensor ``t`` (any layout).

    Examples:
        >>> parts = [torch.ones(2, 3), torch.ones(4, 3)]
        >>> nt = torch.nested.nested_tensor(parts, layout=torch.jagged)
        >>> nested_sizes(nt).tolist()
        [[2, 3], [4, 3]]
    """
    if t.layout is torch.strided:
        return t._nested_tensor_size().to(torch.int64)  # type: ignore[attr-defined]
    rows = [list(e.shape) for e in t.unbind(0)]
    return torch.tensor(rows, dtype=torch.int64).reshape(len(rows), t.dim() - 1)


def _jagged_values(t: torch.Tensor) -> torch.Tensor | None:
    """The values of a jagged ``t`` whose rows lie one after another, or None."""
    if t.layout is not torch.jagged or t._lengths is not None or t._ragged_idx != 1:  # type: ignore[attr-defined]
        return None
    offsets = t.offsets()  # type: ignore[attr-defined]
    values = t.values()
    if offsets.numel() == 0:
        return None
    return values[int(offsets[0]) : int(offsets[-1])]


def is_jagged_sizes(sizes: torch.Tensor) -> bool:
    """Whether elements of these sizes fit the jagged layout: only their first dim varies."""
    if sizes.ndim != 2 or sizes.shape[1] == 0 or sizes.shape[0] == 0:
        return False
    return bool((sizes[:, 1:] == sizes[:1, 1:]).all())


def loaded_nested(flat: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """A nested tensor viewing the 1-d ``flat`` buffer: jagged when only the first dim of the
    elements varies (the layout a tensordict holds), strided-nested otherwise.

    Writes to the result reach ``flat``.

    Examples:
        >>> nt = loaded_nested(torch.arange(6.0), torch.tensor([[1, 2], [2, 2]]))
        >>> nt.layout, nt[1].tolist()
        (torch.jagged, [[2.0, 3.0], [4.0, 5.0]])
    """
    sizes = sizes.to(torch.int64)
    plain = flat.as_subclass(torch.Tensor)
    if not is_jagged_sizes(sizes):
        out = nested_view(plain, sizes)
    else:
        rest = [int(s) for s in sizes[0, 1:]]
        rows = sizes[:, 0]
        offsets = torch.cat([rows.new_zeros(1), rows.cumsum(0)])
        values = plain[: nested_numel(sizes)].view(int(offsets[-1]), *rest)
        out = torch.nested.nested_tensor_from_jagged(values, offsets)
    out._memmap_flat = flat  # type: ignore[attr-defined]  # the buffer and its file
    return out


def flat_buffer(t: torch.Tensor) -> torch.Tensor | None:
    """The 1-d buffer a nested tensor made by :func:`loaded_nested` views, or None."""
    return getattr(t, "_memmap_flat", None)


def nested_buffer(t: torch.Tensor) -> torch.Tensor:
    """The values of the nested tensor ``t`` as one flat, contiguous CPU tensor (in order)."""
    values = _jagged_values(t)
    if values is not None:
        return values.detach().cpu().reshape(-1)
    parts = [e.detach().cpu().reshape(-1) for e in t.unbind(0)]
    if not parts:
        return torch.empty(0, dtype=t.dtype)
    return torch.cat(parts)
