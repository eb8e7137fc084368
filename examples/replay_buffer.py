"""A TorchRL replay buffer on memory-mapped storage: transitions live in files, sampling reads
only the rows it draws.

    pip install torchrl            # TorchRL declares tensordict<0.15: see README, Install
    python examples/replay_buffer.py
    python examples/replay_buffer.py --capacity 1000 --steps 300

``LazyMemmapStorage`` creates its files (``tensordict.MemoryMappedTensor``) from the first
transitions it sees; ``ReplayBuffer.extend`` writes whole rollouts into them; ``sample`` returns a
``TensorDict`` of ``batch_size`` random transitions. The storage is a tensordict saved in the
upstream layout, so ``TensorDict.load_memmap`` (here or in upstream tensordict) opens it later.
"""

from __future__ import annotations

import argparse
import tempfile

import torch

from tensordict import TensorDict


def rollout(steps: int, start: int) -> TensorDict:
    """``steps`` transitions of a toy environment (the observation counts the steps)."""
    t = torch.arange(start, start + steps, dtype=torch.float32)
    obs = torch.stack([t, t.sin()], -1)
    return TensorDict(
        {
            "observation": obs,
            "action": (t % 2).long(),
            "next": {"observation": obs + 1, "reward": t.cos()[:, None], "done": t[:, None] > 1e9},
        },
        [steps],
    )


def main(argv: list[str] | None = None) -> TensorDict:
    from torchrl.data import LazyMemmapStorage, ReplayBuffer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        storage = LazyMemmapStorage(args.capacity, scratch_dir=folder)
        buffer = ReplayBuffer(storage=storage, batch_size=args.batch_size)
        for start in range(0, args.steps, 100):
            buffer.extend(rollout(min(100, args.steps - start), start))
        batch = buffer.sample()
        print(f"{len(buffer)} transitions stored in {folder}")
        keys = sorted(k if isinstance(k, str) else ".".join(k) for k in batch.keys(True, True))
        print(f"sampled {batch.batch_size[0]} transitions: {keys}")
        # every sampled transition is one that was written: next observation = observation + 1
        assert torch.equal(batch["next", "observation"], batch["observation"] + 1)
        saved = storage._storage
        print(f"storage: {type(saved).__name__}, memory-mapped: {saved.is_memmap()}")
        return batch


if __name__ == "__main__":
    main()
