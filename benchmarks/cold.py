"""Data that is not in the page cache (issue [perf-3]): a memory-mapped dataset read cold.

Run: ``python -m benchmarks.cold [--quick | --big] [--repeat R] [--tree NAME=SRC ...]`` (or
``python -m benchmarks.run --only cold``; ``make bench ARGS=--big`` runs it on the big dataset).

Before each contender runs, every file of the dataset leaves the page cache: this process drops
its own page-table entries (``madvise(MADV_DONTNEED)``), then ``posix_fadvise(POSIX_FADV_DONTNEED)``
evicts the file (no root needed); the share of its pages still resident afterwards is recorded
(``setting["resident_after_eviction"]``, the largest seen). Setting: the map_iter suite's dataset
(``x``: float32 [4,194,304, 256], 1 KiB rows, 4 GiB, under ``$TENSORDICT_BENCH_CACHE``), 2
workers, the reduce ``fn`` (``x.sum(-1)``: a pass that computes little, so reading is the work).

Workloads:

- ``sequential``: the whole file in 16,384-row (16 MiB) chunks;
- ``shuffled``: 131,072 rows at random, the rows of ``td[::32]`` (one 1 KiB row in every 32 KiB
  of the file: no two rows share a page, so every row is a read from the disk, as with data
  larger than memory), in shuffled chunks of 16,384 rows.

Contenders, run in turn ``repeat`` times (rates are GB/s of rows delivered; ratios are medians
of the per-round ratios):

- ``loop``: one process, ``fn(td[s:s+cs])`` (shuffled: ``fn(td[perm[s:s+cs]])``);
- ``map_iter``: ``td.map_iter(fn, num_workers=2, chunksize=cs, shuffle=...)``, timed inside a
  fresh interpreter that loads the dataset (so the A/B trees and upstream run the same way);
  its peak private memory (``tensordict.procmem``) is recorded too;
- ``DataLoader``: 2 workers, item ``i`` is ``fn`` of chunk ``i`` (shuffled:
  ``BatchSampler(RandomSampler)``, item ``fn(td[indices])``);
- ``upstream map_iter``: the same script under upstream 0.15.3 (its venv, when present);
- ``limit``: two forked processes reading the same byte ranges with nothing else to do:
  ``os.preadv`` into a reused buffer, one 16 MiB request per chunk (sequential) or one read per
  row in file order (shuffled): what the disk gives two readers.
- ``--tree NAME=SRC``: ``map_iter`` again with ``PYTHONPATH=SRC`` (e.g. the code before a change,
  as an A/B in the same rounds), as contender ``map_iter NAME``.

``--big``: the same over a dataset of 1.5x the machine's RAM (built on first use: mind the free
disk space), the shuffled rows spread over the whole file. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from benchmarks.data import ROW_BYTES, dataset, path_of
from benchmarks.map_iter import Row, _dataloader, _drain, _row
from benchmarks.timing import pair_ratios
from benchmarks.workloads import IndexDataset, no_collate, reduce_chunk
from tensordict import TensorDict
from tensordict.memmap import pagecache
from tensordict.parallel.reaper import wait_reaped
from tensordict.sizes import format_bytes

GIB = 1 << 30
MIB = 1 << 20
CHUNK = 16_384
WORKERS = 2
#: rows of the shuffled workload, and its stride in the file (one row every 32 KiB)
SHUFFLED_ROWS = 131_072
WORKLOADS = ("sequential", "shuffled")
REPO = Path(__file__).resolve().parents[1]
UPSTREAM_PYTHON = Path(
    os.environ.get(
        "TD_UPSTREAM_PYTHON", Path.home() / ".cache" / "td-upstream-venv" / "bin" / "python"
    )
)
REFERENCE = {
    "sequential: map_iter": "target >= 0.95x limit, >= 1x loop",
    "shuffled: map_iter": "target >= 0.9x limit, >= 1x loop",
    "sequential: limit": "2 processes, preadv of 16 MiB",
    "shuffled: limit": "2 processes, one pread per row",
}

# The contender timed in a fresh interpreter: the same lines under this package, an A/B tree or
# upstream 0.15.3 (whose venv has none of the benchmark modules).
CHILD_SCRIPT = """
import json, sys, time
import torch
from tensordict import TensorDict

