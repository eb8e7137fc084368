"""map_iter workloads of issue [map], against a plain loop and torch DataLoader in the same run.

Run: ``python -m benchmarks.map_iter`` (or through ``python -m benchmarks.run``).

Setting: 2 workers, a memory-mapped TensorDict of 1 KiB rows (``x``: float32 [N, 256], see
``benchmarks/data.py``) in the page cache, 16,384-row chunks (16 MiB). The contenders:

- loop: ``for s in range(0, n, cs): fn(td[s:s+cs])`` in this process, one torch thread;
- map_iter: ``td.map_iter(fn, num_workers=2, chunksize=cs)``, results consumed and dropped;
- map_iter shuffle: the same with ``shuffle=True`` (chunks gathered from a permutation);
- DataLoader: ``DataLoader(ChunkDataset(td, fn, cs), batch_size=None, num_workers=2)``, whose
  item ``i`` is ``fn(td[i*cs:(i+1)*cs])``, so its workers do what map_iter's workers do.

Each workload runs its contenders in turn (loop, map_iter, ..., loop, map_iter, ...) ``repeat``
times; figures are medians with min/max, and a ratio is the median of the per-round ratios.
Every figure includes starting the workers, as a user's call does.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

from benchmarks.data import ROW_BYTES, dataset
from benchmarks.slow_consumer import CONSUMER_SECONDS, in_fresh_process
from benchmarks.timing import interleaved, pair_ratios, summary
from benchmarks.workloads import ChunkDataset, no_collate, plain_loop, reduce_chunk, transform_chunk
from tensordict import TensorDict
from tensordict.sizes import format_bytes

GIB = 1 << 30
MIB = 1 << 20
CHUNK = 16_384
WORKERS = 2

#: the figures issue [map] gives for this machine (upstream tensordict 0.15.3) and its targets
REFERENCE = {
    "reduce: loop": "issue: 11.8 GB/s",
    "reduce: map_iter": "target >= 1.5x loop; upstream 3.1 GB/s (0.26x)",
    "reduce: map_iter shuffle": "target >= 0.5x loop; upstream 0.85 GB/s",
    "transform: loop": "issue: 9.5 GB/s",
    "transform: map_iter": "target >= 1.0x loop; upstream 1.7 GB/s (0.18x)",
    "tiny: map_iter": "target >= 20,000/s; upstream 424/s",
    "first chunk (fork)": "target <= upstream 0.03 s",
    "first chunk (spawn)": "target <= upstream 2.2 s",
}
#: upstream's peak private memory with the slow consumer, by dataset size
UPSTREAM_SLOW_CONSUMER = {GIB: "0.9 GiB", 2 * GIB: "1.5 GiB"}

Row = dict[str, Any]


def _drain(results: Iterator[Any]) -> int:
    count = 0
    for _ in results:
        count += 1
    return count


def _map_iter(td: TensorDict, fn: Callable[..., Any], **kw: Any) -> Callable[[], int]:
    kw.setdefault("chunksize", CHUNK)
    if kw.get("pool") is None:
        kw.setdefault("num_workers", WORKERS)
        kw.setdefault("generator", torch.Generator())
    return lambda: _drain(td.map_iter(fn, **kw))


def _dataloader(td: TensorDict, fn: Callable[..., Any], chunksize: int) -> Callable[[], int]:
    data = ChunkDataset(td, fn, chunksize)
    loader = DataLoader(data, batch_size=None, num_workers=WORKERS, collate_fn=no_collate)
    return lambda: _drain(iter(loader))


def _loop(td: TensorDict, fn: Callable[..., Any], chunksize: int) -> Callable[[], int]:
    return lambda: plain_loop(td, fn, chunksize)


def _row(name: str, values: list[float], unit: str, reference: str = "", **extra: Any) -> Row:
    return {
        "name": name,
        **summary(values),
        "unit": unit,
        "ratios": extra.pop("ratios", {}),
        "reference": reference,
        "samples": values,
        **extra,
    }


def _compare(
    title: str,
    label: str,
    contenders: dict[str, Callable[[], int]],
    amount: float,
    unit: str,
    repeat: int,
) -> list[Row]:
    """Rows for contenders measured in turn; rates are ``amount`` per second."""
    samples = interleaved(contenders, repeat=repeat)
    rows = []
    for name, seconds in samples.items():
        ratios = {}
        if name != "loop":
            ratios["loop"] = pair_ratios(samples["loop"], seconds)
        if name.startswith("map_iter") and "DataLoader" in samples:
            ratios["DataLoader"] = pair_ratios(samples["DataLoader"], seconds)
        rows.append(
            _row(
                f"{title} {label}: {name}",
                [amount / s for s in seconds],
                unit,
                REFERENCE.get(f"{title}: {name}", ""),
                ratios=ratios,
            )
        )
    return rows


def _warm_up(contenders: dict[str, Callable[[], int]]) -> None:
    for fn in contenders.values():
        fn()


def _contenders(td: TensorDict, fn: Callable[..., Any], shuffle: bool) -> dict[str, Any]:
    contenders = {"loop": _loop(td, fn, CHUNK), "map_iter": _map_iter(td, fn)}
    if shuffle:
        contenders["map_iter shuffle"] = _map_iter(td, fn, shuffle=True)
    contenders["DataLoader"] = _dataloader(td, fn, CHUNK)
    return contenders


def throughput(
    td: TensorDict, fn: Callable[..., Any], title: str, repeat: int, *, shuffle: bool = False
) -> list[Row]:
    """GB/s of the loop, map_iter (and its shuffle) and DataLoader over ``td``."""
    _warm_up(_contenders(td[: 4 * CHUNK], fn, shuffle))
    contenders = _contenders(td, fn, shuffle)
    nbytes = td.batch_size[0] * ROW_BYTES
    return _compare(title, format_bytes(nbytes), contenders, nbytes / 1e9, "GB/s", repeat)


def tiny_chunks(td: TensorDict, repeat: int) -> list[Row]:
    """Chunks per second with ``chunksize=1``."""
    contenders = {
        "loop": _loop(td, reduce_chunk, 1),
        "map_iter": _map_iter(td, reduce_chunk, chunksize=1),
        "DataLoader": _dataloader(td, reduce_chunk, 1),
    }
    _warm_up({"map_iter": _map_iter(td[:100], reduce_chunk, chunksize=1)})
    label = f"{td.batch_size[0]:,} rows"
    return _compare("tiny", label, contenders, td.batch_size[0], "chunks/s", repeat)


def first_chunk(td: TensorDict, method: str, repeat: int) -> Row:
    """Seconds from calling map_iter to holding its first result (workers started by the call)."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        results = td.map_iter(
            reduce_chunk,
            num_workers=WORKERS,
            chunksize=CHUNK,
            generator=torch.Generator(),
            mp_start_method=method,
        )
        next(results)
        samples.append(time.perf_counter() - t0)
        results.close()  # type: ignore[attr-defined]
    name = f"first chunk ({method})"
    return _row(name, samples, "s", REFERENCE[name])


