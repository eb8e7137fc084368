"""Memory-mapped I/O: write and load throughput of a 1 GiB tensordict (8 float32 leaves) against
``numpy.save`` / ``numpy.load(mmap_mode="r")`` of the same arrays, and the pickle size and time of
a 16,384-row slice (what ``map_iter`` sends to a worker per chunk).

Run: ``python -m benchmarks.memmap_io`` (writes a few GiB to a temporary directory; run it once).

What is measured, per repeat (median, min and max are reported):

- write: ``td.memmap(prefix)`` (also with ``num_threads=2``) vs one ``np.save`` per leaf. Buffered
  writes (no fsync), so the page cache absorbs them as it does for numpy;
- open: ``TensorDict.load_memmap(prefix)`` vs one ``np.load(mmap_mode="r")`` per leaf. Both map
  lazily, so this is the fixed cost only;
- load: open, then read every byte once (a numpy ``sum`` of each leaf, the same kernel for both, so
  that the lazy mapping is paid for). Warm page cache: the files were just written;
- pickle: ``pickle.dumps`` / ``cloudpickle.dumps`` of ``td[16384:32768]`` (size in bytes, time in
  microseconds) and the round trip.
"""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from benchmarks.timing import per_call_us
from tensordict import TensorDict

LEAVES = 8
COLS = 256
CHUNK = 16_384


def make_tensordict(total_bytes: int) -> TensorDict:
    rows = total_bytes // (LEAVES * COLS * 4)
    gen = torch.Generator().manual_seed(0)
    source = {f"leaf{i}": torch.rand(rows, COLS, generator=gen) for i in range(LEAVES)}
    return TensorDict(source, batch_size=[rows])


def _stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _read_all(arrays: list[np.ndarray]) -> float:
    return float(sum(float(a.sum()) for a in arrays))


def _forget_mappings() -> None:
    # The per-process mapping cache still holds the files this process just wrote; empty it so
    # that opening pays what a fresh process (a worker) pays, as numpy does.
    from tensordict.memmap import mapping

    mapping._cache.clear()


def _one_round(td: TensorDict, root: str) -> dict[str, float]:
    """One repeat of every I/O measurement (seconds)."""
    out: dict[str, float] = {}
    td_dir, td2_dir, np_dir = (os.path.join(root, n) for n in ("td", "td_threads", "np"))
    arrays = {k: v.numpy() for k, v in td.items()}

    out["write td"], _ = _timed(lambda: td.memmap(td_dir))
    out["write td (num_threads=2)"], _ = _timed(lambda: td.memmap(td2_dir, num_threads=2))

    def np_write() -> None:
        os.makedirs(np_dir, exist_ok=True)
        for k, a in arrays.items():
            np.save(os.path.join(np_dir, k + ".npy"), a)

    out["write numpy"], _ = _timed(np_write)

    def np_open() -> list[np.ndarray]:
        return [np.load(os.path.join(np_dir, k + ".npy"), mmap_mode="r") for k in arrays]

    _forget_mappings()
    out["open td"], _ = _timed(lambda: TensorDict.load_memmap(td_dir))
    out["open numpy"], _ = _timed(np_open)

    def td_load() -> float:
        loaded = TensorDict.load_memmap(td2_dir)  # a directory not opened yet in this round
        return _read_all([v.as_subclass(torch.Tensor).numpy() for v in loaded.values()])

    _forget_mappings()
    out["load td"], total_td = _timed(td_load)
    out["load numpy"], total_np = _timed(lambda: _read_all(np_open()))
    if not np.isclose(total_td, total_np):
        raise AssertionError(f"the two formats read different data: {total_td} != {total_np}")
    for d in (td_dir, td2_dir, np_dir):
        shutil.rmtree(d)
    return out


def _pickle_stats(td: TensorDict, root: str) -> dict[str, dict[str, float]]:
    import cloudpickle

    mm = td.memmap(os.path.join(root, "pickle"))
    chunk = mm[CHUNK : 2 * CHUNK]
    results: dict[str, dict[str, float]] = {}
    for name, dumps in (("pickle", pickle.dumps), ("cloudpickle", cloudpickle.dumps)):
        payload = dumps(chunk)
        dump_us = per_call_us(functools.partial(dumps, chunk))
        load_us = per_call_us(functools.partial(pickle.loads, payload))
        stats: dict[str, float] = {"bytes": float(len(payload))}
        stats.update({f"dumps_{k}": v for k, v in dump_us.items()})
        stats.update({f"loads_{k}": v for k, v in load_us.items()})
        results[name] = stats
    return results


def run(repeat: int = 3, total_bytes: int = 1 << 30, directory: str | None = None) -> dict:
    """Measure everything; returns ``{"io": {name: stats}, "ratios": ..., "pickle": ...}``.

    Throughputs are in GB/s (10^9 bytes per second) of the tensordict's payload.
    """
    td = make_tensordict(total_bytes)
    nbytes = sum(v.numel() * v.element_size() for v in td.values())
    root = tempfile.mkdtemp(prefix="memmap_io_", dir=directory)
    try:
        rounds = [_one_round(td, root) for _ in range(repeat)]
        io: dict[str, dict[str, float]] = {}
        for name in rounds[0]:
            seconds = [r[name] for r in rounds]
            entry = {f"s_{k}": v for k, v in _stats(seconds).items()}
            if not name.startswith("open"):
                # GB/s: the median time gives the median rate; min time gives max rate
                entry["gbps_median"] = nbytes / entry["s_median"] / 1e9
                entry["gbps_min"] = nbytes / entry["s_max"] / 1e9
                entry["gbps_max"] = nbytes / entry["s_min"] / 1e9
            io[name] = entry
        ratios = {
            "write td / numpy (time)": io["write td"]["s_median"] / io["write numpy"]["s_median"],
            "write td threads / numpy (time)": io["write td (num_threads=2)"]["s_median"]
            / io["write numpy"]["s_median"],
            "open td / numpy (time)": io["open td"]["s_median"] / io["open numpy"]["s_median"],
            "load td / numpy (time)": io["load td"]["s_median"] / io["load numpy"]["s_median"],
        }
        pickles = _pickle_stats(td, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "bytes": nbytes,
        "leaves": LEAVES,
        "repeat": repeat,
        "io": io,
        "ratios": ratios,
        "pickle": pickles,
    }


def main() -> None:
    results = run()
    gib = results["bytes"] / (1 << 30)
    print(f"{gib:.2f} GiB tensordict, {results['leaves']} float32 leaves, {results['repeat']} runs")
    print(f"{'operation':28s} {'median s':>9s} {'min s':>8s} {'max s':>8s} {'GB/s':>7s}")
    for name, s in results["io"].items():
        rate = f"{s['gbps_median']:7.2f}" if "gbps_median" in s else f"{'-':>7s}"
        print(f"{name:28s} {s['s_median']:9.4f} {s['s_min']:8.4f} {s['s_max']:8.4f} {rate}")
    print()
    for name, ratio in results["ratios"].items():
        print(f"{name:34s} {ratio:6.2f}")
    print()
    print(
        f"{'td[16384:32768]':14s} {'bytes':>6s} {'dumps µs':>9s} {'(min-max)':>16s} "
        f"{'loads µs':>9s}"
    )
    for name, s in results["pickle"].items():
        span = f"{s['dumps_min']:.1f}-{s['dumps_max']:.1f}"
        print(
            f"{name:14s} {int(s['bytes']):6d} {s['dumps_median']:9.1f} {span:>16s} "
            f"{s['loads_median']:9.1f}"
        )


if __name__ == "__main__":
    main()