def reduce_chunk(td):
    return td.empty().set("y", td["x"].sum(-1))

def main():
    path, stop, step, chunk, shuffle = sys.argv[1:6]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    td = TensorDict.load_memmap(path)[: int(stop) : int(step)]
    try:
        from tensordict.procmem import MemorySampler
    except ImportError:  # upstream
        MemorySampler = None
    sampler = MemorySampler(interval=0.01) if MemorySampler is not None else None
    if sampler is not None:
        sampler.__enter__()
    t0 = time.perf_counter()
    n = 0
    for _ in td.map_iter(reduce_chunk, num_workers=2, chunksize=int(chunk),
                         shuffle=shuffle == "1", generator=torch.Generator()):
        n += 1
    seconds = time.perf_counter() - t0
    peak = None
    if sampler is not None:
        sampler.__exit__(None, None, None)
        peak = sampler.peak
    print(json.dumps({"seconds": seconds, "chunks": n, "peak": peak}))

if __name__ == "__main__":
    main()
"""


# ---------------------------------------------------------------------- the page cache
def leaves(td: TensorDict) -> list[Any]:
    """The memory-mapped leaves of ``td`` (each maps one file)."""
    return [v for v in td.values(include_nested=True, leaves_only=True) if v.filename]


def evict(td: TensorDict) -> float:
    """Evict every file of ``td`` from the page cache; returns the share of pages still there."""
    resident = total = 0
    for leaf in leaves(td):
        pagecache.unmap_pages(leaf)
        pagecache.evict_file(leaf.filename)
        vec = pagecache.residency(*pagecache.mapping(leaf))
        if vec is not None:
            resident += int(vec.sum())
            total += len(vec)
    return resident / total if total else 0.0


# ---------------------------------------------------------------------- contenders
def _loop(td: TensorDict, perm: torch.Tensor | None) -> Callable[[], int]:
    n = td.batch_size[0]

    def run() -> int:
        for s in range(0, n, CHUNK):
            reduce_chunk(td[s : s + CHUNK] if perm is None else td[perm[s : s + CHUNK]])
        return -(-n // CHUNK)

    return run


def _shuffled_loader(td: TensorDict, chunk: int) -> Callable[[], int]:
    sampler = BatchSampler(RandomSampler(range(td.batch_size[0])), chunk, drop_last=False)
    loader = DataLoader(
        IndexDataset(td, reduce_chunk),
        sampler=sampler,
        batch_size=None,
        num_workers=WORKERS,
        collate_fn=no_collate,
    )
    return lambda: _drain(iter(loader))


def read_plan(td: TensorDict, perm: torch.Tensor | None, chunk: int) -> list[list[Any]]:
    """What each chunk reads: ``[(file number, offset, length), ...]`` per chunk, in file order.

    Sequential: one range per file and chunk; shuffled: one range per row of the chunk.
    """
    n = td.batch_size[0]
    plan: list[list[Any]] = []
    for s in range(0, n, chunk):
        reads = []
        for f, leaf in enumerate(leaves(td)):
            size = leaf.element_size()
            base = leaf.storage_offset() * size
            step, row = leaf.stride(0) * size, leaf[0].numel() * size
            if perm is None:
                stop = min(s + chunk, n)
                reads.append((f, base + s * step, (stop - s - 1) * step + row))
            else:
                rows = perm[s : s + chunk].sort().values.tolist()
                reads += [(f, base + r * step, row) for r in rows]
        plan.append(sorted(reads, key=lambda r: (r[0], r[1])))
    return plan


def _limit(td: TensorDict, perm: torch.Tensor | None, chunk: int) -> Callable[[], int]:
    plan = read_plan(td, perm, chunk)
    names = [leaf.filename for leaf in leaves(td)]
    largest = max(length for reads in plan for _, _, length in reads)

    def run() -> int:
        fds = [os.open(name, os.O_RDONLY) for name in names]
        pids = []
        try:
            for wid in range(WORKERS):
                pid = os.fork()
                if pid == 0:  # pragma: no cover - runs in the child
                    code = 1
                    try:
                        buf = memoryview(bytearray(largest))
                        for reads in plan[wid::WORKERS]:
                            for f, offset, length in reads:
                                os.preadv(fds[f], [buf[:length]], offset)
                        code = 0
                    finally:
                        os._exit(code)
                pids.append(pid)
            for pid in pids:
                _, status = os.waitpid(pid, 0)
                if os.waitstatus_to_exitcode(status) != 0:
                    raise RuntimeError(f"a reading process (pid {pid}) failed")
        finally:
            for fd in fds:
                os.close(fd)
        return len(plan)

    return run


class Child:
    """``map_iter`` timed in a fresh interpreter (``python`` with ``PYTHONPATH=src``, or none)."""

    def __init__(
        self, python: str, src: Path | None, path: Path, view: tuple[int, int], chunk: int
    ) -> None:
        self.python, self.src, self.path, self.view, self.chunk = python, src, path, view, chunk
        self.shuffle = False
        self.peaks: list[float] = []

    def __call__(self) -> float:
        folder = Path(tempfile.mkdtemp(prefix="cold-"))
        script = folder / "cold_child.py"
        script.write_text(textwrap.dedent(CHILD_SCRIPT))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if self.src is not None:
            env["PYTHONPATH"] = str(self.src)
        args = [str(self.path), str(self.view[0]), str(self.view[1]), str(self.chunk)]
        try:
            done = subprocess.run(
                [self.python, "-W", "ignore", str(script), *args, "1" if self.shuffle else "0"],
                capture_output=True,
                text=True,
                cwd=folder,
                env=env,
                timeout=3600,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if done.returncode:
            raise RuntimeError(f"{self.python} {self.src}: {done.stderr[-2000:]}")
        out = json.loads(done.stdout.strip().splitlines()[-1])
        if out["peak"] is not None:
            self.peaks.append(out["peak"] / MIB)
        return float(out["seconds"])


def contenders(
    td: TensorDict,
    path: Path,
    view: tuple[int, int],
    chunk: int,
    shuffled: bool,
    trees: dict[str, Path],
) -> dict[str, Callable[[], Any]]:
    """Every contender of one workload; a contender that returns a float timed itself."""
    perm = None
    if shuffled:
        perm = torch.randperm(td.batch_size[0], generator=torch.Generator().manual_seed(0))
    runs: dict[str, Callable[[], Any]] = {"loop": _loop(td, perm)}
    ours = Child(sys.executable, REPO / "src", path, view, chunk)
    extra = {
        f"map_iter {name}": Child(sys.executable, src, path, view, chunk)
        for name, src in trees.items()
    }
    runs["map_iter"] = ours
    runs.update(extra)
    runs["DataLoader"] = (
        _shuffled_loader(td, chunk) if shuffled else _dataloader(td, reduce_chunk, chunk)
    )
    if UPSTREAM_PYTHON.exists():
        runs["upstream map_iter"] = Child(str(UPSTREAM_PYTHON), None, path, view, chunk)
    runs["limit"] = _limit(td, perm, chunk)
    for run in runs.values():
        if isinstance(run, Child):
            run.shuffle = shuffled
    return runs


def cold_rounds(
    td: TensorDict, runs: dict[str, Callable[[], Any]], repeat: int
) -> tuple[dict[str, list[float]], float]:
    """Seconds of each contender, in turn ``repeat`` times, each after evicting ``td``'s files;
    and the largest share of pages found resident after an eviction."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    left = 0.0
    for _ in range(repeat):
        for name, run in runs.items():
            wait_reaped()  # the workers of the last contender are gone (and hold no pages)
            left = max(left, evict(td))
            t0 = time.perf_counter()
            timed = run()
            wall = time.perf_counter() - t0
            samples[name].append(timed if isinstance(timed, float) else wall)
    return samples, left


