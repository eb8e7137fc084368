"""The stages of the demo, and how each is measured.

Every stage goes through :func:`measure`: wall-clock seconds, and the peak private memory of this
process and its workers sampled in the background (:class:`tensordict.procmem.MemorySampler`).
The three ``reduce_*`` functions compute the same per-feature moments three ways, so that their
times can be compared within one run.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch.utils.data import DataLoader

from tensordict import TensorDict
from tensordict.demo.jobs import (
    ChunkFeatures,
    ChunkMoments,
    add_moments,
    chunk_moments,
    load_minibatch,
    normalise_chunk,
    pass_through,
    row_features,
)
from tensordict.parallel import WorkerPool
from tensordict.parallel.reaper import wait_reaped
from tensordict.procmem import MemorySample, MemorySampler

__all__ = [
    "EpochResult",
    "StageResult",
    "features_dataloader",
    "features_loop",
    "features_map_iter",
    "measure",
    "normalise",
    "reduce_dataloader",
    "reduce_loop",
    "reduce_map_iter",
    "shuffled_epoch",
]

T = TypeVar("T")


@dataclass(frozen=True)
class StageResult:
    """What one stage took.

    Attributes:
        name: what the stage did.
        workers: worker processes (0: done in this process).
        seconds: wall-clock time, worker start-up included.
        nbytes: dataset bytes the stage went through.
        chunks: chunks (or minibatches) processed.
        memory: the reading of peak private memory (None when it cannot be measured here).
        note: a remark printed next to the figures (None: the throughput is meaningful).
    """

    name: str
    workers: int
    seconds: float
    nbytes: int
    chunks: int
    memory: MemorySample | None
    note: str | None = None

    @property
    def gb_per_s(self) -> float:
        """Dataset gigabytes (10**9 bytes) per second."""
        return self.nbytes / 1e9 / self.seconds if self.seconds > 0 else math.inf

    @property
    def chunks_per_s(self) -> float:
        """Chunks per second."""
        return self.chunks / self.seconds if self.seconds > 0 else math.inf


def measure(
    name: str, workers: int, nbytes: int, chunks: int, run: Callable[[], T]
) -> tuple[T, StageResult]:
    """Run ``run()`` under a timer and a memory sampler; return its value and the figures.

    Workers of an earlier stage still exiting in the background are waited for first (untimed),
    so that this stage is not charged for them.
    """
    wait_reaped()
    with MemorySampler() as memory:
        start = time.perf_counter()
        value = run()
        seconds = time.perf_counter() - start
    return value, StageResult(name, workers, seconds, nbytes, chunks, memory.peak_sample)


def reduce_map_iter(data: TensorDict, workers: int, chunksize: int) -> TensorDict:
    """Per-feature moments with ``map_iter``: the workers reduce chunks, this process adds them."""
    total = None
    for part in data.map_iter(
        chunk_moments,
        num_workers=workers,
        chunksize=chunksize,
        pbar="reduce: map_iter",
        generator=torch.default_generator,
    ):
        total = add_moments(total, part)
    assert total is not None
    return total


def reduce_loop(data: TensorDict, chunksize: int) -> TensorDict:
    """The same reduce in this process, chunk after chunk (torch's own threads only)."""
    total = None
    for start in range(0, data.batch_size[0], chunksize):
        total = add_moments(total, chunk_moments(data[start : start + chunksize]))
    assert total is not None
    return total


def reduce_dataloader(data: TensorDict, workers: int, chunksize: int) -> TensorDict:
    """The same reduce with ``torch.utils.data.DataLoader`` over a dataset of chunks."""
    loader = DataLoader(
        ChunkMoments(data, chunksize),
        batch_size=None,
        num_workers=workers,
        collate_fn=pass_through,
    )
    total = None
    for part in loader:
        total = add_moments(total, part)
    assert total is not None
    return total


def normalise(
    data: TensorDict,
    mean: torch.Tensor,
    std: torch.Tensor,
    out_dir: Path,
    workers: int,
    chunksize: int,
) -> TensorDict:
    """A normalised copy of ``data`` under ``out_dir``, written by the workers themselves.

    ``memmap_like`` preallocates the output files; ``map(..., out=...)`` then has each worker
    write its chunk's result into them, so no result travels back to this process.
    """
    out = data.memmap_like(out_dir)
    fn = functools.partial(normalise_chunk, mean=mean.float(), std=std.float())
    data.map(
        fn,
        num_workers=workers,
        chunksize=chunksize,
        out=out,
        pbar="normalise: map(out=)",
        generator=torch.default_generator,
    )
    return out


@dataclass
class EpochResult:
    """What the consumer of the shuffled epoch saw.

    Attributes:
        counts: how many times each row id came in a minibatch.
        moments: the moments of every ``obs`` row received (for checking the normalisation).
    """

    counts: torch.Tensor
    moments: TensorDict


def shuffled_epoch(
    data: TensorDict, pool: WorkerPool, batch_size: int, label: str = "shuffled epoch"
) -> EpochResult:
    """One epoch of shuffled minibatches, with ``map_iter(shuffle=True)`` as the data loader, on
    the workers of ``pool`` (started by the first epoch, kept for the next ones).

    The loop body stands for a training step: it counts the ids it receives and accumulates the
    moments of the features.
    """
    counts = torch.zeros(data.batch_size[0], dtype=torch.int32)
    moments = None
    # The workers keep the cores busy: a team of torch threads here would wait at every barrier
    # for threads the workers pushed off the CPU (a 1 MiB sum took ~80 ms on 2 cores), so the
    # consumer uses one thread, as a training step next to its data loader would be advised to.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for batch in data.map_iter(
            load_minibatch, chunksize=batch_size, shuffle=True, pbar=label, pool=pool
        ):
            ids = batch["id"]
            counts.index_add_(0, ids, torch.ones_like(ids, dtype=torch.int32))
            moments = add_moments(moments, chunk_moments(batch))
    finally:
        torch.set_num_threads(threads)
    assert moments is not None
    return EpochResult(counts, moments)


def _ordered_features(parts: list[TensorDict]) -> torch.Tensor:
    rows = torch.cat([p["features"] for p in parts])
    ids = torch.cat([p["id"] for p in parts])
    return rows[ids.argsort()]


def features_map_iter(data: TensorDict, workers: int, chunksize: int) -> torch.Tensor:
    """Per-row Python features of every row with ``map_iter`` (ordered by row id)."""
    parts = data.map_iter(
        row_features,
        num_workers=workers,
        chunksize=chunksize,
        pbar="features: map_iter",
        generator=torch.default_generator,
    )
    return _ordered_features(list(parts))


def features_loop(data: TensorDict, chunksize: int) -> torch.Tensor:
    """The same features in this process, chunk after chunk."""
    n = data.batch_size[0]
    return _ordered_features(
        [row_features(data[s : s + chunksize]) for s in range(0, n, chunksize)]
    )


def features_dataloader(data: TensorDict, workers: int, chunksize: int) -> torch.Tensor:
    """The same features with ``torch.utils.data.DataLoader`` over a dataset of chunks."""
    loader = DataLoader(
        ChunkFeatures(data, chunksize),
        batch_size=None,
        num_workers=workers,
        collate_fn=pass_through,
    )
    return _ordered_features(list(loader))
