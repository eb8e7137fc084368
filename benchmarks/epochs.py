"""Shuffled epochs over a memory-mapped tensordict: persistent workers vs a pool per epoch.

Run: ``python -m benchmarks.epochs`` (or through ``python -m benchmarks.run``).

Setting (issue [perf-2]): 2 workers, a 64 MiB memory-mapped TensorDict of 1 KiB rows, shuffled
epochs of 1,024-row chunks, each chunk reduced (``reduce_chunk``), 20 epochs. Contenders, run in
turn ``repeat`` times, each sample is the mean epoch time of its ``epochs`` epochs, including
starting its workers (as a user's training run does):

- ``persistent pool``: ``with WorkerPool(2) as pool: td.map_iter(fn, pool=pool, shuffle=True)``;
- ``fresh pool per epoch``: ``td.map_iter(fn, num_workers=2, shuffle=True)`` every epoch;
- ``DataLoader persistent``: ``DataLoader(persistent_workers=True, num_workers=2)`` whose items are
  the same shuffled 1,024-row chunks (``BatchSampler(RandomSampler)``, ``fn(td[indices])``).

Targets: persistent pool <= 0.6x the fresh pool per epoch, and <= DataLoader persistent.

Steady-state epochs (issue [perf-3], :func:`steady`; ``python -m benchmarks.run --only steady``):
sequential epochs on workers started once, each contender started before its timed epochs and
given one untimed epoch first (workers started, pages mapped). Workloads: ``reduce`` over 2 GiB
of the map_iter suite's dataset in the page cache, 16,384-row chunks (64 KiB results), and
``pyrows`` (pure Python per row, ``workloads.pyrows_chunk``) over 131,072 rows in 4,096-row
chunks. Contenders, in turn ``repeat`` times, each sample the mean of ``epochs`` epochs:

- ``loop``: ``fn`` on every chunk in this process, one torch thread;
- ``WorkerPool``: ``td.map_iter(fn, chunksize=cs, pool=pool)`` on one ``WorkerPool(2)``;
- ``persistent limit``: two processes forked once, each running ``fn`` over alternate chunks
  when signalled (one byte through a pipe per epoch), nothing sent back but an end marker when
  done: the limit of two persistent processes on the machine of the run;
- ``persistent limit + send``: the same, each result also sent back as it comes (pickled,
  one length-prefixed message per result through the pipe) and unpickled here: what
  returning every result costs without an engine;
- ``persistent limit + shm x4``: the same, each result copied into a slot of a ring the process
  shares with this one, a 4-byte count through the pipe every 4 results (one wake-up of this
  process per 4), each result copied out here into a new ``TensorDict``: the floor of returning
  the results at all (:class:`ShmBatchEpochs`);
- ``persistent limit + shm x16 in place``: the same as the engine returns results, a count every
  16 results (``held.HOLD_MAX``: the engine's held answers) and each result a view of its slot
  in a new ``TensorDict``, not a copy (:class:`ShmInPlaceEpochs`).

Each sample also records the CPU time per chunk of this process (``time.process_time``) and of
the workers (``/proc/PID/schedstat``): figures the load of a shared machine moves much less
than wall times. Target: WorkerPool >= 0.95x the persistent limit on both workloads.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import selectors
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from benchmarks.data import ROW_BYTES, dataset, warm
from benchmarks.map_iter import Row, _drain, _row
from benchmarks.timing import interleaved, pair_ratios, summary
from benchmarks.workloads import (
    IndexDataset,
    _receive_all,
    end_results,
    no_collate,
    plain_loop,
    pyrows_chunk,
    reduce_chunk,
    send_result,
)
from tensordict import TensorDict
from tensordict.parallel import WorkerPool
from tensordict.parallel.held import HOLD_MAX
from tensordict.parallel.reaper import wait_reaped
from tensordict.sizes import format_bytes

WORKERS = 2
CHUNK = 1024
MIB = 1 << 20


def _persistent(td: TensorDict, epochs: int) -> Callable[[], int]:
    def run() -> int:
        with WorkerPool(WORKERS, generator=torch.Generator()) as pool:
            return sum(
                _drain(td.map_iter(reduce_chunk, chunksize=CHUNK, shuffle=True, pool=pool))
                for _ in range(epochs)
            )

    return run


def _fresh(td: TensorDict, epochs: int) -> Callable[[], int]:
    kw = {"num_workers": WORKERS, "chunksize": CHUNK, "shuffle": True}
    return lambda: sum(
        _drain(td.map_iter(reduce_chunk, generator=torch.Generator(), **kw)) for _ in range(epochs)
    )


def _dataloader(td: TensorDict, epochs: int) -> Callable[[], int]:
    def run() -> int:
        sampler = BatchSampler(RandomSampler(range(td.batch_size[0])), CHUNK, drop_last=False)
        loader = DataLoader(
            IndexDataset(td, reduce_chunk),
            sampler=sampler,
            batch_size=None,
            num_workers=WORKERS,
            persistent_workers=True,
            collate_fn=no_collate,
        )
        try:
            return sum(_drain(iter(loader)) for _ in range(epochs))
        finally:
            del loader  # stops its persistent workers

    return run


def run(size: int = 64 * MIB, epochs: int = 20, repeat: int = 3) -> dict[str, Any]:
    """Mean epoch seconds of each contender; ``{"rows": [...], "setting": {...}}``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        td, _ = dataset(size)
        td = td[: size // ROW_BYTES]
        contenders = {
            "persistent pool": _persistent(td, epochs),
            "fresh pool per epoch": _fresh(td, epochs),
            "DataLoader persistent": _dataloader(td, epochs),
        }
        samples = interleaved(contenders, repeat=repeat)
    finally:
        torch.set_num_threads(threads)
    label = f"epochs {format_bytes(size)} shuffled x {CHUNK:,} rows, {epochs} epochs"
    ours = samples["persistent pool"]
    rows: list[Row] = []
    for name, seconds in samples.items():
        ratios = {}
        if name == "persistent pool":
            ratios = {
                "fresh pool": pair_ratios(ours, samples["fresh pool per epoch"]),
                "DataLoader": pair_ratios(ours, samples["DataLoader persistent"]),
            }
        reference = ""
        if name == "persistent pool":
            reference = "target <= 0.6x fresh pool, <= DataLoader persistent (ratios: time)"
        per_epoch = [s / epochs for s in seconds]
        rows.append(_row(f"{label}: {name} (mean epoch)", per_epoch, "s", reference, ratios=ratios))
    setting = {"bytes": size, "chunk_rows": CHUNK, "epochs": epochs, "workers": WORKERS}
    return {"setting": setting, "rows": rows}


# ---------------------------------------------------------------------- steady-state epochs
GIB = 1 << 30
#: workload -> (fn, bytes of the dataset it reads, rows per chunk, unit of its rate)
STEADY: dict[str, tuple[Callable[[TensorDict], Any], int, int, str]] = {
    "reduce": (reduce_chunk, 2 * GIB, 16_384, "GB/s"),
    "pyrows": (pyrows_chunk, 131_072 * ROW_BYTES, 4096, "rows/s"),
}


def cpu_seconds(pid: int) -> float:
    """Seconds process ``pid`` has run on a CPU (``/proc/PID/schedstat``, nanoseconds; 0.0 when
    unavailable)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class Steady:
    """A contender of the steady-state epochs: started once, then run epoch by epoch."""

    def __init__(self, td: TensorDict, fn: Callable[[TensorDict], Any], chunksize: int) -> None:
        self.td, self.fn, self.chunksize = td, fn, chunksize

    def start(self) -> None:
        """Start the workers (not timed)."""

    def epoch(self) -> None:
        raise NotImplementedError

    def pids(self) -> list[int]:
        """The worker processes, whose CPU time is counted."""
        return []

    def close(self) -> None:
        """Stop the workers (not timed)."""


class LoopEpochs(Steady):
    def epoch(self) -> None:
        plain_loop(self.td, self.fn, self.chunksize)


class PoolEpochs(Steady):
    """``map_iter(fn, pool=pool)`` on one :class:`WorkerPool`."""

    pool: WorkerPool

    def start(self) -> None:
        self.pool = WorkerPool(WORKERS, generator=torch.Generator())

    def epoch(self) -> None:
        _drain(self.td.map_iter(self.fn, chunksize=self.chunksize, pool=self.pool))

    def pids(self) -> list[int]:
        return [w.process.pid for w in self.pool._pool.workers.values()]

    def close(self) -> None:
        self.pool.close()


class BareEpochs(Steady):
    """The persistent limit: processes forked once that run ``fn`` over alternate chunks each
    time they read a byte from their pipe, and write one byte back when done (``send``: they
    also send each result back, pickled, and this process unpickles it)."""

    send = False

    def start(self) -> None:
        n = self.td.batch_size[0]
        starts = list(range(0, n, self.chunksize))
        self.children: list[tuple[int, int, int]] = []  # (pid, go write end, done read end)
        for wid in range(WORKERS):
            go_r, go_w = os.pipe()
            done_r, done_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                code = 1
                try:
                    for _, other_go, other_done in self.children:  # the siblings' ends
                        os.close(other_go)
                        os.close(other_done)
                    os.close(go_w)
                    os.close(done_r)
                    torch.set_num_threads(1)
                    out = os.fdopen(done_w, "wb", buffering=1 << 16)
                    while os.read(go_r, 1):  # end of file: the parent closed the pipe
                        for s in starts[wid::WORKERS]:
                            result = self.fn(self.td[s : s + self.chunksize])
                            if self.send:
                                send_result(out, result)
                        end_results(out)
                    code = 0
                finally:
                    os._exit(code)
            os.close(go_r)
            os.close(done_w)
            self.children.append((pid, go_w, done_r))

    def epoch(self) -> None:
        for _, go, _ in self.children:
            os.write(go, b"g")
        received = _receive_all([done for _, _, done in self.children], close=False)
        if received != (self.chunks if self.send else 0):
            raise RuntimeError(f"the persistent processes sent {received} results")

    @property
    def chunks(self) -> int:
        return -(-self.td.batch_size[0] // self.chunksize)

    def pids(self) -> list[int]:
        return [pid for pid, _, _ in self.children]

    def close(self) -> None:
        for pid, go, done in self.children:
            os.close(go)
            os.close(done)
            os.waitpid(pid, 0)


class SendingEpochs(BareEpochs):
    send = True


class ShmEpochs(BareEpochs):
    """A bare variant that returns every result through shared memory: each process copies a
    result's bytes into its own slot of a ring it shares with this process (one slot per chunk
    of an epoch, so none is overwritten before it is read) and writes a 4-byte count to its pipe
    every :attr:`batch` results (and at the end of the epoch); this process copies each result
    out of its slot into a new tensor and wraps it in a ``TensorDict``. ``batch = 1``: a
    notification, so a wake-up of this process, per result; more: one per ``batch`` results."""

    batch = 1

    def start(self) -> None:
        n = self.td.batch_size[0]
        starts = list(range(0, n, self.chunksize))
        # a result's shape per chunk: the last chunk may be shorter (a dataset that is not a
        # whole number of chunks), and so may its result
        full = self.fn(self.td[: self.chunksize])["y"]
        tail = self.fn(self.td[starts[-1] :])["y"]
        self.leaf_dtype = full.dtype
        self.shapes = [tuple(full.shape)] * (len(starts) - 1) + [tuple(tail.shape)]
        self.slot = -(-max(full.nbytes, tail.nbytes) // 4096) * 4096
        per_worker = -(-self.chunks // WORKERS)
        self.rings = [mmap.mmap(-1, per_worker * self.slot) for _ in range(WORKERS)]
        self.children = []
        for wid in range(WORKERS):
            go_r, go_w = os.pipe()
            done_r, done_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                code = 1
                try:
                    for _, other_go, other_done in self.children:
                        os.close(other_go)
                        os.close(other_done)
                    os.close(go_w)
                    os.close(done_r)
                    torch.set_num_threads(1)
                    ring = np.frombuffer(self.rings[wid], dtype=np.uint8)
                    while os.read(go_r, 1):
                        sent = 0
                        for i, s in enumerate(starts[wid::WORKERS]):
                            result = self.fn(self.td[s : s + self.chunksize])
                            at = i * self.slot
                            leaf = result["y"].reshape(-1).numpy().view(np.uint8)
                            ring[at : at + leaf.size] = leaf
                            if (i + 1) % self.batch == 0:
                                os.write(done_w, _COUNT.pack(i + 1))
                                sent = i + 1
                        count = len(starts[wid::WORKERS])
                        if sent != count:
                            os.write(done_w, _COUNT.pack(count))
                        os.write(done_w, _COUNT.pack(_END))
                    code = 0
                finally:
                    os._exit(code)
            os.close(go_r)
            os.close(done_w)
            self.children.append((pid, go_w, done_r))

    def epoch(self) -> None:
        for _, go, _ in self.children:
            os.write(go, b"g")
        rings = {done: self._ring(i) for i, (_, _, done) in enumerate(self.children)}
        worker_of = {done: wid for wid, (_, _, done) in enumerate(self.children)}
        got = dict.fromkeys(rings, 0)
        received = 0
        with selectors.DefaultSelector() as selector:
            for done in rings:
                selector.register(done, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select():
                    fd = key.fd
                    data = os.read(fd, 4096)
                    if not data:  # the process died (its error went to stderr)
                        raise RuntimeError("a persistent benchmark process exited mid-epoch")
                    for (count,) in _COUNT.iter_unpack(data):
                        if count == _END:
                            selector.unregister(fd)
                            continue
                        ring = rings[fd]
                        for i in range(got[fd], count):
                            shape = self.shapes[worker_of[fd] + i * WORKERS]
                            out = self._result(ring, i * self.slot, shape)
                            TensorDict({"y": out}, batch_size=shape[:1])
                            received += 1
                        got[fd] = count
        if received != self.chunks:
            raise RuntimeError(f"the persistent processes returned {received} results")

    def _ring(self, wid: int) -> Any:
        """Worker ``wid``'s ring as this process reads it (bytes)."""
        return np.frombuffer(self.rings[wid], dtype=np.uint8)

    def _result(self, ring: Any, at: int, shape: tuple[int, ...]) -> torch.Tensor:
        """The result at byte ``at`` of ``ring``: copied out into a new tensor."""
        out = torch.empty(shape, dtype=self.leaf_dtype)
        flat = out.view(-1).numpy().view(np.uint8)
        flat[:] = ring[at : at + flat.size]
        return out

    def close(self) -> None:
        super().close()
        for ring in self.rings:
            with contextlib.suppress(BufferError):  # still viewed (an error's traceback): GC'd
                ring.close()