def workload(
    title: str,
    td: TensorDict,
    path: Path,
    view: tuple[int, int],
    chunk: int,
    repeat: int,
    trees: dict[str, Path],
) -> tuple[list[Row], float]:
    """Rows (GB/s of rows delivered) of every contender of one workload."""
    shuffled = title == "shuffled"
    runs = contenders(td, path, view, chunk, shuffled, trees)
    samples, left = cold_rounds(td, runs, repeat)
    nbytes = td.batch_size[0] * ROW_BYTES
    label = f"cold {title} {format_bytes(nbytes)}"
    if shuffled:
        label += f" (1 row in {view[1]})"
    rows = []
    for name, seconds in samples.items():
        ratios = {}
        if name != "limit":
            ratios["limit"] = pair_ratios(samples["limit"], seconds)
        if name != "loop":
            ratios["loop"] = pair_ratios(samples["loop"], seconds)
        for other in trees:
            if name == "map_iter":
                ratios[other] = pair_ratios(samples[f"map_iter {other}"], seconds)
        rates = [nbytes / 1e9 / s for s in seconds]
        reference = REFERENCE.get(f"{title}: {name}", "")
        rows.append(_row(f"{label}: {name}", rates, "GB/s", reference, ratios=ratios))
    for name, run in runs.items():
        if isinstance(run, Child) and run.peaks:
            rows.append(_row(f"{label}: {name} peak private memory", run.peaks, "MiB"))
    return rows, left


