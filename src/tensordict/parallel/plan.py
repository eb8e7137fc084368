"""Chunk plans: which elements along ``dim`` each chunk holds, computed on demand.

A plan never materialises the chunks: ``index(k)`` gives chunk ``k``'s index along ``dim`` (a slice,
an int for ``chunksize=0``, or a tensor of positions when shuffled), which a worker applies to the
source with :func:`take`. ``num_chunks=k`` gives ``k`` chunks whose sizes differ by at most one.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tensordict.core.dense import TensorDict
from tensordict.memmap.tensor import MemoryMappedTensor, _wrap

__all__ = ["ChunkPlan", "SliceTaker", "take", "take_run"]

#: leaf classes a run of chunks may be cut from in one go (see :func:`take_run`)
_PLAIN_LEAVES = (torch.Tensor, MemoryMappedTensor)


class ChunkPlan:
    """How ``n`` elements along ``dim`` are cut into chunks.

    Args:
        n: the size of the source along ``dim``.
        dim: the (non-negative) dimension to split.
        chunksize: elements per chunk; ``0`` gives one element per chunk with ``dim`` removed.
        num_chunks: the number of chunks (balanced). Exclusive with ``chunksize``.
        default_chunks: the number of chunks when neither is given (the number of workers).
        perm: a permutation of ``range(n)`` for shuffled chunks, or None.

    Examples:
        >>> plan = ChunkPlan(10, 0, num_chunks=3)
        >>> [plan.index(k) for k in range(len(plan))]
        [slice(0, 4, None), slice(4, 7, None), slice(7, 10, None)]
        >>> ChunkPlan(5, 0, chunksize=0).index(3)
        3
    """

    __slots__ = ("_base", "_extra", "_size", "count", "dim", "n", "perm", "unbind")

    def __init__(
        self,
        n: int,
        dim: int,
        *,
        chunksize: int | None = None,
        num_chunks: int | None = None,
        default_chunks: int = 1,
        perm: torch.Tensor | None = None,
    ) -> None:
        if chunksize is not None and num_chunks is not None:
            raise ValueError(
                f"give chunksize or num_chunks, not both (got chunksize={chunksize}, "
                f"num_chunks={num_chunks})."
            )
        if chunksize is not None and chunksize < 0:
            raise ValueError(
                f"chunksize must be >= 0 (0 passes elements one by one), got {chunksize}."
            )
        if num_chunks is not None and num_chunks <= 0:
            raise ValueError(f"num_chunks must be a positive int, got {num_chunks}.")
        self.n = n
        self.dim = dim
        self.perm = perm
        self.unbind = chunksize == 0
        self._size = 0
        self._base = self._extra = 0
        if self.unbind:
            self.count = n
        elif chunksize is not None:
            self._size = chunksize
            self.count = math.ceil(n / chunksize) if n else 0
        else:
            k = min(num_chunks if num_chunks is not None else max(default_chunks, 1), n)
            self.count = k
            if k:
                self._base, self._extra = divmod(n, k)

    def __len__(self) -> int:
        return self.count

    def bounds(self, k: int) -> tuple[int, int]:
        """``(start, stop)`` of chunk ``k`` in (permuted) position space."""
        if self.unbind:
            return k, k + 1
        if self._size:
            start = k * self._size
            return start, min(start + self._size, self.n)
        start = k * self._base + min(k, self._extra)
        return start, start + self._base + (1 if k < self._extra else 0)

    def index(self, k: int) -> Any:
        """Chunk ``k``'s index along ``dim``: slice, int (``chunksize=0``) or position tensor."""
        if not 0 <= k < self.count:
            raise IndexError(f"chunk {k} out of range for a plan of {self.count} chunks.")
        if self.perm is not None:
            if self.unbind:
                return int(self.perm[k])
            start, stop = self.bounds(k)
            return self.perm[start:stop]
        if self.unbind:
            return k
        start, stop = self.bounds(k)
        return slice(start, stop)


def take(source: Any, dim: int, index: Any) -> Any:
    """``source`` indexed by ``index`` along ``dim`` (the chunk a worker hands to ``fn``)."""
    if dim == 0:
        return source[index]
    return source[(slice(None),) * dim + (index,)]