class ShmBatchEpochs(ShmEpochs):
    batch = 4


class ShmInPlaceEpochs(ShmEpochs):
    """The shared-memory floor as the engine returns results: a count every
    :data:`~tensordict.parallel.held.HOLD_MAX` results (one wake-up of this process per batch
    of held answers), and each result a view of its slot, not a copy (as the engine builds a
    result on its segment). A slot is overwritten the next epoch: the results are dropped as
    they come, as the benchmark's consumer does."""

    batch = HOLD_MAX

    def _ring(self, wid: int) -> Any:
        return torch.frombuffer(self.rings[wid], dtype=torch.uint8)

    def _result(self, ring: Any, at: int, shape: tuple[int, ...]) -> torch.Tensor:
        nbytes = math.prod(shape) * self.leaf_dtype.itemsize
        return ring[at : at + nbytes].view(self.leaf_dtype).view(shape)


_COUNT = struct.Struct("<I")
_END = 0xFFFFFFFF

#: a bare variant not in the suite's run (a wake-up of this process per result), for probes
STEADY_VARIANTS: dict[str, type[Steady]] = {
    "persistent limit + shm": ShmEpochs,
}

SHM_X4 = "persistent limit + shm x4"
SHM_IN_PLACE = "persistent limit + shm x16 in place"
#: the prefix of a ratio taken by CPU time (parent and workers) instead of wall time
CPU_RATIO = "by CPU:"

