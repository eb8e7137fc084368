"""Where the workers of the steady-state epochs wait: when ``fn`` starts and ends, per worker.

Run: ``python -m benchmarks.stalls [--rounds R] [--epochs E] [--workload reduce|pyrows]``.

Wall and CPU ratios say how far a ``WorkerPool`` is from the persistent limit (see
``benchmarks.epochs``), not where the time goes. This probe runs the same contenders (started
once, ``R`` rounds of ``E`` epochs each, in turn) with ``fn`` wrapped to write the
``perf_counter`` time at which each of its calls starts and ends into memory shared with this
process, and prints per contender (medians over the epochs):

- ``wall``: milliseconds per epoch;
- ``start``: from the start of the epoch to a worker's first ``fn`` (its job, first tasks);
- ``gaps``: milliseconds per worker and epoch between the end of one ``fn`` and the start of the
  next (cutting, encoding, sending, waiting for work), and the gaps' percentiles in microseconds;
- ``longest``: a worker's longest gap in the epoch (a worker left without work shows here);
- ``tail``: from a worker's last ``fn`` to the end of the epoch;
- ``spread``: between the workers' last ``fn`` ends (a core idle while the other finishes).

Contenders: the ``WorkerPool``, the persistent limit, and the in-place floor (the limit that
also returns each result as the engine does, ``epochs.ShmInPlaceEpochs``).

A worker that waits for the window to move, or for its job, shows as long gaps that the limit
(which never waits) does not have. The times are those of one clock (``CLOCK_MONOTONIC``) read in
every process.
"""

from __future__ import annotations

import argparse
import mmap
import os
import time
from typing import Any

import numpy as np
import torch

from benchmarks import epochs
from tensordict import TensorDict
from tensordict.parallel.reaper import wait_reaped

#: fn calls recorded per worker and epoch, at most
MAX_CALLS = 4096
CONTENDERS: dict[str, type[epochs.Steady]] = {
    "WorkerPool": epochs.PoolEpochs,
    "persistent limit": epochs.BareEpochs,
    "in-place floor": epochs.ShmInPlaceEpochs,
}

# Shared with the workers (forked from this process after the import): the pids whose calls are
# recorded, their call counts, and each call's start and end (nanoseconds).
_SHARED = mmap.mmap(-1, 8 * (2 * epochs.WORKERS + epochs.WORKERS * MAX_CALLS * 2))
_PIDS = np.frombuffer(_SHARED, dtype=np.int64, count=epochs.WORKERS)
_COUNTS = np.frombuffer(_SHARED, dtype=np.int64, count=epochs.WORKERS, offset=8 * epochs.WORKERS)
_CALLS = np.frombuffer(
    _SHARED, dtype=np.int64, offset=16 * epochs.WORKERS, count=epochs.WORKERS * MAX_CALLS * 2
).reshape(epochs.WORKERS, MAX_CALLS, 2)
_WRAPPED: dict[str, Any] = {}
_slot = -1


def timed(td: TensorDict) -> Any:
    """The workload's ``fn`` (``_WRAPPED["fn"]``), its start and end recorded for a registered
    worker."""
    global _slot
    start = time.perf_counter_ns()
    result = _WRAPPED["fn"](td)
    end = time.perf_counter_ns()
    if _slot < 0:  # found once registered (the pool's workers start on its first epoch)
        found = np.flatnonzero(os.getpid() == _PIDS)
        if not len(found):
            return result
        _slot = int(found[0])
    i = int(_COUNTS[_slot])
    if i < MAX_CALLS:
        _CALLS[_slot, i] = (start, end)
        _COUNTS[_slot] = i + 1
    return result


def epoch_figures(began: int, ended: int) -> dict[str, Any]:
    """The figures of one epoch from the recorded calls (``began``/``ended``: its bounds, ns)."""
    figures: dict[str, Any] = {"wall": (ended - began) / 1e6, "start": [], "gaps": [], "tail": []}
    figures["longest"], figures["each_gap"], figures["calls"] = [], [], []
    for slot in range(epochs.WORKERS):
        calls = _CALLS[slot, : int(_COUNTS[slot])]
        if not len(calls):
            continue
        gaps = (calls[1:, 0] - calls[:-1, 1]) / 1e3  # microseconds
        figures["start"].append((calls[0, 0] - began) / 1e6)
        figures["tail"].append((ended - calls[-1, 1]) / 1e6)
        figures["gaps"].append(gaps.sum() / 1e3)
        figures["longest"].append(gaps.max() / 1e3 if len(gaps) else 0.0)
        figures["each_gap"].extend(gaps.tolist())
        figures["calls"].append(len(calls))
    tails = figures["tail"]
    figures["spread"] = max(tails) - min(tails) if tails else 0.0
    return figures


def measure(workload: str, rounds: int, count: int, scale: float = 1.0) -> dict[str, Any]:
    """Each contender's epochs on ``workload`` (``epochs.STEADY``): their figures, by name."""
    fn, _, chunksize, _ = epochs.STEADY[workload]
    _WRAPPED["fn"] = fn
    td = epochs.steady_source(workload, scale)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    started: dict[str, epochs.Steady] = {}
    pids: dict[str, list[int]] = {}
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
    try:
        for name, cls in CONTENDERS.items():
            started[name] = contender = cls(td, timed, chunksize)
            contender.start()
            contender.epoch()  # workers started (a pool starts them on its first call)
            pids[name] = contender.pids()
        for _ in range(rounds):
            for name, contender in started.items():
                _PIDS[:] = 0
                _PIDS[: len(pids[name])] = pids[name]
                for _ in range(count):
                    _COUNTS[:] = 0
                    began = time.perf_counter_ns()
                    contender.epoch()
                    out[name].append(epoch_figures(began, time.perf_counter_ns()))
    finally:
        for contender in reversed(list(started.values())):
            contender.close()
        wait_reaped()
        torch.set_num_threads(threads)
    return out


def summary(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the epochs (and workers) of one contender's figures."""

    def median(key: str) -> float:
        values = [v for f in figures for v in (f[key] if isinstance(f[key], list) else [f[key]])]
        return float(np.median(values)) if values else float("nan")

    gaps = np.array([g for f in figures for g in f["each_gap"]])
    pct = np.percentile(gaps, [50, 90, 99]).tolist() if len(gaps) else [float("nan")] * 3
    return {
        **{key: median(key) for key in ("wall", "start", "gaps", "longest", "tail", "spread")},
        "gap_us_p50_p90_p99": pct,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stalls", description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--workload", choices=sorted(epochs.STEADY), default="reduce")
    args = parser.parse_args(argv)
    results = measure(args.workload, args.rounds, args.epochs)
    print(f"{args.workload}: {args.rounds} rounds of {args.epochs} epochs; ms unless said")
    for name, figures in results.items():
        s = summary(figures)
        p50, p90, p99 = s["gap_us_p50_p90_p99"]
        print(
            f"{name:18s} wall {s['wall']:7.2f}  start {s['start']:5.2f}  gaps {s['gaps']:6.2f}"
            f" (us: p50 {p50:.0f}, p90 {p90:.0f}, p99 {p99:.0f})  longest {s['longest']:5.2f}"
            f"  tail {s['tail']:5.2f}  spread {s['spread']:5.2f}"
        )


if __name__ == "__main__":
    main()