def run(
    size: int = 4 * GIB,
    repeat: int = 3,
    *,
    shuffled_rows: int = SHUFFLED_ROWS,
    shuffled_chunk: int = CHUNK,
    trees: dict[str, Path] | None = None,
    workloads: list[str] | None = None,
) -> dict[str, Any]:
    """Both workloads (or those named) over the dataset of ``size`` bytes;
    ``{"rows": [...], "setting": {...}}``."""
    trees = trees or {}
    workloads = workloads or list(WORKLOADS)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        full, reused = dataset(size, read=False)
        path = path_of(size)
        n = full.batch_size[0]
        stride = max(1, n // shuffled_rows)
        rows: list[Row] = []
        left = 0.0
        if "sequential" in workloads:
            more, left = workload("sequential", full, path, (n, 1), CHUNK, repeat, trees)
            rows += more
        if "shuffled" in workloads:
            sparse = full[: stride * shuffled_rows : stride]
            view = (stride * shuffled_rows, stride)
            more, shuf = workload("shuffled", sparse, path, view, shuffled_chunk, repeat, trees)
            rows, left = rows + more, max(left, shuf)
        evict(full)  # leave the cache as other suites expect to find it: they warm it themselves
    finally:
        torch.set_num_threads(threads)
    setting = {
        "bytes": n * ROW_BYTES,
        "rows": n,
        "chunksize": CHUNK,
        "shuffled_rows": shuffled_rows,
        "shuffled_stride": stride,
        "shuffled_chunksize": shuffled_chunk,
        "workers": WORKERS,
        "repeat": repeat,
        "dataset_reused": reused,
        "resident_after_eviction": left,
        "trees": {name: str(src) for name, src in trees.items()},
    }
    return {"setting": setting, "rows": rows}


def big_size() -> int:
    """1.5x the machine's RAM, in whole 1 KiB rows."""
    return (
        int(1.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // ROW_BYTES * ROW_BYTES
    )


def sizes(quick: bool, big: bool) -> dict[str, Any]:
    """The arguments of :func:`run` for a quick, full or big run."""
    if quick:
        return {"size": 256 * MIB, "repeat": 1, "shuffled_rows": 8192, "shuffled_chunk": 2048}
    if big:
        return {"size": big_size(), "repeat": 3}
    return {"size": 4 * GIB, "repeat": 3}


def parse_trees(values: list[str]) -> dict[str, Path]:
    trees = {}
    for value in values:
        name, sep, src = value.partition("=")
        if not sep or not name or not Path(src).is_dir():
            raise SystemExit(f"--tree wants NAME=SRC with SRC a source folder, got {value!r}")
        trees[name] = Path(src).resolve()
    return trees


def main(argv: list[str] | None = None) -> None:
    from benchmarks.report import format_rows

    parser = argparse.ArgumentParser(prog="python -m benchmarks.cold", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--big", action="store_true")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=SRC")
    parser.add_argument("--workload", action="append", choices=WORKLOADS, default=None)
    args = parser.parse_args(argv)
    kw = sizes(args.quick, args.big)
    if args.repeat is not None:
        kw["repeat"] = args.repeat
    raw = run(**kw, trees=parse_trees(args.tree), workloads=args.workload)
    print(format_rows(raw["rows"]))
    print(json.dumps(raw["setting"]))


if __name__ == "__main__":
    main()
