"""Reusable shared-memory segments for the large buffers a channel carries.

Copying a 16 MiB result into a *new* memory file costs the page allocation and zeroing on top of
the copy, and mapping it afresh in the receiver costs a page-table fill: twice the copy itself.
Instead, each sender keeps a pool of segments (anonymous memory files) that the receiver maps
once. A message names the segment holding its buffers; the receiver builds the tensors directly on
its mapping.

Handing a segment back needs no message: its first bytes are a flag. The sender clears it when it
fills the segment; the receiver sets it the moment the last tensor built on the segment is freed
(from a finalizer, which may run anywhere: writing one byte of shared memory is safe there); the
sender checks the flags of its busy segments before it grows the pool. Each transition has a
single writer (0 -> 1 receiver, 1 -> 0 sender) and the message in between orders them. A steady
stream of chunks thus reuses a few warm segments: one memcpy per large result, no page faults,
and no segment stays busy longer than the result that lives in it.

Across calls (whose workers are new processes), :data:`STOCK` keeps the parent's mappings of a
finished call's segments for the next call's forked workers (see :class:`SegmentStock`).
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from typing import Any, cast

import numpy as np
import torch

__all__ = ["DATA_OFFSET", "STOCK", "SegmentCache", "SegmentPool", "SegmentStock"]

_GRAIN = 1 << 20
_SCAN = 16
#: bytes reserved at the start of a segment for its flag (keeps the data 64-byte aligned)
DATA_OFFSET = 64
_FREE, _BUSY = 1, 0


def map_fd(fd: int, size: int) -> np.ndarray:
    """Map a memory file as a writable byte array that keeps no file descriptor open.

    (Python's ``mmap`` duplicates the descriptor for its whole life: a consumer holding a
    thousand results would hold a thousand descriptors; torch's mapping closes its own.)
    """
    return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=size, dtype=torch.uint8).numpy()


def map_pages(array: np.ndarray) -> None:
    """Fill this process's page table for a mapping of pages that already exist, by reading one
    byte per page: a read fault maps 16 pages at once (fault-around), a write fault one, so a
    16 MiB copy into a new mapping costs ~3 ms this way instead of ~10 ms (measured on a VM)."""
    int(array[:: mmap.PAGESIZE].sum())


class _Segment:
    __slots__ = ("array", "fd", "fresh", "id", "sent", "size", "view")

    def __init__(self, seg_id: int, size: int, warm: np.ndarray | None = None) -> None:
        self.id = seg_id
        #: a warm mapping this process has not written yet (its page table is empty)
        self.fresh = warm is not None
        if warm is not None:  # a mapping the receiver already has (``SegmentStock``)
            self.size = len(warm) - DATA_OFFSET
            self.fd = -1
            self.array = warm
            self.sent = True
        else:
            self.size = size  # usable bytes, after the flag
            self.fd = os.memfd_create(f"tensordict-segment-{seg_id}", os.MFD_CLOEXEC)
            os.ftruncate(self.fd, DATA_OFFSET + size)
            self.array = map_fd(self.fd, DATA_OFFSET + size)
            self.sent = False  # whether the receiver has been given its file descriptor yet
        self.view = self.array.data

    def delivered(self) -> None:
        """The receiver holds the segment now: our descriptor is no longer needed (the mapping
        stays valid), so a pool of many segments does not use up file descriptors."""
        self.sent = True
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class SegmentPool:
    """The sender's segments: busy while the receiver uses them, then reused.

    Args:
        warm: segments the receiver already maps (ids ``0 .. len(warm) - 1``, see
            :class:`SegmentStock`), free to use.
    """

    def __init__(self, warm: list[np.ndarray] = ()) -> None:  # type: ignore[assignment]
        self._free: list[_Segment] = [_Segment(i, 0, array) for i, array in enumerate(warm)]
        self._busy: dict[int, _Segment] = {}  # in the order they were sent
        self._next = len(self._free)

    def _collect_freed(self, scan: int) -> None:
        # Results are mostly freed in the order they were sent: the oldest busy segments are
        # looked at until one is still in use (the first ``scan`` in any case), so a steady
        # stream reads one or two flags per result, not ``_SCAN``: each flag is a page of its
        # own, cold after a chunk went through the caches (~1-2 us a read).
        freed = []
        for i, seg in enumerate(self._busy.values()):
            if seg.view[0] == _FREE:
                freed.append(seg)
            elif i >= scan - 1:
                break
        for seg in freed:
            del self._busy[seg.id]
            self._free.append(seg)

    def _fitting(self, size: int) -> _Segment | None:
        best = None
        for seg in self._free:
            if size <= seg.size <= max(2 * size, _GRAIN) and (best is None or seg.size < best.size):
                best = seg
        return best

    def acquire(self, size: int) -> _Segment:
        """A free segment of at least ``size`` bytes (and not much bigger), or a new one.

        The oldest busy segments are collected first (see ``_collect_freed``); the first
        :data:`_SCAN` of them are looked at before a new segment is made, so that a consumer
        that keeps some results and frees others out of order does not grow the pool.
        """
        self._collect_freed(1)
        rounded = max(_GRAIN, -(-size // _GRAIN) * _GRAIN)  # the size of a new segment
        free = self._free
        best: _Segment | None
        if free and free[-1].size == rounded:  # the smallest that fits: no need to look further
            best = free.pop()
        else:
            best = self._fitting(size)
            if best is None:
                self._collect_freed(_SCAN)
                best = self._fitting(size)
            if best is not None:
                free.remove(best)
        if best is None:
            best = _Segment(self._next, rounded)
            self._next += 1
        elif best.fresh:  # inherited: its pages exist, this process has not mapped them yet
            map_pages(best.array)
            best.fresh = False
        best.view[0] = _BUSY
        self._busy[best.id] = best
        return best

    def __len__(self) -> int:
        return len(self._free) + len(self._busy)

    def close(self) -> None:
        for seg in [*self._free, *self._busy.values()]:
            seg.view.release()  # the mapping itself goes with the last array using it
            if seg.fd >= 0:
                os.close(seg.fd)
        self._free.clear()
        self._busy.clear()


class SegmentCache:
    """The receiver's mappings of the peer's segments.

    Args:
        warm: mappings the peer's :class:`SegmentPool` was given as ``warm`` (same order).
    """

    def __init__(self, warm: list[np.ndarray] = ()) -> None:  # type: ignore[assignment]
        #: a memoryview of each mapping (``.obj``: the array): results are built on its slices
        self._views: dict[int, memoryview] = {i: array.data for i, array in enumerate(warm)}

    def mappings(self) -> list[np.ndarray]:
        """Every segment mapped so far (for :class:`SegmentStock`)."""
        return [cast(np.ndarray, view.obj) for view in self._views.values()]

    def add(self, seg_id: int, fd: int) -> None:
        """Map a segment the peer just shared (and close our copy of its descriptor)."""
        try:
            self._views[seg_id] = map_fd(fd, os.fstat(fd).st_size).data
        finally:
            os.close(fd)

    def buffers(self, seg_id: int, layout: list[tuple[int, int]]) -> list[memoryview]:
        """Byte views of the segment's buffers (offsets after the flag); when all of them are
        freed, the segment is handed back to the sender.

        Memoryviews, not NumPy arrays: ``torch.frombuffer`` on a slice of a memoryview costs
        ~12 us against ~16 us on a slice of an array, right after a chunk went through the
        caches (the parent builds every result on one).
        """
        segment = self._views[seg_id]
        arrays = [segment[DATA_OFFSET + o : DATA_OFFSET + o + n] for o, n in layout]
        counter = [len(arrays), segment]
        for arr in arrays:
            # a weak reference with a callback, kept in a module-level table until it fires:
            # what ``weakref.finalize`` does, without its bookkeeping (~1.5 us a result)
            ref = weakref.ref(arr, _one_freed)
            _WATCHED[id(ref)] = (ref, counter)
        return arrays

    def close(self) -> None:
        self._views.clear()  # mappings still used by tensors are freed with them


#: id(weak reference) -> (the reference, [buffers of its message not yet freed, segment])
_WATCHED: dict[int, tuple[Any, list[Any]]] = {}


def _one_freed(ref: Any) -> None:
    _, counter = _WATCHED.pop(id(ref))
    counter[0] -= 1  # callbacks of one message run in one thread, one at a time (GIL)
    if counter[0] == 0:
        counter[1][0] = _FREE


#: at most this many bytes of segments are kept warm between calls
STOCK_BYTES = 128 << 20


class SegmentStock:
    """Segments of earlier calls kept mapped, for the workers of the next call to write into.

    A worker is a new process in every ``map_iter`` call, and a new segment costs its first
    writer the allocation of every page (~20 ms for 16 MiB on a VM, ten times the copy into it).
    The parent keeps the segments of a finished call mapped (their pages stay allocated) and
    hands them to the next call's forked workers, which inherit the mapping: their results then
    cost one copy into warm memory, on every call but the first. At most :data:`STOCK_BYTES`
    are kept (the process's shared memory grows by that much at most between calls); segments
    whose results are still held by the caller are reused once those are freed. Owned by one
    process: a forked child starts with an empty stock.
    """

    def __init__(self, limit: int = STOCK_BYTES) -> None:
        self.limit = limit
        self._arrays: list[np.ndarray] = []
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _mine(self) -> list[np.ndarray]:
        if self._pid != os.getpid():  # inherited: these are the parent's
            self._arrays, self._pid = [], os.getpid()
        return self._arrays

    def take(self, count: int) -> list[np.ndarray]:
        """Up to ``count`` free segments (removed from the stock)."""
        with self._lock:
            arrays = self._mine()
            free = [a for a in arrays if a[0] == _FREE][:count]
            self._arrays = [a for a in arrays if not any(a is f for f in free)]
            return free

    def give(self, arrays: list[np.ndarray]) -> None:
        """Keep these segments (free ones first), within :attr:`limit` bytes."""
        with self._lock:
            pool = arrays + self._mine()
            pool.sort(key=lambda a: a[0] != _FREE)  # stable: free ones first, newest first
            kept, total = [], 0
            for a in pool:
                if total + len(a) <= self.limit:
                    kept.append(a)
                    total += len(a)
            self._arrays = kept

    def __len__(self) -> int:
        return len(self._mine())

    def clear(self) -> None:
        """Release every kept segment (their memory goes with the last tensor using it)."""
        with self._lock:
            self._arrays = []


#: the segments this process keeps between calls
STOCK = SegmentStock()