def slow_consumer(size: int, parts: list[int], repeat: int) -> list[Row]:
    """Peak private memory (MiB) of the transform feeding a slow consumer, as the data grows.

    Each measurement runs in a fresh process; a last row gives that process's private memory
    before the call (Python with torch imported), which every peak includes.
    """
    rows: list[Row] = []
    baselines: list[float] = []
    for part in parts:
        runs = [in_fresh_process(size, part, CHUNK, WORKERS) for _ in range(repeat)]
        if not runs[0]:
            return []  # no /proc: nothing to report
        peaks = [r["peak_mib"] for r in runs]
        baselines += [r["baseline_mib"] for r in runs]
        ratios = {}
        if rows:
            ratios["first size"] = summary([p / f for p, f in zip(peaks, rows[0]["samples"])])
        parts_mib = {k: summary([r[k] for r in runs]) for k in runs[0] if k != "peak_mib"}
        name = f"slow consumer {format_bytes(part)}: peak private memory"
        reference = "target <= 256 MiB, flat"
        if part in UPSTREAM_SLOW_CONSUMER:
            reference += f"; upstream {UPSTREAM_SLOW_CONSUMER[part]}"
        rows.append(_row(name, peaks, "MiB", reference, ratios=ratios, **parts_mib))
    rows.append(_row("slow consumer: private memory before the call", baselines, "MiB"))
    return rows


