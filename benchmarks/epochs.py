"""Shuffled epochs over a memory-mapped tensordict: persistent workers vs a pool per epoch.

Run: ``python -m benchmarks.epochs`` (or through ``python -m benchmarks.run``).

Setting (issue [perf-2]): 2 workers, a 64 MiB memory-mapped TensorDict of 1 KiB rows, shuffled
epochs of 1,024-row chunks, each chunk reduced (``reduce_chunk``), 20 epochs. Contenders, run in
turn ``repeat`` times, each sample is the mean epoch time of its ``epochs`` epochs, including
starting its workers (as a user's training run does):

- ``persistent pool``: ``with WorkerPool(2) as pool: td.map_iter(fn, pool=pool, shuffle=True)``;
- ``fresh pool per epoch``: ``td.map_iter(fn, num_workers=2, shuffle=True)`` every epoch;
- ``DataLoader persistent``: ``DataLoader(persistent_workers=True, num_workers=2)`` whose items are
  the same shuffled 1,024-row chunks (``BatchSampler(RandomSampler)``, ``fn(td[indices])``).

Targets: persistent pool <= 0.6x the fresh pool per epoch, and <= DataLoader persistent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from benchmarks.data import ROW_BYTES, dataset
from benchmarks.map_iter import Row, _drain, _row
from benchmarks.timing import interleaved, pair_ratios
from benchmarks.workloads import IndexDataset, no_collate, reduce_chunk
from tensordict import TensorDict
from tensordict.parallel import WorkerPool
from tensordict.sizes import format_bytes

WORKERS = 2
CHUNK = 1024
MIB = 1 << 20


def _persistent(td: TensorDict, epochs: int) -> Callable[[], int]:
    def run() -> int:
        with WorkerPool(WORKERS, generator=torch.Generator()) as pool:
            return sum(
                _drain(td.map_iter(reduce_chunk, chunksize=CHUNK, shuffle=True, pool=pool))
                for _ in range(epochs)
            )

    return run


def _fresh(td: TensorDict, epochs: int) -> Callable[[], int]:
    kw = {"num_workers": WORKERS, "chunksize": CHUNK, "shuffle": True}
    return lambda: sum(
        _drain(td.map_iter(reduce_chunk, generator=torch.Generator(), **kw)) for _ in range(epochs)
    )


def _dataloader(td: TensorDict, epochs: int) -> Callable[[], int]:
    def run() -> int:
        sampler = BatchSampler(RandomSampler(range(td.batch_size[0])), CHUNK, drop_last=False)
        loader = DataLoader(
            IndexDataset(td, reduce_chunk),
            sampler=sampler,
            batch_size=None,
            num_workers=WORKERS,
            persistent_workers=True,
            collate_fn=no_collate,
        )
        try:
            return sum(_drain(iter(loader)) for _ in range(epochs))
        finally:
            del loader  # stops its persistent workers

    return run


def run(size: int = 64 * MIB, epochs: int = 20, repeat: int = 3) -> dict[str, Any]:
    """Mean epoch seconds of each contender; ``{"rows": [...], "setting": {...}}``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        td, _ = dataset(size)
        td = td[: size // ROW_BYTES]
        contenders = {
            "persistent pool": _persistent(td, epochs),
            "fresh pool per epoch": _fresh(td, epochs),
            "DataLoader persistent": _dataloader(td, epochs),
        }
        samples = interleaved(contenders, repeat=repeat)
    finally:
        torch.set_num_threads(threads)
    label = f"epochs {format_bytes(size)} shuffled x {CHUNK:,} rows, {epochs} epochs"
    ours = samples["persistent pool"]
    rows: list[Row] = []
    for name, seconds in samples.items():
        ratios = {}
        if name == "persistent pool":
            ratios = {
                "fresh pool": pair_ratios(ours, samples["fresh pool per epoch"]),
                "DataLoader": pair_ratios(ours, samples["DataLoader persistent"]),
            }
        reference = ""
        if name == "persistent pool":
            reference = "target <= 0.6x fresh pool, <= DataLoader persistent (ratios: time)"
        per_epoch = [s / epochs for s in seconds]
        rows.append(_row(f"{label}: {name} (mean epoch)", per_epoch, "s", reference, ratios=ratios))
    setting = {"bytes": size, "chunk_rows": CHUNK, "epochs": epochs, "workers": WORKERS}
    return {"setting": setting, "rows": rows}


def main() -> None:
    from benchmarks.report import format_rows

    print(format_rows(run()["rows"]))


if __name__ == "__main__":
    main()
