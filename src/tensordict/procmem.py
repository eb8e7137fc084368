"""How much private memory a process tree uses, sampled in the background (Linux ``/proc``).

"Private" here is what a job costs the machine beyond the page cache:

* the proportional anonymous memory of this process and all its descendants: the sum of
  ``Pss_Anon`` in ``/proc/PID/smaps_rollup`` (pages shared copy-on-write after ``fork`` are split
  between the processes that share them, so nothing is counted twice), plus
* the growth of the system-wide ``Shmem`` of ``/proc/meminfo`` since sampling started: shared
  memory (memfd, ``/dev/shm``, tmpfs files) that results travel through. It is system-wide, so
  other programs writing shared memory at the same time add noise.

Memory-mapped files read or written by the job are page cache, not private memory, and are not
counted. On systems without these files every figure is None.

Examples:
    >>> with MemorySampler() as sampler:
    ...     block = bytearray(32 * 2**20)
    >>> sampler.peak is None or sampler.peak > 0
    True
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from types import TracebackType

__all__ = ["MemorySample", "MemorySampler", "process_tree", "pss_anon", "shmem", "tree_pss_anon"]


def _read_kb(path: str, field: str) -> int | None:
    """The value of ``field:  N kB`` in ``path``, in bytes; None if the file or field is missing."""
    prefix = field + ":"
    try:
        with open(path, "rb") as f:
            for raw in f:
                line = raw.decode("ascii", "replace")
                if line.startswith(prefix):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def pss_anon(pid: int) -> int | None:
    """``Pss_Anon`` of one process in bytes (None if it exited or the kernel lacks the field)."""
    return _read_kb(f"/proc/{pid}/smaps_rollup", "Pss_Anon")


def shmem() -> int | None:
    """The system-wide ``Shmem`` of ``/proc/meminfo`` in bytes (None when unavailable)."""
    return _read_kb("/proc/meminfo", "Shmem")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError, PermissionError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            path = f"/proc/{pid}/task/{tid}/children"
            with contextlib.suppress(FileNotFoundError, ProcessLookupError), open(path) as f:
                found.extend(int(c) for c in f.read().split())
    return found


def process_tree(pid: int | None = None) -> list[int]:
    """``pid`` (default: this process) and all its descendants that are alive now."""
    root = os.getpid() if pid is None else pid
    tree, todo = [], [root]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(_children(p))
    return tree


def tree_pss_anon(pid: int | None = None) -> int | None:
    """The sum of ``Pss_Anon`` over :func:`process_tree` in bytes; None when unavailable."""
    values = [pss_anon(p) for p in process_tree(pid)]
    if values[0] is None:  # the root itself: the field is unavailable here
        return None
    return sum(v for v in values if v is not None)


@dataclass(frozen=True)
class MemorySample:
    """One reading: the tree's anonymous memory and the Shmem growth, in bytes."""

    anon: int
    shmem_growth: int

    @property
    def private(self) -> int:
        """``anon + shmem_growth``: the private memory of the reading."""
        return self.anon + self.shmem_growth


class MemorySampler:
    """Samples the private memory of a process tree in a background thread; keeps the peak.

    Use it as a context manager around the code to measure. It reads once on entry, every
    ``interval`` seconds while the code runs, and once on exit.

    Args:
        interval: seconds between readings. Each reading costs a few ``/proc`` reads per process.
        pid: the root of the tree (default: this process).

    Attributes:
        peak_sample: the reading with the largest private memory, or None when ``/proc`` lacks the
            fields (not Linux, old kernel).
    """

    def __init__(self, interval: float = 0.05, pid: int | None = None) -> None:
        self.interval = interval
        self.pid = os.getpid() if pid is None else pid
        self.peak_sample: MemorySample | None = None
        self._shmem_start: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def peak(self) -> int | None:
        """The peak private memory in bytes (anonymous memory plus Shmem growth), or None."""
        return None if self.peak_sample is None else self.peak_sample.private

    def sample(self) -> MemorySample | None:
        """Take one reading now and keep it if it is the new peak."""
        anon = tree_pss_anon(self.pid)
        if anon is None:
            return None
        now = shmem()
        growth = 0 if now is None or self._shmem_start is None else now - self._shmem_start
        reading = MemorySample(anon, max(growth, 0))
        if self.peak_sample is None or reading.private > self.peak_sample.private:
            self.peak_sample = reading
        return reading

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemorySampler:
        self._shmem_start = shmem()
        self._stop.clear()
        self.sample()
        self._thread = threading.Thread(target=self._run, name="MemorySampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.sample()