STEADY_CONTENDERS: dict[str, type[Steady]] = {
    "loop": LoopEpochs,
    "WorkerPool": PoolEpochs,
    "persistent limit": BareEpochs,
    "persistent limit + send": SendingEpochs,
    "persistent limit + shm x4": ShmBatchEpochs,
    SHM_IN_PLACE: ShmInPlaceEpochs,
}


def steady_sample(contender: Steady, epochs: int) -> dict[str, float]:
    """Start ``contender``, run one untimed epoch, then time ``epochs`` epochs: seconds per epoch
    and CPU seconds per epoch of this process and of the workers."""
    contender.start()
    try:
        contender.epoch()
        pids = contender.pids()
        workers = sum(cpu_seconds(pid) for pid in pids)
        parent = time.process_time()
        t0 = time.perf_counter()
        for _ in range(epochs):
            contender.epoch()
        wall = time.perf_counter() - t0
        parent = time.process_time() - parent
        workers = sum(cpu_seconds(pid) for pid in pids) - workers
    finally:
        contender.close()
        wait_reaped()
    return {"seconds": wall / epochs, "parent": parent / epochs, "workers": workers / epochs}


def steady_source(name: str, scale: float = 1.0) -> TensorDict:
    """The dataset of steady workload ``name`` (``STEADY``), in the page cache: the first rows of
    the map_iter suite's dataset (``scale`` shrinks it, to at least 4 chunks)."""
    _, nbytes, chunksize, _ = STEADY[name]
    nbytes = max(4 * chunksize * ROW_BYTES, int(nbytes * scale))
    source, _ = dataset(max(nbytes, 4 * GIB if scale == 1.0 else nbytes), read=False)
    td = source[: nbytes // ROW_BYTES]
    warm(td)
    return td


def steady(
    names: list[str] | None = None,
    *,
    epochs: int | None = None,
    repeat: int = 5,
    scale: float = 1.0,
) -> dict[str, Any]:
    """Steady-state epochs of each workload (``STEADY``); ``{"rows": [...], "setting": ...}``.

    ``scale`` shrinks every dataset (``--quick``); ``epochs`` defaults to about one second of
    epochs per sample for two processes.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows: list[Row] = []
    setting: dict[str, Any] = {"workers": WORKERS, "repeat": repeat}
    try:
        for name in names or list(STEADY):
            fn, _, chunksize, unit = STEADY[name]
            td = steady_source(name, scale)
            n = td.batch_size[0]
            count = epochs or (10 if name == "reduce" else 3)
            samples: dict[str, list[dict[str, float]]] = {c: [] for c in STEADY_CONTENDERS}
            for _ in range(repeat):
                for contender, cls in STEADY_CONTENDERS.items():
                    samples[contender].append(steady_sample(cls(td, fn, chunksize), count))
            chunks = -(-n // chunksize)
            amount = n * ROW_BYTES / 1e9 if unit == "GB/s" else n
            label = f"steady {name} {format_bytes(n * ROW_BYTES)} x {chunksize:,} rows"
            rows += _steady_rows(label, samples, amount, unit, chunks)
            setting[name] = {"rows": n, "chunk_rows": chunksize, "epochs": count}
    finally:
        torch.set_num_threads(threads)
    return {"setting": setting, "rows": rows}


def _steady_rows(
    label: str,
    samples: dict[str, list[dict[str, float]]],
    amount: float,
    unit: str,
    chunks: int,
) -> list[Row]:
    seconds = {c: [s["seconds"] for s in runs] for c, runs in samples.items()}
    #: CPU seconds per epoch of this process and the workers together, round by round
    total_cpu = {c: [s["parent"] + s["workers"] for s in runs] for c, runs in samples.items()}
    rows = []
    for contender, runs in samples.items():
        ratios = {}
        for ref in ("loop", "persistent limit", "persistent limit + send", SHM_X4, SHM_IN_PLACE):
            if contender != ref and (ref == "loop" or contender == "WorkerPool"):
                ratios[ref] = pair_ratios(seconds[ref], seconds[contender])
        if contender in ("persistent limit + send", SHM_X4, SHM_IN_PLACE):
            ratios["persistent limit"] = pair_ratios(
                seconds["persistent limit"], seconds[contender]
            )
        if contender in ("WorkerPool", "persistent limit + send", SHM_X4, SHM_IN_PLACE):
            # the same work by CPU time: what the engine costs, whatever else the machine
            # ran during the round (wall ratios of one round swing with the load)
            ratios[f"{CPU_RATIO} persistent limit"] = pair_ratios(
                total_cpu["persistent limit"], total_cpu[contender]
            )
        reference = "target >= 0.95x persistent limit" if contender == "WorkerPool" else ""
        cpu = {
            f"cpu_{who}_us_per_chunk": summary([1e6 * s[who] / chunks for s in runs])
            for who in ("parent", "workers")
        }
        rows.append(
            _row(
                f"{label}: {contender}",
                [amount / s for s in seconds[contender]],
                unit,
                reference,
                ratios=ratios,
                **cpu,
            )
        )
    return rows


def main() -> None:
    from benchmarks.report import format_rows

    print(format_rows(run()["rows"]))


if __name__ == "__main__":
    main()
