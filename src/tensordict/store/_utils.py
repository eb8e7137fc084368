"""Bytes of tensors on a key-value server: encoding, and the byte ranges an index reads.

A tensor is stored as its C-contiguous bytes. Rows along the first dimension are contiguous, so
an int or a slice reads one byte range (``GETRANGE``) and writes one (``SETRANGE``); a step slice
reads its covering range and strides locally; scattered positions read one range per run of
consecutive rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = [
    "_bytes_to_tensor",
    "_compute_byte_ranges",
    "_compute_covering_range",
    "_get_local_idx",
    "_getitem_result_shape",
    "_is_scattered_index",
    "_tensor_to_bytes",
]


def _tensor_to_bytes(tensor: torch.Tensor) -> bytes:
    """The C-contiguous bytes of ``tensor`` (any dtype, on any device)."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


def _bytes_to_tensor(data: bytes, shape: Any, dtype: torch.dtype) -> torch.Tensor:
    """The tensor of ``shape`` and ``dtype`` whose bytes are ``data`` (a new, writable tensor).

    Examples:
        >>> t = torch.arange(6.0).view(3, 2)
        >>> torch.equal(_bytes_to_tensor(_tensor_to_bytes(t), [3, 2], torch.float32), t)
        True
    """
    shape = tuple(int(s) for s in shape)
    if not data:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def _row_bytes(shape: Any, dtype: torch.dtype) -> int:
    itemsize = torch.empty((), dtype=dtype).element_size()
    return math.prod(int(s) for s in shape[1:]) * itemsize


def _compute_byte_ranges(shape: Any, dtype: torch.dtype, idx: Any) -> list[tuple[int, int]]:
    """``(offset, length)`` of the rows ``idx`` (an int, a step-1 slice, or positions) selects.

    Examples:
        >>> _compute_byte_ranges([5, 2], torch.float32, slice(1, 4))
        [(8, 24)]
    """
    row = _row_bytes(shape, dtype)
    n = int(shape[0])
    if isinstance(idx, int):
        return [((idx % n) * row, row)]
    if isinstance(idx, slice):
        start, stop, step = idx.indices(n)
        if step != 1:
            raise ValueError(f"a slice with step {step} has no single byte range: cover it.")
        return [(start * row, max(stop - start, 0) * row)]
    positions = _positions(idx, n)
    return [(int(p) * row, row) for p in positions]


def _compute_covering_range(shape: Any, dtype: torch.dtype, idx: Any) -> tuple[int, int]:
    """``(offset, length)`` of the rows from the first to the last that ``idx`` selects.

    Examples:
        >>> _compute_covering_range([5, 2], torch.float32, slice(1, 5, 2))
        (8, 24)
    """
    first, last = _span(idx, int(shape[0]))
    row = _row_bytes(shape, dtype)
    return first * row, (last - first + 1) * row if last >= first else 0


def _span(idx: Any, n: int) -> tuple[int, int]:
    if isinstance(idx, int):
        return idx % n, idx % n
    if isinstance(idx, slice):
        r = range(*idx.indices(n))
        return (r[0], r[-1]) if len(r) else (0, -1)
    positions = _positions(idx, n)
    return (int(positions.min()), int(positions.max())) if positions.size else (0, -1)


def _get_local_idx(idx: Any, dim0: int) -> Any:
    """``idx`` relative to its covering range (see :func:`_compute_covering_range`).

    Examples:
        >>> _get_local_idx(slice(1, 5, 2), 5)
        slice(None, None, 2)
    """
    first, _ = _span(idx, dim0)
    if isinstance(idx, int):
        return 0
    if isinstance(idx, slice):
        step = idx.indices(dim0)[2]
        return slice(None, None, step if step != 1 else None)
    return torch.from_numpy(_positions(idx, dim0) - first)


def _is_scattered_index(idx: Any) -> bool:
    """Whether ``idx`` selects positions one by one (a tensor, array, list or range)."""
    return isinstance(idx, (torch.Tensor, np.ndarray, list, range))


def _getitem_result_shape(shape: Any, idx: Any) -> list[int]:
    """The shape of ``tensor[idx]`` for a tensor of ``shape`` (``idx`` on the first dim)."""
    n = int(shape[0])
    rest = [int(s) for s in shape[1:]]
    if isinstance(idx, int):
        return rest
    if isinstance(idx, slice):
        return [len(range(*idx.indices(n))), *rest]
    return [int(_positions(idx, n).size), *rest]


def _positions(idx: Any, n: int) -> np.ndarray:
    """The row positions (non-negative, in order) of a position or mask index."""
    if isinstance(idx, torch.Tensor):
        idx = idx.cpu().numpy()
    array = np.asarray(list(idx) if isinstance(idx, range) else idx)
    if array.dtype == bool:
        return np.nonzero(array)[0]
    return array.astype(np.int64).reshape(-1) % max(n, 1)
