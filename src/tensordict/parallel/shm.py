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
"""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref

import numpy as np

__all__ = ["DATA_OFFSET", "SegmentCache", "SegmentPool"]

_GRAIN = 1 << 20
#: bytes reserved at the start of a segment for its flag (keeps the data 64-byte aligned)
DATA_OFFSET = 64
_FREE, _BUSY = 1, 0


class _Segment:
    __slots__ = ("fd", "id", "mm", "sent", "size", "view")

    def __init__(self, seg_id: int, size: int) -> None:
        self.id = seg_id
        self.size = size  # usable bytes, after the flag
        self.fd = os.memfd_create(f"tensordict-segment-{seg_id}", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, DATA_OFFSET + size)
        self.mm = mmap.mmap(self.fd, DATA_OFFSET + size)
        self.view = memoryview(self.mm)
        self.sent = False  # whether the receiver has been given its file descriptor yet


class SegmentPool:
    """The sender's segments: busy while the receiver uses them, then reused."""

    def __init__(self) -> None:
        self._free: list[_Segment] = []
        self._busy: dict[int, _Segment] = {}
        self._next = 0

    def _collect_freed(self) -> None:
        for seg in [s for s in self._busy.values() if s.mm[0] == _FREE]:
            del self._busy[seg.id]
            self._free.append(seg)

    def acquire(self, size: int) -> _Segment:
        """A free segment of at least ``size`` bytes (and not much bigger), or a new one."""
        self._collect_freed()
        best = None
        for seg in self._free:
            if size <= seg.size <= max(2 * size, _GRAIN) and (best is None or seg.size < best.size):
                best = seg
        if best is None:
            best = _Segment(self._next, max(_GRAIN, -(-size // _GRAIN) * _GRAIN))
            self._next += 1
        else:
            self._free.remove(best)
        best.mm[0] = _BUSY
        self._busy[best.id] = best
        return best

    def __len__(self) -> int:
        return len(self._free) + len(self._busy)

    def close(self) -> None:
        for seg in [*self._free, *self._busy.values()]:
            seg.view.release()
            with contextlib.suppress(BufferError):  # still exported: freed with its last user
                seg.mm.close()
            os.close(seg.fd)
        self._free.clear()
        self._busy.clear()


class SegmentCache:
    """The receiver's mappings of the peer's segments."""

    def __init__(self) -> None:
        self._maps: dict[int, mmap.mmap] = {}

    def add(self, seg_id: int, fd: int) -> None:
        """Map a segment the peer just shared (and close our copy of its descriptor)."""
        try:
            self._maps[seg_id] = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def buffers(self, seg_id: int, layout: list[tuple[int, int]]) -> list[np.ndarray]:
        """Arrays over the segment's buffers (offsets after the flag); when all of them are freed,
        the segment is handed back to the sender."""
        mm = self._maps[seg_id]
        arrays = [
            np.frombuffer(mm, dtype=np.uint8, count=n, offset=DATA_OFFSET + o) for o, n in layout
        ]
        counter = [len(arrays)]
        for arr in arrays:
            weakref.finalize(arr, _one_freed, mm, counter)
        return arrays

    def close(self) -> None:
        self._maps.clear()  # mappings still used by tensors are freed with them


def _one_freed(mm: mmap.mmap, counter: list[int]) -> None:
    counter[0] -= 1  # finalizers of one message run in one thread, one at a time (GIL)
    if counter[0] == 0 and not mm.closed:
        mm[0] = _FREE
