"""Peak private memory of map_iter feeding a slow consumer, measured in a fresh process.

``python -m benchmarks.slow_consumer TOTAL PART CHUNKSIZE WORKERS`` runs the transform
(``y = 2 * x``; 16 MiB results with CHUNKSIZE=16384) with WORKERS workers over the first PART
bytes of the cached TOTAL-byte dataset, spending 50 ms on each result, and prints one JSON
line: the process tree's peak private memory (Pss_Anon of the tree plus the growth of
system-wide Shmem, see ``tensordict.procmem``), its two parts, and the baseline before the call
(this process with torch imported), all in MiB.

A fresh process gives every size the same baseline: the benchmark process itself carries
whatever the earlier workloads left in its heap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.data import ROW_BYTES, cached
from benchmarks.workloads import transform_chunk
from tensordict import TensorDict
from tensordict.procmem import MemorySampler, tree_pss_anon

MIB = 1 << 20
#: seconds the consumer spends on each 16 MiB result
CONSUMER_SECONDS = 0.05


def consume_slowly(td: TensorDict, chunksize: int, workers: int) -> int:
    count = 0
    for result in td.map_iter(
        transform_chunk, num_workers=workers, chunksize=chunksize, generator=torch.Generator()
    ):
        y = result["y"]
        deadline = time.perf_counter() + CONSUMER_SECONDS * y.numel() * 4 / (16 * MIB)
        y.sum()  # read the result, then idle for the rest of the time
        time.sleep(max(0.0, deadline - time.perf_counter()))
        count += 1
    return count


def measure(td: TensorDict, chunksize: int, workers: int) -> dict[str, float]:
    baseline = tree_pss_anon() or 0
    with MemorySampler(interval=0.01) as sampler:
        consume_slowly(td, chunksize, workers)
    peak = sampler.peak_sample
    if peak is None:  # no /proc fields here
        return {}
    return {
        "peak_mib": peak.private / MIB,
        "anon_mib": peak.anon / MIB,
        "shmem_growth_mib": peak.shmem_growth / MIB,
        "baseline_mib": baseline / MIB,
        "growth_mib": (peak.private - baseline) / MIB,
    }


def in_fresh_process(total: int, part: int, chunksize: int, workers: int) -> dict[str, Any]:
    """:func:`measure` on ``part`` bytes of the ``total``-byte dataset, in a new interpreter."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    args = [str(a) for a in (total, part, chunksize, workers)]
    command = [sys.executable, "-m", "benchmarks.slow_consumer", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        raise SystemExit(
            f"usage: python -m benchmarks.slow_consumer TOTAL PART CHUNKSIZE WORKERS (bytes, "
            f"bytes, rows, processes), e.g. 4294967296 1073741824 16384 2; got {argv}"
        )
    total, part, chunksize, workers = (int(a) for a in argv)
    torch.set_num_threads(1)
    td = cached(total)[: part // ROW_BYTES]
    print(json.dumps(measure(td, chunksize, workers)))


if __name__ == "__main__":
    main(sys.argv[1:])