def take_run(
    source: Any, dim: int, plan: ChunkPlan, ks: range, lock: bool = False
) -> list[Any] | None:
    """Chunks ``ks`` (consecutive) of ``plan``, as :func:`take` gives them, cut from one slice.

    For tiny chunks, indexing the source costs more than ``fn``: the run is sliced once, and
    each chunk is built from views of that slice's leaves (``split``), with the slice's device,
    names, lock and memory-mapped flag (what indexing the source would have given each chunk).
    None where that does not apply (shuffled or unbound plans, a source other than a flat
    :class:`~tensordict.TensorDict` of plain or memory-mapped tensors): use :func:`take`.
    ``lock=True`` locks every chunk (as ``chunk.lock_()`` would, at no extra cost).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(10)}, [10])
        >>> plan = ChunkPlan(10, 0, chunksize=3)
        >>> [c["x"].tolist() for c in take_run(td, 0, plan, range(2, 4))]
        [[6, 7, 8], [9]]
    """
    if len(ks) < 2 or plan.perm is not None or plan.unbind or source.__class__ is not TensorDict:
        return None
    for leaf in source._tensordict.values():
        if leaf.__class__ not in _PLAIN_LEAVES or leaf.is_nested:
            return None
    bounds = [plan.bounds(k) for k in ks]
    run = take(source, dim, slice(bounds[0][0], bounds[-1][1]))
    sizes = [stop - start for start, stop in bounds]
    keys = list(run._tensordict)
    columns = [leaf.split(sizes, dim) for leaf in run._tensordict.values()]
    shape = list(run._batch_size)
    batch_sizes: dict[int, torch.Size] = {}
    for size in sizes:
        if size not in batch_sizes:
            shape[dim] = size
            batch_sizes[size] = torch.Size(shape)
    names, device, memmap = run._names, run._device, run._is_memmap
    lock = lock or run._is_locked
    new = TensorDict._new_unsafe
    return [
        new(
            dict(zip(keys, leaves)),
            batch_sizes[size],
            device,
            None if names is None else list(names),
            lock=lock,
            is_memmap=memmap,
        )
        for size, leaves in zip(sizes, zip(*columns) if columns else [()] * len(sizes))
    ]


class SliceTaker:
    """``take(source, dim, plan.index(k))`` for the chunks of an unshuffled plan (slices), with
    what does not change from chunk to chunk looked up once.

    A worker cuts a chunk after ``fn`` has streamed the previous one through the caches, so every
    object and line of code the cut touches is a cache miss: indexing the source (index planning,
    per-leaf dispatch, memory-mapped wrapping) cost ~65-80 us a chunk that way. This cuts each leaf
    with one slice and wraps it as the leaf's own indexing would (a memory-mapped leaf gives a
    memory-mapped view of the same file), and builds the tensordict with the flags indexing gave
    the first chunk (lock, memory-mapped, shared, names, device: the same for every slice).

    With ``lock=True`` every chunk comes locked, built so (as ``take_run``'s chunks): locking each
    one afterwards would cost a worker ~10 us a chunk, cold.

    :meth:`build` returns None where that does not apply (shuffled or unbound plans, a source
    other than a flat :class:`~tensordict.TensorDict` of plain or memory-mapped tensors): use
    :func:`take` then.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(10)}, [10])
        >>> cut = SliceTaker.build(td, 0, ChunkPlan(10, 0, chunksize=4))
        >>> cut(2)["x"].tolist(), cut(2).batch_size, cut(2).is_locked
        ([8, 9], torch.Size([2]), False)
        >>> SliceTaker.build(td, 0, ChunkPlan(10, 0, chunksize=4), lock=True)(0).is_locked
        True
    """

    __slots__ = ("_bounds", "_flags", "_lead", "_leaves", "_shape", "_sizes")

    def __init__(self, source: TensorDict, dim: int, plan: ChunkPlan, lock: bool = False) -> None:
        self._bounds = plan.bounds
        #: (key, leaf, filename, parent shape) of memory-mapped leaves; filename None: plain
        self._leaves: list[tuple[str, torch.Tensor, Any, Any]] = []
        for key, leaf in source._tensordict.items():
            if leaf.__class__ is MemoryMappedTensor:
                parent = leaf._parent_shape if leaf._parent_shape is not None else leaf.shape
                self._leaves.append((key, leaf, leaf, parent))
            else:
                self._leaves.append((key, leaf, None, None))
        self._lead = (slice(None),) * dim
        first = take(source, dim, plan.index(0))  # the flags indexing gives every slice
        names = first._names
        locked = lock or first._is_locked
        self._flags = (first._device, names, locked, first._is_memmap, first._shared)
        self._shape = (list(source._batch_size), dim)
        #: chunk size -> batch size (a plan has at most two sizes)
        self._sizes: dict[int, torch.Size] = {}

    @classmethod
    def build(cls, source: Any, dim: int, plan: ChunkPlan, lock: bool = False) -> SliceTaker | None:
        """A taker for ``plan``'s chunks of ``source`` (locked if ``lock``), or None where it
        does not apply."""
        if plan.perm is not None or plan.unbind or source.__class__ is not TensorDict or not plan:
            return None
        for leaf in source._tensordict.values():
            if leaf.__class__ not in _PLAIN_LEAVES or leaf.is_nested:
                return None
        return cls(source, dim, plan, lock)

    def __call__(self, k: int) -> TensorDict:
        start, stop = self._bounds(k)
        index: Any = slice(start, stop)
        if self._lead:
            index = (*self._lead, index)
        getitem = torch.Tensor.__getitem__
        source = {}
        for key, leaf, mapped, parent in self._leaves:
            if mapped is None:
                source[key] = leaf[index]
            else:  # what ``MemoryMappedTensor.__getitem__`` gives for a slice
                source[key] = _wrap(getitem(leaf, index), mapped._filename, mapped._handler, parent)
        batch_size = self._sizes.get(stop - start)
        if batch_size is None:
            shape, dim = self._shape
            shape[dim] = stop - start
            batch_size = self._sizes[stop - start] = torch.Size(shape)
        device, names, locked, memmap, shared = self._flags
        out = TensorDict._new_unsafe(
            source,
            batch_size,
            device,
            None if names is None else list(names),
            lock=locked,
            is_memmap=memmap,
        )
        out._shared = shared
        return out
