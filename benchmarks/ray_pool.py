"""map_iter through Ray's ``ray.util.multiprocessing.Pool`` vs a stdlib pool vs map_iter's own pool.

Run: ``python -m benchmarks.ray_pool [--size-mib 1024] [--tiny-rows 20000] [--repeat 5]``
(needs ``pip install 'tensordict[ray]'``; starts and stops its own local Ray cluster of 2 CPUs).

Workloads (issue [ray]), 2 workers everywhere, a memory-mapped TensorDict of 1 KiB rows
(``x``: float32 [N, 256]) in the page cache, results consumed and dropped:

- reduce: 1 GiB in 16,384-row chunks, ``fn = td.empty().set("y", td["x"].sum(-1))``;
- tiny: the same ``fn`` with ``chunksize=1`` on 20,000 rows (per-chunk overhead).

Contenders, run in turn within each round (own, stdlib, ray, own, ...), so that a shared machine's
noise falls on all of them alike:

- own pool: ``td.map_iter(fn, num_workers=2, ...)``, which starts (forks) its workers per call;
- stdlib pool: ``map_iter(..., pool=multiprocessing.Pool(2))``, created once (fork) and reused;
- ray pool: ``map_iter(..., pool=ray.util.multiprocessing.Pool(2))``, created once and reused.

The single-threaded loop ``for s in range(0, n, cs): fn(td[s:s+cs])`` is the reference for reduce.
A third table splits Ray's per-chunk cost: ``Pool.apply`` round trip of a no-op, a bare actor call
round trip (``ray.get(actor.f.remote())``, no Pool), and the stdlib ``Pool.apply`` round trip; plus
the one-off costs (``ray.init``, creating the pool, the first call on a new pool).

What dominates Ray's cost (one small run on the shared 2-core machine: 64 MiB reduce, 1,000 tiny
chunks; ray 2.60): per task, Ray's actor call itself (RPC + serialisation, ~0.95 ms round trip for a
bare actor) plus the Pool's per-task ``AsyncResult`` and its result thread (~0.7 ms more: a
``Pool.apply`` round trip is ~1.7 ms, against ~0.3 ms for a stdlib pool). map_iter keeps about two
tasks per actor in flight, which hides part of it: ~1.1 ms per tiny chunk (~900 chunks/s, vs ~2,400
through a stdlib pool and ~9,000 with map_iter's own pool). On 16 MiB chunks this is noise: Ray
matched the stdlib pool (4.5 vs 4.6 GB/s). One-off costs dominate short jobs: ``ray.init`` ~4.4 s,
a new ``Pool(2)`` ~0.7 s and its first call ~1.2 s (the actors import torch and tensordict).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.timing import per_call_us
from tensordict import TensorDict

MIB = 1 << 20
COLS = 256
ROW_BYTES = COLS * 4
CHUNK = 16_384
WORKERS = 2
REPO = Path(__file__).resolve().parents[1]


def reduce_chunk(td: TensorDict) -> TensorDict:
    """The reduce: a row sum, 1 KiB in -> 4 bytes out (module level: actors import it by name)."""
    return td.empty().set("y", td["x"].sum(-1))


def noop(x: Any = None) -> Any:
    return x


class _Echo:
    """A bare actor (no Pool), for the round trip of one actor call."""

    def echo(self, x: Any = None) -> Any:
        return x


def make_source(folder: Path, rows: int) -> TensorDict:
    """A memory-mapped ``x``: float32 [rows, 256] of random numbers, read into the page cache."""
    layout = TensorDict({"x": torch.empty((), dtype=torch.float32).expand(rows, COLS)}, [rows])
    td = layout.memmap_like(folder)
    gen = torch.Generator().manual_seed(0)
    for s in range(0, rows, 65_536):
        n = min(65_536, rows - s)
        td["x"][s : s + n] = torch.rand(n, COLS, generator=gen)
    float(td["x"].sum())
    return td


def _consume(it: Any) -> int:
    count = 0
    for _ in it:
        count += 1
    return count


def _loop(td: TensorDict, chunksize: int) -> int:
    n = td.batch_size[0]
    for s in range(0, n, chunksize):
        reduce_chunk(td[s : s + chunksize])
    return -(-n // chunksize)


def _stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def _rounds(contenders: dict[str, Callable[[], Any]], repeat: int) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: _stats(s) for name, s in samples.items()}


def _contenders(
    td: TensorDict, chunksize: int, stdlib_pool: Any, ray_pool: Any
) -> dict[str, Callable[[], Any]]:
    gen = torch.Generator().manual_seed(0)
    return {
        "own pool": lambda: _consume(
            td.map_iter(reduce_chunk, num_workers=WORKERS, chunksize=chunksize, generator=gen)
        ),
        "stdlib pool": lambda: _consume(
            td.map_iter(reduce_chunk, chunksize=chunksize, pool=stdlib_pool)
        ),
        "ray pool": lambda: _consume(td.map_iter(reduce_chunk, chunksize=chunksize, pool=ray_pool)),
    }


def _start_ray(ray: Any) -> float:
    t0 = time.perf_counter()
    ray.init(
        address="local",  # a cluster of our own, never someone else's
        num_cpus=WORKERS,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    return time.perf_counter() - t0


def _ray_costs(ray: Any, ray_pool: Any, stdlib_pool: Any, td: TensorDict) -> dict[str, float]:
    from ray.util.multiprocessing import Pool

    costs: dict[str, float] = {}
    t0 = time.perf_counter()
    fresh = Pool(WORKERS)
    costs["Pool(2) on a running cluster (s)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _consume(td[: 2 * CHUNK].map_iter(reduce_chunk, chunksize=CHUNK, pool=fresh))
    costs["first map_iter on that pool (s)"] = time.perf_counter() - t0
    fresh.terminate()
    actor = ray.remote(num_cpus=0)(_Echo).remote()
    ray.get(actor.echo.remote())
    calls = {
        "ray Pool.apply round trip (ms)": lambda: ray_pool.apply(noop, (1,)),
        "bare Ray actor call round trip (ms)": lambda: ray.get(actor.echo.remote(1)),
        "stdlib Pool.apply round trip (ms)": lambda: stdlib_pool.apply(noop, (1,)),
    }
    for name, fn in calls.items():
        costs[name] = per_call_us(fn, repeat=5)["median"] / 1000
    ray.kill(actor)
    return costs


def run(
    size_mib: int = 1024, tiny_rows: int = 20_000, repeat: int = 5, tiny_repeat: int = 3
) -> dict[str, Any]:
    """Measure every workload; returns {"config", "reduce", "tiny", "ray costs"}.

    ``reduce`` and ``tiny`` map contender -> {median, min, max} seconds plus a rate (``GB/s`` or
    ``chunks/s``, from the median).
    """
    from tensordict.parallel.ray_pool import require_ray

    ray = require_ray("benchmarks.ray_pool")
    from ray.util.multiprocessing import Pool

    rows = size_mib * MIB // ROW_BYTES
    folder = Path(tempfile.mkdtemp(prefix="td-bench-ray-"))
    # the stdlib pool forks before Ray starts its threads
    stdlib_pool = mp.get_context("fork").Pool(WORKERS)
    owns_ray = not ray.is_initialized()
    try:
        td = make_source(folder / "big", rows)
        tiny = make_source(folder / "tiny", tiny_rows)
        init_s = _start_ray(ray) if owns_ray else float("nan")
        ray_pool = Pool(WORKERS)
        try:
            _consume(tiny[:64].map_iter(reduce_chunk, chunksize=8, pool=ray_pool))  # warm actors
            reduce = _rounds(
                {
                    "loop": lambda: _loop(td, CHUNK),
                    **_contenders(td, CHUNK, stdlib_pool, ray_pool),
                },
                repeat,
            )
            for s in reduce.values():
                s["GB/s"] = rows * ROW_BYTES / s["median"] / 1e9
            small = _rounds(_contenders(tiny, 1, stdlib_pool, ray_pool), tiny_repeat)
            for s in small.values():
                s["chunks/s"] = tiny_rows / s["median"]
            costs = {"ray.init (s)": init_s, **_ray_costs(ray, ray_pool, stdlib_pool, td)}
        finally:
            ray_pool.terminate()
    finally:
        stdlib_pool.terminate()
        stdlib_pool.join()
        if owns_ray and ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    config = {
        "size_bytes": rows * ROW_BYTES,
        "chunk_rows": CHUNK,
        "tiny_rows": tiny_rows,
        "workers": WORKERS,
        "repeat": repeat,
        "tiny_repeat": tiny_repeat,
        "ray": ray.__version__,
        "cpus": os.cpu_count(),
    }
    return {"config": config, "reduce": reduce, "tiny": small, "ray costs": costs}


def _table(title: str, rows: dict[str, dict[str, float]], rate: str) -> None:
    print(title)
    print(f"  {'contender':14s} {'median s':>9s} {'min':>8s} {'max':>8s} {rate:>10s}")
    for name, s in rows.items():
        print(f"  {name:14s} {s['median']:9.3f} {s['min']:8.3f} {s['max']:8.3f} {s[rate]:10.1f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--tiny-rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tiny-repeat", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    res = run(args.size_mib, args.tiny_rows, args.repeat, args.tiny_repeat)
    cfg = res["config"]
    print(
        f"ray {cfg['ray']}, {cfg['workers']} workers, {cfg['cpus']} CPUs; reduce over "
        f"{cfg['size_bytes'] / MIB:.0f} MiB in {cfg['chunk_rows']}-row chunks "
        f"(x{cfg['repeat']}); tiny: {cfg['tiny_rows']} chunks of 1 row (x{cfg['tiny_repeat']})"
    )
    _table("reduce", res["reduce"], "GB/s")
    _table("tiny chunks", res["tiny"], "chunks/s")
    print("Ray's costs")
    for name, value in res["ray costs"].items():
        print(f"  {name:40s} {value:9.3f}")
    per_chunk_ms = 1000 / res["tiny"]["ray pool"]["chunks/s"]
    print(f"  {'map_iter tiny chunk through Ray (ms)':40s} {per_chunk_ms:9.3f}")


if __name__ == "__main__":
    main()
