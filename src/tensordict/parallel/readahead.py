"""Reading ahead: a chunk's bytes enter the page cache before its worker reads them.

A worker reads a memory-mapped source through page faults, one synchronous disk read at a time,
and only once it starts the chunk. When the data is not in the page cache, the disk then
idles while ``fn`` computes and serves one small request per worker. So when ``map_iter`` sends
chunk ``k`` to a worker, it asks the kernel to read that chunk's pages of every memory-mapped
file of the source (``madvise(MADV_WILLNEED)``: the kernel queues the reads and returns): the
chunk a worker will run next is read while it runs the current one, and the disk sees every
queued chunk's requests at once (for scattered rows, thousands of requests it can serve in
parallel instead of one per fault).

The requests are made by a thread of the calling process, so that neither the parent's loop
nor the workers wait for them. Before asking, it checks which pages are resident
(``mincore``): data already in the page cache costs a few microseconds per chunk. Only
file-backed memory-mapped leaves whose rows along the split dimension do not interleave are
read ahead (``dim=0`` of any tensordict of memory-mapped tensors, or of a strided view of
one); chunks smaller than :data:`MIN_CHUNK_BYTES` are left to the kernel's own read-ahead.

Examples:
    >>> import os, tempfile
    >>> from tensordict import TensorDict
    >>> from tensordict.parallel.plan import ChunkPlan
    >>> td = TensorDict({"x": torch.zeros(256, 1024)}, [256]).memmap_(tempfile.mkdtemp())
    >>> ahead = ReadAhead.for_call(td, ChunkPlan(256, 0, chunksize=64))
    >>> ahead is None or ahead.pages(1)[0].tolist() == [[64, 128]]  # 4 KiB rows: a page each
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import threading
from typing import Any

import numpy as np
import torch

from tensordict.core.dense import TensorDict
from tensordict.memmap import pagecache
from tensordict.memmap.tensor import MemoryMappedTensor
from tensordict.parallel.plan import ChunkPlan

__all__ = ["MIN_CHUNK_BYTES", "ReadAhead", "advise_access"]

#: chunks holding fewer bytes of memory-mapped data than this are not read ahead (the cost of a
#: request would approach that of the chunk; the kernel reads small sequential chunks ahead)
MIN_CHUNK_BYTES = 256 << 10
#: one ``MADV_WILLNEED`` reads at most the device's read-ahead window (``read_ahead_kb``, 128 KiB
#: by default): longer runs are asked for in pieces of this many pages
PIECE_PAGES = 32
#: rows of a scattered chunk whose residency the parent checks when it sends the chunk: all
#: resident, the chunk is not read ahead (checking every row would cost the parent ~1 ms)
SAMPLE_PAGES = 16
#: chunks in a row found wholly resident by the reading thread before the parent goes back to
#: checking samples itself
WARM_AGAIN = 4
#: in a call that has found no chunk cold, once WARM_STREAK chunks in a row were resident, the
#: parent checks one chunk in WARM_STRIDE: a check costs it ~10 us for a slice and ~60 us for
#: scattered rows (16 sampled pages, a system call each), a third of its CPU on warm shuffled
#: epochs. Data that turns cold is then read ahead from at most WARM_STRIDE - 1 chunks later.
#: A call that met cold data checks every chunk to its end, as the reading thread keeps ahead
#: of the workers there (its chunks look resident once read, while the next ones are not).
WARM_STREAK = 8
WARM_STRIDE = 4


class _Leaf:
    """Where the rows of one memory-mapped leaf lie in this process's mapping of its file."""

    __slots__ = ("_vec", "addr", "base", "dense", "extent", "pages", "step", "tensor")

    def __init__(self, tensor: torch.Tensor, dim: int) -> None:
        size = tensor.element_size()
        self.tensor = tensor  # keeps the mapping alive while requests refer to it
        self.addr, nbytes = pagecache.mapping(tensor)
        self.pages = -(-nbytes // pagecache.PAGE)
        self.base = tensor.data_ptr() - self.addr  # byte offset of row 0
        self.step = tensor.stride(dim) * size
        shape, strides = list(tensor.shape), list(tensor.stride())
        del shape[dim], strides[dim]
        self.extent = sum((n - 1) * s for n, s in zip(shape, strides)) * size + size
        self.dense = self.extent == self.step
        self._vec = ctypes.create_string_buffer(1)  # for the parent's checks (one thread)

    @classmethod
    def of(cls, value: Any, dim: int) -> _Leaf | None:
        """The leaf's layout, or None if it is not a file-backed mapping whose rows along
        ``dim`` lie apart (each row a block of its own, in order)."""
        if value.__class__ is not MemoryMappedTensor or not value.filename:
            return None
        if value.dim() <= dim or value.numel() == 0 or value.is_nested:
            return None
        leaf = cls(value, dim)
        return leaf if 0 < leaf.extent <= leaf.step else None

    def missing(self, index: Any) -> bool:
        """Whether a sample of the pages of the rows ``index`` names is not resident: the first
        page of a slice of dense rows (a cold file misses it), the first page of
        :data:`SAMPLE_PAGES` rows otherwise (checking every page costs the parent ~30 us per
        16 MiB on a busy machine, a page ~3 us)."""
        where = self.addr + self.base
        if index.__class__ is slice and self.dense:
            rows: Any = (index.start,)
        elif index.__class__ is slice:
            rows = range(index.start, index.stop)
            rows = rows[:: max(1, len(rows) // SAMPLE_PAGES)]
        elif isinstance(index, int):
            rows = (index,)
        else:
            rows = index[:: max(1, len(index) // SAMPLE_PAGES)].tolist()
        vec = self._vec
        return not all(pagecache.page_resident(where + row * self.step, vec) for row in rows)

    def runs(self, index: Any) -> np.ndarray:
        """``[[first page, end page), ...]`` of the rows ``index`` names: sorted, apart."""
        if index.__class__ is slice:
            start, stop = index.start, index.stop
            if self.dense:
                first = (self.base + start * self.step) // pagecache.PAGE
                end = -(-(self.base + (stop - 1) * self.step + self.extent) // pagecache.PAGE)
                return np.array([[first, end]], dtype=np.int64)
            rows = np.arange(start, stop, dtype=np.int64)
        elif isinstance(index, int):
            rows = np.array([index], dtype=np.int64)
        else:
            rows = np.sort(np.asarray(index, dtype=np.int64))
        starts = self.base + rows * self.step
        first = starts // pagecache.PAGE
        end = -(-(starts + self.extent) // pagecache.PAGE)
        # merge the runs of rows that share or touch pages (rows are sorted: so are the runs)
        breaks = np.flatnonzero(first[1:] > end[:-1]) + 1
        return np.stack([first[np.r_[0, breaks]], end[np.r_[breaks - 1, len(end) - 1]]], 1)


class ReadAhead:
    """Asks the kernel to read each chunk's pages as the chunk is sent (see the module doc).

    Args:
        leaves: the memory-mapped leaves of the source (:class:`_Leaf`).
        plan: the call's chunk plan.
    """

    def __init__(self, leaves: list[_Leaf], plan: ChunkPlan) -> None:
        self.leaves = leaves
        self.plan = plan
        self.closed = False
        #: chunks had pages missing lately: every request goes to the reading thread, which
        #: checks all their pages (until :data:`WARM_AGAIN` chunks in a row had none missing)
        self.cold = False
        self._resident_streak = 0
        #: chunks in a row the parent found resident, and requests since it last checked one
        self._warm = self._unchecked = 0
        #: a chunk of this call was found cold: every chunk is checked from then on
        self._met_cold = False

    @classmethod
    def for_call(cls, source: Any, plan: ChunkPlan) -> ReadAhead | None:
        """The read-ahead of one call over ``source``, or None when there is nothing to read
        ahead (no memory-mapped leaf, chunks under :data:`MIN_CHUNK_BYTES`, no ``mincore``)."""
        if getattr(type(source), "_is_tensorclass", False):
            source = source._tensordict
        if not pagecache.supported() or not isinstance(source, TensorDict) or not len(plan):
            return None
        leaves = []
        for value in source.values(include_nested=True, leaves_only=True):
            leaf = _Leaf.of(value, plan.dim)
            if leaf is not None:
                leaves.append(leaf)
        start, stop = plan.bounds(0)
        if sum(leaf.extent for leaf in leaves) * (stop - start) < MIN_CHUNK_BYTES:
            return None
        return cls(leaves, plan)

    def request(self, k: int) -> None:
        """Read chunk ``k``'s pages ahead, in the reading thread. While the data is found in the
        page cache, a sample of the chunk's pages is checked here first (a few microseconds;
        one chunk in :data:`WARM_STRIDE` once :data:`WARM_STREAK` in a row were resident, in a
        call that met no cold chunk) and a resident chunk costs nothing more; once pages are
        missing, every chunk goes to the thread, which asks for exactly the missing pages."""
        if not self.cold:
            if (
                self._warm >= WARM_STREAK
                and self._unchecked < WARM_STRIDE - 1
                and not self._met_cold
            ):
                self._unchecked += 1
                return
            self._unchecked = 0
            index = self.plan.index(k)
            if not any(leaf.missing(index) for leaf in self.leaves):
                self._warm += 1
                return
            self.cold = self._met_cold = True
        _READER.submit(self, k)

    def close(self) -> None:
        """Stop reading ahead: requests not served yet are dropped."""
        self.closed = True

    def pages(self, k: int) -> list[np.ndarray]:
        """``[[first page, end page), ...]`` of chunk ``k`` in each leaf's mapping."""
        index = self.plan.index(k)
        return [leaf.runs(index) for leaf in self.leaves]

    def read(self, k: int) -> int:
        """Ask for chunk ``k``'s pages that are not resident; returns the pages asked for."""
        asked = 0
        for leaf, runs in zip(self.leaves, self.pages(k)):
            if self.closed:
                break
            asked += _read_missing(leaf.addr, runs)
        self._resident_streak = 0 if asked else self._resident_streak + 1
        if self._resident_streak >= WARM_AGAIN:  # the data is in the page cache again
            self.cold, self._resident_streak = False, 0
        return asked


class _Reader:
    """The thread that makes the requests of every :class:`ReadAhead` of this process (started
    on first use; a forked child starts its own)."""

    def __init__(self) -> None:
        self._pid = -1
        self._requests: queue.SimpleQueue[tuple[ReadAhead, int]] = queue.SimpleQueue()

    def submit(self, ahead: ReadAhead, k: int) -> None:
        if self._pid != os.getpid():  # first use, or inherited through fork: no thread runs
            self._pid = os.getpid()
            self._requests = queue.SimpleQueue()
            threading.Thread(target=self._serve, name="td-readahead", daemon=True).start()
        self._requests.put((ahead, k))

    def _serve(self) -> None:
        requests = self._requests
        while True:
            ahead, k = requests.get()
            if not ahead.closed:
                with contextlib.suppress(Exception):  # reading ahead is a hint: never an error
                    ahead.read(k)
            del ahead  # the mappings of a finished call are not kept alive here


_READER = _Reader()


def _read_missing(addr: int, runs: np.ndarray) -> int:
    """``MADV_WILLNEED`` on the pages of ``runs`` (in the mapping at ``addr``) not resident;
    returns how many pages were asked for. Memory: a few bytes per page of the runs (residency
    is read window by window, never for the whole span of scattered rows)."""
    missing = _missing_pages(addr, runs)
    if not len(missing):
        return 0
    page = pagecache.PAGE
    breaks = np.flatnonzero(np.diff(missing) != 1) + 1
    firsts = missing[np.r_[0, breaks]].tolist()
    ends = (missing[np.r_[breaks - 1, len(missing) - 1]] + 1).tolist()
    for first, end in zip(firsts, ends):
        for piece in range(first, end, PIECE_PAGES):
            stop = min(piece + PIECE_PAGES, end)
            pagecache.advise(addr + piece * page, (stop - piece) * page, pagecache.WILLNEED)
    return len(missing)


#: pages whose residency one ``mincore`` call reads (a 16 KiB vector)
_WINDOW = 1 << 14


def _missing_pages(addr: int, runs: np.ndarray) -> np.ndarray:
    """The pages of ``runs`` that are not resident, sorted."""
    page = pagecache.PAGE
    lengths = runs[:, 1] - runs[:, 0]
    if len(runs) == 1:
        pages = np.arange(runs[0, 0], runs[0, 1], dtype=np.int64)
    elif (lengths == 1).all():
        pages = runs[:, 0]
    else:  # every page of every run
        starts = np.repeat(runs[:, 0] - np.cumsum(lengths) + lengths, lengths)
        pages = starts + np.arange(int(lengths.sum()), dtype=np.int64)
    windows = pages // _WINDOW
    cuts = np.flatnonzero(np.diff(windows)) + 1
    missing = []
    for group in np.split(pages, cuts):
        base = int(group[0]) // _WINDOW * _WINDOW
        span = int(group[-1]) - base + 1
        vec = pagecache.residency(addr + base * page, span * page)
        if vec is None:  # unknown: nothing is asked for
            continue
        missing.append(group[vec[group - base] == 0])
    return np.concatenate(missing) if missing else pages[:0]


#: mappings this process advised ``MADV_RANDOM`` (address -> length), to undo for a later call
_ADVISED: dict[int, int] = {}


def advise_access(source: Any, scattered: bool) -> None:
    """In a worker, before a call's chunks: how its faults should read the source's files.

    ``scattered`` (the parent reads each chunk's scattered rows ahead): ``MADV_RANDOM`` on every
    file-backed leaf's mapping, so that a fault reads its own page and not the read-around
    window (up to the device's read-ahead size, 128 KiB-8 MiB, around each row: mostly pages
    no chunk asked for). Otherwise, mappings an earlier call advised so go back to
    ``MADV_NORMAL`` (a persistent worker keeps its mappings from call to call).
    """
    if not scattered and not _ADVISED:
        return
    wanted: dict[int, int] = {}
    if scattered:
        if getattr(type(source), "_is_tensorclass", False):
            source = source._tensordict
        if isinstance(source, TensorDict):
            for value in source.values(include_nested=True, leaves_only=True):
                if value.__class__ is MemoryMappedTensor and value.filename:
                    addr, nbytes = pagecache.mapping(value)
                    wanted[addr] = nbytes
    for addr, nbytes in list(_ADVISED.items()):
        if wanted.get(addr) != nbytes:
            pagecache.advise(addr, nbytes, pagecache.NORMAL)
            del _ADVISED[addr]
    for addr, nbytes in wanted.items():
        if addr not in _ADVISED and pagecache.advise(addr, nbytes, pagecache.RANDOM):
            _ADVISED[addr] = nbytes
