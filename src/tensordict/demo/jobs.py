"""The functions the demo runs on each chunk, in worker processes.

They live at the top level of an importable module so that any start method can send them to the
workers by name. Each takes a chunk (a tensordict holding some rows of the dataset) and returns a
new tensordict: the chunks of a memory-mapped tensordict are locked views of its files, so keys
cannot be added to them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import torch

from tensordict import TensorDict, TensorDictBase

__all__ = [
    "ChunkFeatures",
    "ChunkMoments",
    "add_moments",
    "chunk_moments",
    "load_minibatch",
    "mean_std",
    "pass_through",
    "normalise_chunk",
    "row_features",
]

#: how many leading features of each row :func:`row_features` looks at
FEATURE_WINDOW = 16


def chunk_moments(chunk: TensorDictBase) -> TensorDict:
    """The row count, per-feature sums and sums of squares of ``chunk["obs"]``.

    The sums are taken in float32 (pairwise, so accurate over a chunk) and returned as float64,
    so that adding many chunks loses nothing.

    Examples:
        >>> m = chunk_moments(TensorDict({"obs": torch.tensor([[1.0, 2.0], [3.0, 4.0]])}, [2]))
        >>> m["count"].item(), m["sum"].tolist(), m["sumsq"].tolist()
        (2.0, [4.0, 6.0], [10.0, 20.0])
    """
    obs = chunk["obs"]
    return TensorDict(
        {
            "count": torch.tensor(float(obs.shape[0]), dtype=torch.float64),
            "sum": obs.sum(0).double(),
            "sumsq": (obs * obs).sum(0).double(),
        },
        [],
    )


def add_moments(total: TensorDict | None, part: TensorDict) -> TensorDict:
    """``total + part`` (``part`` when ``total`` is None): moments of two chunks together."""
    return part if total is None else total + part


def mean_std(moments: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-feature mean and (population) standard deviation from summed moments.

    Examples:
        >>> m = chunk_moments(TensorDict({"obs": torch.tensor([[1.0], [3.0]])}, [2]))
        >>> [t.tolist() for t in mean_std(m)]
        [[2.0], [1.0]]
    """
    n = moments["count"]
    mean = moments["sum"] / n
    var = (moments["sumsq"] / n - mean * mean).clamp_min(0)
    return mean, var.sqrt()


def normalise_chunk(chunk: TensorDictBase, mean: torch.Tensor, std: torch.Tensor) -> TensorDict:
    """The chunk with ``obs`` shifted and scaled to zero mean and unit variance per feature.

    Used through ``functools.partial(normalise_chunk, mean=..., std=...)``, which pickles.
    """
    obs = chunk["obs"]
    obs = (obs - mean.to(obs.dtype)) / std.to(obs.dtype)
    return TensorDict(
        {"obs": obs, "label": chunk["label"], "id": chunk["id"]},
        chunk.batch_size,
    )


def load_minibatch(batch: TensorDictBase) -> TensorDict:
    """What the data loader yields for one minibatch: its features, labels and row ids.

    With ``shuffle=True`` the rows of ``batch`` were gathered from random positions, so they are
    already a copy in the worker's memory; they travel back to the main process as they are.
    """
    return TensorDict(
        {"obs": batch["obs"], "label": batch["label"], "id": batch["id"]},
        batch.batch_size,
    )


def pass_through(sample: Any) -> Any:
    """DataLoader ``collate_fn`` that hands a sample over as it is.

    A tensordict is a ``Mapping`` (as upstream), so DataLoader's default ``batch_size=None``
    conversion would rebuild it key by key and fail; this keeps the sample whole.

    Examples:
        >>> td = TensorDict({"x": torch.zeros(2)}, [2])
        >>> pass_through(td) is td
        True
    """
    return sample


class _ChunkDataset(torch.utils.data.Dataset):
    """A torch ``Dataset`` whose item ``k`` is :attr:`fn` of chunk ``k`` of ``data``.

    Args:
        data: the memory-mapped dataset.
        chunksize: rows per chunk (the last chunk may be shorter).
    """

    fn: Callable[[TensorDictBase], TensorDict]

    def __init__(self, data: TensorDictBase, chunksize: int) -> None:
        self.data = data
        self.chunksize = chunksize

    def __len__(self) -> int:
        return math.ceil(self.data.batch_size[0] / self.chunksize)

    def __getitem__(self, k: int) -> TensorDict:
        if not 0 <= k < len(self):
            raise IndexError(f"chunk {k} out of range for {len(self)} chunks")
        start = k * self.chunksize
        return type(self).fn(self.data[start : start + self.chunksize])


class ChunkMoments(_ChunkDataset):
    """The reduce as a torch ``Dataset``: item ``k`` is :func:`chunk_moments` of chunk ``k``."""

    fn = staticmethod(chunk_moments)


def row_features(chunk: TensorDictBase) -> TensorDict:
    """Features computed in pure Python, row by row (work bound by the CPU, not memory).

    For each row, over its first ``FEATURE_WINDOW`` features: the mean, the range and the
    number of times the values cross their mean; returned with the row ids.

    Examples:
        >>> td = TensorDict({"obs": torch.tensor([[1.0, -1.0] * 8]), "id": torch.tensor([7])}, [1])
        >>> row_features(td)["features"].tolist()
        [[0.0, 2.0, 15.0]]
    """
    out = []
    for row in chunk["obs"][:, :FEATURE_WINDOW].tolist():
        mean = sum(row) / len(row)
        crossings = sum(1 for a, b in itertools.pairwise(row) if (a - mean) * (b - mean) < 0)
        out.append((mean, max(row) - min(row), float(crossings)))
    features = torch.tensor(out, dtype=torch.float64).reshape(-1, 3)
    return TensorDict({"features": features, "id": chunk["id"]}, chunk.batch_size)


class ChunkFeatures(_ChunkDataset):
    """:func:`row_features` as a torch ``Dataset``: item ``k`` is the features of chunk ``k``."""

    fn = staticmethod(row_features)
