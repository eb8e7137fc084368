"""What a chunk costs in CPU time, map_iter against the bare processes: a figure the load of a
shared machine does not move much (wall-clock figures do: the cores are shared).

Run: ``python -m benchmarks.chunk_cost [workload ...] [--rows N] [--rounds R]`` (workloads of
``benchmarks/cpu_bound.py``; default ``tiny decode``).

For each round, each contender runs once and prints the CPU time it used per chunk:

- ``parent``: ``time.process_time()`` of this process over the call (planning, sending,
  waiting, receiving, decoding; forking for the bare processes);
- ``workers``: ``getrusage(RUSAGE_CHILDREN)`` over the call, once its workers are reaped
  (start-up, receiving, ``fn``, encoding, sending, exit);
- ``wake-ups``: context switches of the workers per chunk (each one a block and a wake-up).

The bare processes (``workloads.bare_processes``) run ``fn`` on the same chunks with no engine:
their CPU per chunk is the work itself; the difference is what map_iter adds. ``bare + 1 copy``
(transform only) also copies each result once into a warm buffer: a result that crosses
processes costs at least that copy, so it is the floor map_iter can reach there.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.cpu_bound import WORKERS, WORKLOADS, _source
from benchmarks.map_iter import _drain
from benchmarks.workloads import bare_processes
from tensordict import TensorDict
from tensordict.parallel.reaper import wait_reaped


def _children() -> tuple[float, int]:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw


def cost(run: Callable[[], Any], chunks: int) -> dict[str, float]:
    """CPU microseconds per chunk of one call of ``run`` (parent, workers), and wake-ups."""
    wait_reaped()  # the workers of an earlier call are not charged to this one
    parent, (children, switches) = time.process_time(), _children()
    start = time.perf_counter()
    run()
    wall = time.perf_counter() - start
    parent = time.process_time() - parent
    wait_reaped()
    children_after, switches_after = _children()
    return {
        "parent_us": 1e6 * parent / chunks,
        "workers_us": 1e6 * (children_after - children) / chunks,
        "wakeups": (switches_after - switches) / chunks,
        "wall_s": wall,
    }


#: workloads whose results travel out of band (16 MiB each): they get the ``bare + 1 copy`` row
LARGE_RESULTS = ("transform",)


def contenders(
    td: TensorDict, fn: Callable[[TensorDict], Any], cs: int, floor: bool = False
) -> dict[str, Any]:
    gen = torch.Generator()
    runs = {
        "map_iter": lambda: _drain(
            td.map_iter(fn, num_workers=WORKERS, chunksize=cs, generator=gen)
        ),
        "bare processes": lambda: bare_processes(td, fn, cs),
    }
    if floor:  # the same plus one copy of each result: the floor for results that cross
        runs["bare + 1 copy"] = lambda: bare_processes(td, fn, cs, copy=True)
    return runs


#: the workloads measured when none is named
DEFAULT_WORKLOADS = ["tiny", "decode"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; no workload named means :data:`DEFAULT_WORKLOADS`.

    (argparse checks the list a bare ``nargs="*"`` positional gets, default or ``[]``, against
    ``choices`` as one value: it crashes or rejects it. Names are checked here instead.)
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.chunk_cost", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        help=f"one of {', '.join(WORKLOADS)} (default: {' '.join(DEFAULT_WORKLOADS)})",
    )
    parser.add_argument("--rows", type=int, default=None, help="rows (default: the full run's)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    unknown = [name for name in args.workloads if name not in WORKLOADS]
    if unknown:
        names = ", ".join(WORKLOADS)
        parser.error(f"unknown workload(s) {', '.join(unknown)}: choose from {names}")
    args.workloads = args.workloads or list(DEFAULT_WORKLOADS)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    for name in args.workloads:
        fn, full, cs, kind = WORKLOADS[name]
        rows = args.rows or full
        td = _source(kind, rows)
        chunks = -(-rows // cs)
        print(f"{name}: {rows:,} rows, {chunks:,} chunks of {cs:,}")
        for _ in range(args.rounds):
            for label, run in contenders(td, fn, cs, floor=name in LARGE_RESULTS).items():
                c = cost(run, chunks)
                print(
                    f"  {label:15s} parent {c['parent_us']:9.1f} us/chunk  workers "
                    f"{c['workers_us']:9.1f} us/chunk  wake-ups {c['wakeups']:5.2f}/chunk  "
                    f"(wall {c['wall_s']:.3f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
