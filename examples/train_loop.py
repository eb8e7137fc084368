"""A training loop fed by ``map_iter``: shuffled minibatches of a memory-mapped dataset, prepared
by worker processes that live for the whole training (a persistent ``WorkerPool``).

    python examples/train_loop.py                 # 200,000 rows, 3 epochs
    python examples/train_loop.py --rows 4096 --epochs 2

What it shows:

- ``memmap_`` once: the dataset lives in files, every worker maps them (no copy per worker);
- ``map_iter(..., shuffle=True, pool=pool)``: each minibatch is gathered and augmented in a
  worker while the model trains on the previous one; the pool keeps its workers (and their
  mappings) from epoch to epoch, like DataLoader's ``persistent_workers=True``;
- ``torch.set_num_threads(1)`` in the training process when the workers take the other cores.
"""

from __future__ import annotations

import argparse
import tempfile

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.parallel import WorkerPool


def augment(batch: TensorDict) -> TensorDict:
    """Runs in a worker, once per minibatch: noise on the inputs (a stand-in for decoding,
    cropping, ...). The chunks of a memory-mapped tensordict are locked: build a new one."""
    noisy = batch["x"] + 0.01 * torch.randn_like(batch["x"])
    return TensorDict({"x": noisy, "y": batch["y"]}, batch.batch_size)


def make_dataset(rows: int, folder: str) -> TensorDict:
    """``rows`` samples of a linear problem, memory-mapped under ``folder``."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 16, generator=generator)
    y = x @ torch.linspace(-1, 1, 16) + 0.1 * torch.randn(rows, generator=generator)
    return TensorDict({"x": x, "y": y}, [rows]).memmap_(folder)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the workers take the other cores
    model = nn.Linear(16, 1)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
    with tempfile.TemporaryDirectory() as folder:
        data = make_dataset(args.rows, folder)
        with WorkerPool(args.workers, generator=torch.Generator().manual_seed(1)) as pool:
            for epoch in range(args.epochs):
                total, batches = 0.0, 0
                for batch in data.map_iter(
                    augment, chunksize=args.batch_size, shuffle=True, pool=pool
                ):
                    loss = nn.functional.mse_loss(model(batch["x"]).squeeze(-1), batch["y"])
                    optimiser.zero_grad()
                    loss.backward()
                    optimiser.step()
                    total, batches = total + loss.item(), batches + 1
                print(f"epoch {epoch}: mean loss {total / batches:.4f} over {batches} batches")
    return total / batches


if __name__ == "__main__":
    main()
