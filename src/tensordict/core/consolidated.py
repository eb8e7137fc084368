"""Consolidated tensordicts: every leaf a view into one flat byte storage.

``td.consolidate()`` copies all leaves (of any tensordict type: dense, lazy stacks, tensorclasses,
with non-tensor entries and jagged nested tensors) into one ``uint8`` storage, aligned, and returns
a tensordict of the same structure whose leaves view that storage. Moving or pickling it then moves
one buffer instead of one per leaf: a consolidated tensordict pickles as its storage plus a
*skeleton* (the same tensordict with ``meta`` leaves: structure, shapes and dtypes, no data).

With ``filename=``, the storage is a memory-mapped file that also holds the skeleton, after the
data: ``[data][pickled skeleton][8-byte little-endian skeleton length]``, so
:func:`from_consolidated` reopens it from the file alone.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any

import torch

from tensordict.errors import MemmapFormatError

__all__ = ["consolidate", "from_consolidated", "is_consolidated", "rebuild_consolidated"]

_ALIGN = 16
_TRAILER = 8


def _parts(t: torch.Tensor) -> list[torch.Tensor]:
    """The tensors that hold ``t``'s data: itself, or a jagged tensor's values/offsets/lengths."""
    if t.is_nested and t.layout is torch.jagged:
        parts = [t.values(), t.offsets()]  # type: ignore[attr-defined]
        lengths = t.lengths()  # type: ignore[attr-defined]
        return parts if lengths is None else [*parts, lengths]
    if t.is_nested:
        raise NotImplementedError(
            "consolidate() supports jagged nested tensors (layout=torch.jagged) only; convert "
            "strided nested tensors with torch.nested.as_nested_tensor(..., layout=torch.jagged)."
        )
    return [t]


def _layout(leaves: list[torch.Tensor]) -> tuple[list[list[tuple[int, Any]]], int]:
    """Per leaf, ``(byte offset, part)`` of each part; and the total byte size."""
    slots: list[list[tuple[int, Any]]] = []
    offset = 0
    for leaf in leaves:
        parts = []
        for part in _parts(leaf):
            parts.append((offset, part))
            nbytes = part.numel() * part.element_size()
            offset += -(-nbytes // _ALIGN) * _ALIGN
        slots.append(parts)
    return slots, offset


def _view(storage: torch.Tensor, offset: int, dtype: torch.dtype, shape: Any) -> torch.Tensor:
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = int(torch.Size(shape).numel())
    flat = storage[offset : offset + numel * itemsize].view(dtype)
    return flat.view(shape)


def _rebuild_leaf(storage: torch.Tensor, slots: list[tuple[int, Any]], like: torch.Tensor) -> Any:
    views = [_view(storage, off, p.dtype, p.shape) for off, p in slots]
    if like.is_nested:
        lengths = views[2] if len(views) > 2 else None
        return torch.nested.nested_tensor_from_jagged(
            views[0],
            views[1],
            lengths=lengths,
            jagged_dim=like._ragged_idx,  # type: ignore[attr-defined]
        )
    return views[0]


def _leaves(td: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []

    def record(t: torch.Tensor) -> torch.Tensor:
        found.append(t)
        return t

    td.apply(record)
    return found


def _map_leaves(td: Any, fn: Callable[[int, torch.Tensor], Any]) -> Any:
    counter = iter(range(1 << 62))
    return td.apply(lambda t: fn(next(counter), t))


def _skeleton(td: Any) -> Any:
    return td.apply(lambda t: t.to("meta"))


def _meta_like(part: torch.Tensor) -> torch.Tensor:
    return torch.empty(part.shape, dtype=part.dtype, device="meta")


def _specs(slots: list[list[tuple[int, Any]]]) -> list[list[tuple[int, torch.Tensor]]]:
    return [[(off, _meta_like(p)) for off, p in parts] for parts in slots]


def _inner(td: Any) -> Any:
    """The tensordict itself, or the one a tensorclass wraps."""
    from tensordict.core.base import TensorDictBase

    return td if isinstance(td, TensorDictBase) else td._tensordict


class _Layout:
    """Where each leaf lies in the storage, and the structure to rebuild (an opaque pytree
    leaf: tree maps over ``td._consolidated`` see the storage, not the meta skeleton)."""

    __slots__ = ("skeleton", "specs")

    def __init__(self, specs: Any, skeleton: Any) -> None:
        self.specs = specs
        self.skeleton = skeleton


def _attach(td: Any, storage: torch.Tensor, specs: Any, skeleton: Any) -> Any:
    state = {"storage": storage, "metadata": _Layout(specs, skeleton)}
    target = _inner(td)
    target._consolidated = state
    if target is not td:
        object.__setattr__(td, "_consolidated", state)
    return td


def _allocate(total: int, filename: Any, trailer: bytes, share_memory: bool) -> torch.Tensor:
    if filename is None:
        storage = torch.empty(total, dtype=torch.uint8)
        return storage.share_memory_() if share_memory else storage
    from tensordict.memmap.tensor import MemoryMappedTensor  # memmap builds on core

    whole = MemoryMappedTensor.empty(
        total + len(trailer) + _TRAILER, dtype=torch.uint8, filename=filename, existsok=True
    )
    whole[total : total + len(trailer)] = torch.frombuffer(bytearray(trailer), dtype=torch.uint8)
    length = len(trailer).to_bytes(_TRAILER, "little")
    whole[total + len(trailer) :] = torch.frombuffer(bytearray(length), dtype=torch.uint8)
    return whole[:total]


def consolidate(
    td: Any,
    filename: str | os.PathLike[str] | None = None,
    *,
    share_memory: bool = False,
    device: torch.device | str | None = None,
) -> Any:
    """A copy of ``td`` whose leaves all view one flat ``uint8`` storage.

    Args:
        td: any tensordict (dense, lazy stack, tensorclass).
        filename: write the storage (and the structure) to this memory-mapped file.
        share_memory: put the storage in shared memory.
        device: move the storage (one transfer) to this device afterwards.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3])
        >>> c = td.consolidate()
        >>> c.is_consolidated(), bool((c == td).all())
        (True, True)
        >>> c["b", "c"].untyped_storage().data_ptr() == c["a"].untyped_storage().data_ptr()
        True
    """
    leaves = _leaves(td)
    slots, total = _layout(leaves)
    specs = _specs(slots)
    skeleton = _skeleton(td)
    trailer = b"" if filename is None else pickle.dumps((specs, skeleton))
    storage = _allocate(total, filename, trailer, share_memory)
    for parts in slots:
        for offset, part in parts:
            _view(storage, offset, part.dtype, part.shape).copy_(part)
    if device is not None and filename is None:
        storage = storage.to(device)
    out = _map_leaves(td, lambda i, t: _rebuild_leaf(storage, slots[i], t))
    if filename is not None or device is not None:
        out = out.to(storage.device)  # the leaves are there already: this only sets the device
    return _attach(out, storage, specs, skeleton)


def is_consolidated(td: Any) -> bool:
    """Whether ``td`` came from :func:`consolidate` (its leaves view one storage)."""
    return getattr(_inner(td), "_consolidated", None) is not None


def rebuild_consolidated(storage: torch.Tensor, specs: Any, skeleton: Any) -> Any:
    """Module-level rebuild of a pickled consolidated tensordict: views over ``storage``."""
    out = _map_leaves(skeleton, lambda i, t: _rebuild_leaf(storage, specs[i], t))
    return _attach(out, storage, specs, skeleton)


def reduce_consolidated(td: Any) -> tuple[Any, ...] | None:
    """``(rebuild, args)`` pickling a consolidated ``td`` as one storage, or None if it is not."""
    state = getattr(_inner(td), "_consolidated", None)
    if state is None:
        return None
    meta = state["metadata"]
    return (rebuild_consolidated, (state["storage"], meta.specs, meta.skeleton))


def from_consolidated(filename: str | os.PathLike[str]) -> Any:
    """Reopen a tensordict written by ``td.consolidate(filename=...)`` (memory-mapped).

    Raises:
        MemmapFormatError: the file is not a consolidated tensordict.

    Examples:
        >>> import os, tempfile
        >>> from tensordict import TensorDict
        >>> path = os.path.join(tempfile.mkdtemp(), "td.mmap")
        >>> _ = TensorDict(a=torch.arange(3), batch_size=[3]).consolidate(filename=path)
        >>> from_consolidated(path)["a"]
        tensor([0, 1, 2])
    """
    from tensordict.memmap.tensor import MemoryMappedTensor  # memmap builds on core

    size = os.path.getsize(filename)
    whole = MemoryMappedTensor.from_filename(filename, torch.uint8, (size,))
    if size < _TRAILER:
        raise MemmapFormatError(f"{filename} is too small to be a consolidated tensordict.")
    length = int.from_bytes(bytes(whole[size - _TRAILER :].tolist()), "little")
    start = size - _TRAILER - length
    if length <= 0 or start < 0:
        raise MemmapFormatError(
            f"{filename} does not end with a consolidated tensordict's structure; write it with "
            "td.consolidate(filename=...)."
        )
    specs, skeleton = pickle.loads(whole[start : size - _TRAILER].numpy().tobytes())
    out = rebuild_consolidated(whole[:start], specs, skeleton)
    state = out._consolidated
    return _attach(out.to("cpu"), state["storage"], specs, skeleton)
