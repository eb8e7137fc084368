"""Work that needs cores (issue [perf-2]), against the limit of process parallelism in one run.

Run: ``python -m benchmarks.cpu_bound`` (or through ``python -m benchmarks.run``).

Workloads (see ``benchmarks/workloads.py``), each over chunks of a tensordict:

- ``pyrows``: pure Python per row (GIL-bound), over the benchmark dataset's rows;
- ``matmul``: ``(x @ W).relu().sum(-1)``, W 256x256 (torch-bound);
- ``decode``: bytes -> tensor per sample over a ``NonTensorStack`` of 1 KiB byte strings;
- ``reduce`` / ``transform``: the memory-bound workloads of ``benchmarks/map_iter.py``;
- ``shuffle``: the reduce over chunks gathered from a permutation (``map_iter(shuffle=True)``;
  the other contenders gather the rows of a fixed permutation themselves);
- ``tiny``: the reduce with ``chunksize=1`` (the engine's cost per chunk).

Contenders, run in turn ``repeat`` times (rounds interleaved, so that ratios compare runs that saw
the same machine):

- ``loop``: ``fn`` on every chunk in this process, one torch thread;
- ``loop, default threads``: the same with torch's default thread count (one per CPU);
- ``map_iter``: ``td.map_iter(fn, num_workers=2)``, workers started by the call;
- ``DataLoader``: 2 workers, item ``i`` is ``fn(chunk i)``;
- ``bare processes``: two forked processes run ``fn`` over alternate chunks, with no engine and
  nothing sent back: the limit of process parallelism on the machine of the run;
- ``bare processes + send`` (tiny only, issue [perf-3]): the same, each result also sent back
  as it comes (pickled, one length-prefixed message per result through a pipe) and unpickled
  by this process: the fair limit for results that must reach the caller.

Targets: ``map_iter`` >= 0.95x ``bare processes`` for every workload (see the ratio column);
tiny chunks >= 25,000/s and >= 0.95x ``bare processes + send``. ``python -m benchmarks.run
--only tiny`` runs the tiny workload alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from benchmarks.data import ROW_BYTES, dataset
from benchmarks.map_iter import Row, _dataloader, _drain, _row
from benchmarks.timing import interleaved, pair_ratios
from benchmarks.workloads import (
    bare_processes,
    decode_chunk,
    encoded_images,
    matmul_chunk,
    plain_loop,
    pyrows_chunk,
    reduce_chunk,
    transform_chunk,
)
from tensordict import TensorDict
from tensordict.parallel.startup import usable_cpus

WORKERS = 2
TARGET = "target >= 0.95x bare processes"

#: workload -> (function, rows in a full run, rows per chunk, where its data comes from)
WORKLOADS: dict[str, tuple[Callable[[TensorDict], Any], int, int, str]] = {
    "pyrows": (pyrows_chunk, 1 << 17, 4096, "dataset"),
    "matmul": (matmul_chunk, 1 << 18, 8192, "dataset"),
    "decode": (decode_chunk, 1 << 16, 2048, "images"),
    "reduce": (reduce_chunk, 1 << 20, 16_384, "dataset"),
    "transform": (transform_chunk, 1 << 19, 16_384, "dataset"),
    "shuffle": (reduce_chunk, 1 << 20, 16_384, "dataset"),
    "tiny": (reduce_chunk, 20_000, 1, "dataset"),
}


class Gather:
    """``fn`` on the rows a chunk of row numbers names, taken from a fixed permutation of ``td``:
    the shuffle workload for the contenders that slice chunks themselves (map_iter runs
    ``shuffle=True`` on ``td`` instead)."""

    def __init__(self, fn: Callable[[TensorDict], Any], td: TensorDict) -> None:
        self.fn = fn
        self.td = td
        self.perm = torch.randperm(td.batch_size[0], generator=torch.Generator().manual_seed(0))

    def __call__(self, positions: TensorDict) -> Any:
        return self.fn(self.td[self.perm[positions["i"]]])


def _with_threads(threads: int, run: Callable[[], int]) -> Callable[[], int]:
    def call() -> int:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return run()
        finally:
            torch.set_num_threads(before)

    return call


def contenders(
    td: TensorDict,
    fn: Callable[..., Any],
    chunksize: int,
    *,
    shuffle: bool = False,
    send: bool = False,
) -> dict[str, Any]:
    """Every contender of one workload, as zero-argument callables (``send``: with the bare
    processes that send their results back)."""
    kw = {"num_workers": WORKERS, "chunksize": chunksize, "generator": torch.Generator()}
    source, each = td, fn
    if shuffle:  # the others take chunks of row numbers and gather the rows themselves
        n = td.batch_size[0]
        source, each = TensorDict({"i": torch.arange(n)}, [n]), Gather(fn, td)
    loop = lambda: plain_loop(source, each, chunksize)  # noqa: E731
    return {
        "loop": loop,
        "loop, default threads": _with_threads(usable_cpus(), loop),
        "map_iter": lambda: _drain(td.map_iter(fn, shuffle=shuffle, **kw)),
        "DataLoader": _dataloader(source, each, chunksize),
        "bare processes": lambda: bare_processes(source, each, chunksize),
        **(
            {"bare processes + send": lambda: bare_processes(source, each, chunksize, send=True)}
            if send
            else {}
        ),
    }


def workload(name: str, td: TensorDict, chunksize: int, repeat: int) -> list[Row]:
    """Rows (rows/s) of every contender of one workload, with ratios to the loop and the bare
    processes of the same rounds."""
    fn = WORKLOADS[name][0]
    small = td[: 2 * chunksize]
    shuffle, send = name == "shuffle", name == "tiny"
    for warm in contenders(small, fn, chunksize, shuffle=shuffle, send=send).values():
        warm()
    samples = interleaved(contenders(td, fn, chunksize, shuffle=shuffle, send=send), repeat=repeat)
    n = td.batch_size[0]
    label = f"{name} {n:,} rows x {chunksize:,}"
    rows = []
    for contender, seconds in samples.items():
        ratios = {}
        if contender != "loop":
            ratios["loop"] = pair_ratios(samples["loop"], seconds)
        if contender not in ("loop", "bare processes"):
            ratios["bare processes"] = pair_ratios(samples["bare processes"], seconds)
        if contender == "map_iter" and send:
            ratios["bare + send"] = pair_ratios(samples["bare processes + send"], seconds)
        reference = TARGET if contender == "map_iter" else ""
        if contender == "map_iter" and name == "tiny":
            reference += ", >= 25,000 rows/s, >= 0.95x bare + send"
        if contender == "bare processes":
            reference = "the machine's limit for 2 processes"
        if contender == "bare processes + send":
            reference = "the limit with each result sent back"
        rows.append(
            _row(
                f"{label}: {contender}",
                [n / s for s in seconds],
                "rows/s",
                reference,
                ratios=ratios,
            )
        )
    return rows


def _source(kind: str, rows: int) -> TensorDict:
    if kind == "images":
        return encoded_images(rows)
    td, _ = dataset(rows * ROW_BYTES)
    return td


def run(scale: float = 1.0, repeat: int = 3, only: list[str] | None = None) -> dict[str, Any]:
    """Every workload at ``scale`` times its full row count; ``{"rows": [...], "setting": ...}``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows: list[Row] = []
    try:
        for name, (_, full, chunksize, kind) in WORKLOADS.items():
            if only is not None and name not in only:
                continue
            n = max(4 * chunksize, int(full * scale))
            rows += workload(name, _source(kind, n), chunksize, repeat)
    finally:
        torch.set_num_threads(threads)
    setting = {
        "workers": WORKERS,
        "repeat": repeat,
        "scale": scale,
        "default_threads": usable_cpus(),
    }
    return {"setting": setting, "rows": rows}


def main() -> None:
    from benchmarks.report import format_rows

    print(format_rows(run()["rows"]))


if __name__ == "__main__":
    main()
