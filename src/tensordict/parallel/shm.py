"""Reusable shared-memory segments for the large buffers a channel carries.

Copying a 16 MiB result into a *new* memory file costs the page allocation and zeroing on top of
the copy, and mapping it afresh in the receiver costs a page-table fill: twice the copy itself.
Instead, each sender keeps a pool of segments (anonymous memory files) that the receiver maps
once. A message names the segment holding its buffers; the receiver builds the tensors directly on
its mapping and, when the last of them is freed, hands the segment back (the release rides on the
receiver's next message). A steady stream of chunks thus reuses a few warm segments: one memcpy per
large result, no page faults.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import weakref

import numpy as np

__all__ = ["SegmentCache", "SegmentPool"]

_GRAIN = 1 << 20


class _Segment:
    __slots__ = ("fd", "id", "mm", "sent", "size", "view")

    def __init__(self, seg_id: int, size: int) -> None:
        self.id = seg_id
        self.size = size
        self.fd = os.memfd_create(f"tensordict-segment-{seg_id}", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.mm = mmap.mmap(self.fd, size)
        self.view = memoryview(self.mm)
        self.sent = False  # whether the receiver has been given its file descriptor yet


class SegmentPool:
    """The sender's segments: busy while the receiver uses them, then reused."""

    def __init__(self) -> None:
        self._free: list[_Segment] = []
        self._busy: dict[int, _Segment] = {}
        self._next = 0

    def acquire(self, size: int) -> _Segment:
        """A free segment of at least ``size`` bytes (and not much bigger), or a new one."""
        best = None
        for seg in self._free:
            if size <= seg.size <= max(2 * size, _GRAIN) and (best is None or seg.size < best.size):
                best = seg
        if best is None:
            best = _Segment(self._next, max(_GRAIN, -(-size // _GRAIN) * _GRAIN))
            self._next += 1
        else:
            self._free.remove(best)
        self._busy[best.id] = best
        return best

    def release(self, ids: list[int]) -> None:
        """The receiver is done with these segments."""
        for i in ids:
            seg = self._busy.pop(i, None)
            if seg is not None:
                self._free.append(seg)

    def close(self) -> None:
        for seg in [*self._free, *self._busy.values()]:
            seg.view.release()
            with contextlib.suppress(BufferError):  # still exported: freed with its last user
                seg.mm.close()
            os.close(seg.fd)
        self._free.clear()
        self._busy.clear()


class SegmentCache:
    """The receiver's mappings of the peer's segments, and the releases owed to the peer."""

    def __init__(self) -> None:
        self._maps: dict[int, mmap.mmap] = {}
        self._released: list[int] = []
        self._lock = threading.Lock()

    def add(self, seg_id: int, fd: int) -> None:
        """Map a segment the peer just shared (and close our copy of its descriptor)."""
        try:
            size = os.fstat(fd).st_size
            self._maps[seg_id] = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def buffers(self, seg_id: int, layout: list[tuple[int, int]]) -> list[np.ndarray]:
        """Arrays over the segment's buffers; the segment is released when all of them are freed."""
        mm = self._maps[seg_id]
        arrays = [np.frombuffer(mm, dtype=np.uint8, count=n, offset=o) for o, n in layout]
        counter = [len(arrays)]
        for arr in arrays:
            weakref.finalize(arr, self._one_freed, seg_id, counter)
        return arrays

    def _one_freed(self, seg_id: int, counter: list[int]) -> None:
        with self._lock:
            counter[0] -= 1
            if counter[0] == 0:
                self._released.append(seg_id)

    def take_released(self) -> list[int]:
        with self._lock:
            out, self._released = self._released, []
        return out

    def close(self) -> None:
        self._maps.clear()  # mappings still used by tensors are freed with them
