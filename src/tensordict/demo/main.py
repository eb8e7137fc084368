"""The demo's command line and its six steps, in the order they run (read this file first).

1. a synthetic memory-mapped dataset under the cache folder: built once, reused while intact;
2. per-feature mean/std with ``map_iter`` (and the same reduce in-process and with DataLoader):
   work bound by memory bandwidth;
3. per-row features in pure Python over the first rows, the same three ways: work bound by CPU;
4. a normalised copy written by the workers into ``memmap_like`` files with ``map(out=...)``;
5. two shuffled epochs of minibatches with ``map_iter(shuffle=True)`` as the data loader, on one
   persistent ``WorkerPool``;
6. checks, a table of the figures of this run, and where map_iter wins or loses, from them.
   Exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from tensordict import TensorDict
from tensordict.demo import dataset, report, stages
from tensordict.demo.jobs import mean_std
from tensordict.parallel import WorkerPool
from tensordict.parallel.startup import usable_cpus
from tensordict.sizes import format_bytes, parse_size

__all__ = ["Settings", "default_cache_dir", "main", "parse_args", "run"]

#: the names of the three reduces in the table (compared with each other)
REDUCE_MAP_ITER = "reduce: map_iter"
REDUCE_LOOP = "reduce: in-process loop"
REDUCE_DL = "reduce: DataLoader"
FEATURES_MAP_ITER = "features: map_iter"
FEATURES_LOOP = "features: in-process loop"
FEATURES_DL = "features: DataLoader"
EPOCH_1 = "shuffled epoch: map_iter(shuffle=True)"
EPOCH_2 = "shuffled epoch 2: same WorkerPool"
#: rows of the per-row Python features (the first rows of the dataset): ~1 s in a loop
FEATURE_ROWS = 1 << 17
STEPS = 6


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tensordict-demo``, or ``~/.cache/tensordict-demo``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tensordict-demo"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The demo's options (see ``python -m tensordict.demo --help``)."""
    parser = argparse.ArgumentParser(
        prog="python -m tensordict.demo",
        description="Build a memory-mapped dataset, reduce it, normalise it and run a shuffled "
        "epoch over it with map_iter; check the results and print the timings of this run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--size", type=_size, default="1GiB", help="dataset size, such as 1GiB or 512MB"
    )
    parser.add_argument(
        "--workers",
        type=_positive,
        default=usable_cpus(),
        help="worker processes, one per usable CPU by default",
    )
    parser.add_argument("--chunksize", type=_positive, default=16384, help="rows per chunk")
    parser.add_argument(
        "--batch-size", type=_positive, default=1024, help="rows per shuffled minibatch"
    )
    parser.add_argument(
        "--dir", type=Path, default=default_cache_dir(), help="cache folder of the dataset"
    )
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Settings:
    """What one run does: the dataset's folder and rows, and how the work is cut."""

    directory: Path
    rows: int
    workers: int
    chunksize: int
    batch_size: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        """The settings of parsed command-line options."""
        rows = dataset.rows_for(args.size)
        return cls(args.dir, rows, args.workers, args.chunksize, args.batch_size)

    @property
    def nbytes(self) -> int:
        """The dataset's size in bytes."""
        return self.rows * dataset.ROW_BYTES

    def chunks(self, rows_per_chunk: int, rows: int | None = None) -> int:
        """How many chunks of ``rows_per_chunk`` rows cover the dataset (or its first ``rows``)."""
        return math.ceil((self.rows if rows is None else rows) / rows_per_chunk)

    @property
    def feature_rows(self) -> int:
        """Rows of the CPU-bound stage (the first ones)."""
        return min(self.rows, FEATURE_ROWS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; return the exit status (0: every check passed)."""
    s = Settings.from_args(parse_args(argv))
    print(
        f"tensordict demo: {format_bytes(s.nbytes)} dataset, {s.rows} rows "
        f"(obs float32 [N, {dataset.FEATURES}], label int64 [N], id int64 [N])\n"
        f"dataset folder {s.directory}: kept for the next run, removed by {_removal(s.directory)}\n"
        f"{s.workers} workers; {s.chunks(s.chunksize)} chunks of "
        f"{s.chunksize} rows; {s.chunks(s.batch_size)} minibatches of {s.batch_size} rows",
        flush=True,
    )
    results, checks = run(s)
    print(report.format_checks(checks))
    print()
    print(report.format_table(results))
    print(_footnote(s.nbytes))
    reduces = {r.name: r for r in results}
    others = {"in-process loop": reduces[REDUCE_LOOP], "DataLoader": reduces[REDUCE_DL]}
    print()
    print(report.format_comparison("map_iter", reduces[REDUCE_MAP_ITER], others))
    verdict = report.format_verdict(
        (reduces[REDUCE_MAP_ITER], reduces[REDUCE_LOOP]),
        (reduces[FEATURES_MAP_ITER], reduces[FEATURES_LOOP]),
        (reduces[EPOCH_1], reduces[EPOCH_2]),
    )
    print()
    print(verdict)
    print(f"\nSee what was written: python -m tensordict info {s.directory / 'normalised'}")
    print(
        f"The dataset and its normalised copy ({format_bytes(_folder_bytes(s.directory))}) stay "
        f"in {s.directory} for the next run; remove them with {_removal(s.directory)}."
    )
    status = report.exit_status(checks)
    if status:
        print("\nFAILED: a check did not pass (see above).")
    return status


def run(s: Settings) -> tuple[list[stages.StageResult], list[report.Check]]:
    """The six steps; returns the figures of each stage and the checks."""
    w, chunks = s.workers, s.chunks(s.chunksize)
    _step(1, "dataset")
    data, build = _open_dataset(s)

    _step(2, "per-feature mean/std: map_iter, then an in-process loop and DataLoader")
    moments, reduce = stages.measure(
        REDUCE_MAP_ITER, w, s.nbytes, chunks, lambda: stages.reduce_map_iter(data, w, s.chunksize)
    )
    loop_moments, loop = stages.measure(
        REDUCE_LOOP, 0, s.nbytes, chunks, lambda: stages.reduce_loop(data, s.chunksize)
    )
    dl_moments, dl = stages.measure(
        REDUCE_DL, w, s.nbytes, chunks, lambda: stages.reduce_dataloader(data, w, s.chunksize)
    )
    mean, std = mean_std(moments)

    features, feature_stages = _features(s, data)

    out_dir = s.directory / "normalised"
    _step(4, f"normalised copy: map(out=memmap_like) into {out_dir}")
    normalised, norm = stages.measure(
        "normalise: map(out=memmap_like)",
        w,
        s.nbytes,
        chunks,
        lambda: stages.normalise(data, mean, std, out_dir, w, s.chunksize),
    )

    _step(5, "two shuffled epochs: map_iter(shuffle=True, pool=WorkerPool) as a data loader")
    with WorkerPool(w) as pool:
        epochs = [
            stages.measure(
                name,
                w,
                s.nbytes,
                s.chunks(s.batch_size),
                functools.partial(stages.shuffled_epoch, normalised, pool, s.batch_size, label),
            )
            for name, label in ((EPOCH_1, "shuffled epoch 1"), (EPOCH_2, "shuffled epoch 2"))
        ]
    (epoch, shuffled), (epoch2, shuffled2) = epochs

    _step(6, "checks")
    loc, scale = dataset.feature_params()
    each = {
        "map_iter": (mean, std),
        "loop": mean_std(loop_moments),
        "DataLoader": mean_std(dl_moments),
    }
    checks = [
        report.check_statistics(mean, std, loc, scale, s.rows),
        report.check_reduces_agree(each),
        report.check_normalised(*mean_std(epoch.moments)),
        report.check_ids_once(epoch.counts),
        report.check_ids_once(epoch2.counts, "epoch 2: every id once"),
        report.check_features_agree(features),
    ]
    return [build, reduce, loop, dl, *feature_stages, norm, shuffled, shuffled2], checks


def _features(
    s: Settings, data: TensorDict
) -> tuple[dict[str, torch.Tensor], list[stages.StageResult]]:
    """Step 3: the CPU-bound features of the first rows, three ways."""
    n, w, cs = s.feature_rows, s.workers, s.chunksize
    _step(3, f"per-row Python features of the first {n} rows: map_iter, a loop and DataLoader")
    head = data[:n]
    nbytes, chunks = n * dataset.ROW_BYTES, s.chunks(cs, n)
    runs = {
        FEATURES_MAP_ITER: (w, lambda: stages.features_map_iter(head, w, cs)),
        FEATURES_LOOP: (0, lambda: stages.features_loop(head, cs)),
        FEATURES_DL: (w, lambda: stages.features_dataloader(head, w, cs)),
    }
    values, results = {}, []
    for name, (workers, job) in runs.items():
        values[name.split(": ")[1]], stage = stages.measure(name, workers, nbytes, chunks, job)
        results.append(stage)
    return values, results


def _step(k: int, text: str) -> None:
    print(f"\n[{k}/{STEPS}] {text}", flush=True)


def _open_dataset(s: Settings) -> tuple[TensorDict, stages.StageResult]:
    blocks = s.chunks(dataset.BLOCK_ROWS)
    (data, reused), stage = stages.measure(
        "build dataset", 0, s.nbytes, blocks, lambda: dataset.open_dataset(s.directory, s.rows)
    )
    verb = "reused" if reused else "built"
    print(f"{verb} {dataset.source_dir(s.directory)} in {stage.seconds:.2f} s", flush=True)
    if reused:
        stage = dataclasses.replace(stage, name="dataset", note="reused, verified")
    return data, stage


#: the table's columns in plain words, one line each (``{size}``: the dataset's size)
LEGEND = (
    ("GB/s", "dataset bytes ({size}) handled per second; normalise also writes as many"),
    ("chunks/s", "chunks (or minibatches) handed to fn per second"),
    ("peak private", "the most memory this run's processes held at once, data files not counted"),
    ("of which shm", "the part of it that was shared memory, in which workers sent results back"),
)


def _footnote(nbytes: int) -> str:
    """The legend of the table: each column in plain words, one line each.

    Examples:
        >>> print(_footnote(1 << 20).splitlines()[2])
        peak private  the most memory this run's processes held at once, data files not counted
    """
    size = format_bytes(nbytes)
    return "\n".join(f"{name:<13} {text.format(size=size)}" for name, text in LEGEND)


def _removal(directory: Path) -> str:
    """The command that removes the dataset folder (``make clean`` removes the default one)."""
    command = f"`rm -r {directory}`"
    return f"`make clean` (or {command})" if directory == default_cache_dir() else command


def _folder_bytes(directory: Path) -> int:
    """The bytes of the files under ``directory``."""
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(directory)
        for name in names
    )
