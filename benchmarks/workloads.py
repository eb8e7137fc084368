"""The functions the map_iter benchmarks run in worker processes, and the DataLoader dataset.

They live at module level in a module of their own so that ``spawn`` workers (and
``multiprocessing.Pool`` workers) can import them by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict import TensorDict


def reduce_chunk(td: TensorDict) -> TensorDict:
    """The [map] reduce: a row sum, 1 KiB in -> 4 bytes out."""
    return td.empty().set("y", td["x"].sum(-1))


def transform_chunk(td: TensorDict) -> TensorDict:
    """The [map] transform: ``y = 2 * x``, as many bytes out as in."""
    return td.empty().set("y", td["x"] * 2)


def no_collate(item: Any) -> Any:
    """DataLoader ``collate_fn`` that hands an item over as it is (a TensorDict is not a dict)."""
    return item


def plain_loop(td: TensorDict, fn: Callable[[TensorDict], Any], chunksize: int) -> int:
    """The reference: ``fn`` on every chunk in this process, one thread of work. Returns chunks."""
    n = td.batch_size[0]
    count = 0
    for s in range(0, n, chunksize):
        fn(td[s : s + chunksize])
        count += 1
    return count


class ChunkDataset(torch.utils.data.Dataset):
    """A map-style dataset whose item ``i`` is ``fn(td[i * cs:(i + 1) * cs])``.

    Used with ``DataLoader(batch_size=None, collate_fn=no_collate)``, so that the DataLoader's
    workers do exactly what map_iter's workers do: slice a chunk and apply ``fn`` to it.
    """

    def __init__(self, td: TensorDict, fn: Callable[[TensorDict], Any], chunksize: int) -> None:
        self.td = td
        self.fn = fn
        self.chunksize = chunksize
        self.n = td.batch_size[0]

    def __len__(self) -> int:
        return -(-self.n // self.chunksize)

    def __getitem__(self, i: int) -> Any:
        s = i * self.chunksize
        return self.fn(self.td[s : s + self.chunksize])