def _epochs_user_pool(td: TensorDict, method: str, epochs: int) -> Callable[[], int]:
    def run() -> int:
        with mp.get_context(method).Pool(WORKERS) as pool:
            return sum(_map_iter(td, reduce_chunk, pool=pool)() for _ in range(epochs))

    return run


def _epochs_fresh_pool(td: TensorDict, method: str, epochs: int) -> Callable[[], int]:
    one_epoch = _map_iter(td, reduce_chunk, mp_start_method=method)
    return lambda: sum(one_epoch() for _ in range(epochs))


def pool_reuse(td: TensorDict, method: str, epochs: int, repeat: int) -> list[Row]:
    """Seconds for ``epochs`` reduce epochs: one user pool for all vs map_iter's own per epoch."""
    contenders = {
        "user pool reused": _epochs_user_pool(td, method, epochs),
        "fresh pool per epoch": _epochs_fresh_pool(td, method, epochs),
    }
    samples = interleaved(contenders, repeat=repeat)
    label = f"pool reuse {epochs} epochs x {format_bytes(td.batch_size[0] * ROW_BYTES)} ({method})"
    reused, fresh = samples["user pool reused"], samples["fresh pool per epoch"]
    ratios = {"fresh pools": pair_ratios(reused, fresh)}
    return [
        _row(f"{label}: user pool", reused, "s", ratios=ratios),
        _row(f"{label}: fresh pools", fresh, "s"),
    ]


def run(
    size: int = 4 * GIB,
    repeat: int = 3,
    *,
    tiny_rows: int = 20_000,
    epochs: int = 3,
    first_chunk_repeat: int = 5,
) -> dict[str, Any]:
    """Every map_iter workload; returns ``{"rows": [...], "setting": {...}}``.

    Args:
        size: bytes of the reduce (and shuffle); the transform uses ``size / 2``, pool reuse
            ``size / 4``, and the slow consumer ``size / 4``, ``size / 2`` and ``size``.
        repeat: rounds of every comparison (and of each slow-consumer size).
        tiny_rows: rows of the ``chunksize=1`` workload.
        epochs: epochs of the pool-reuse workload.
        first_chunk_repeat: samples of the time to first chunk (spawn gets ``max(1, n // 2)``).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the loop is single-threaded; map_iter's workers are too
    try:
        td, reused = dataset(size)
        n = td.batch_size[0]
        quarter, half = td[: n // 4], td[: n // 2]
        rows = throughput(td, reduce_chunk, "reduce", repeat, shuffle=True)
        rows += throughput(half, transform_chunk, "transform", repeat)
        rows += tiny_chunks(td[: min(tiny_rows, n)], repeat)
        rows.append(first_chunk(td, "fork", first_chunk_repeat))
        rows.append(first_chunk(td, "spawn", max(1, first_chunk_repeat // 2)))
        rows += slow_consumer(size, [size // 4, size // 2, size], repeat)
        for method in ("fork", "spawn"):
            rows += pool_reuse(quarter, method, epochs, repeat)
    finally:
        torch.set_num_threads(threads)
    setting = {
        "bytes": n * ROW_BYTES,
        "rows": n,
        "row_bytes": ROW_BYTES,
        "chunksize": CHUNK,
        "workers": WORKERS,
        "repeat": repeat,
        "dataset_reused": reused,
        "consumer_seconds_per_16MiB": CONSUMER_SECONDS,
        "slow_consumer": "each size in a fresh process (python -m benchmarks.slow_consumer)",
    }
    return {"setting": setting, "rows": rows}


def main() -> None:
    from benchmarks.report import format_rows

    print(format_rows(run()["rows"]))


if __name__ == "__main__":
    main()
