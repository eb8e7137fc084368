"""Correct user code: mypy and pyright must accept every line (tests/typing/test_typing.py).

Never run, only type-checked.
"""

from __future__ import annotations

import torch

from tensordict import TensorClass, TensorDict, tensorclass
from tensordict.parallel import WorkerPool


def normalise(chunk: TensorDict) -> TensorDict:
    return chunk.empty().set("obs", chunk["obs"] * 2)


class Sample(TensorClass):
    obs: torch.Tensor
    label: str = "none"


@tensorclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


def main() -> None:
    data = TensorDict({"obs": torch.rand(16, 4)}, batch_size=[16])
    data = data.memmap_("/tmp/typing-sample", num_threads=2)
    for batch in data.map_iter(
        normalise, num_workers=2, chunksize=4, shuffle=True, generator=torch.default_generator
    ):
        print(batch["obs"].shape)
    out = data.memmap_like("/tmp/typing-sample-out")
    data.map(normalise, 0, 2, out=out, chunksize=4, generator=torch.Generator())
    again = TensorDict.load_memmap("/tmp/typing-sample-out")
    print(again.batch_size)
    with WorkerPool(2, generator=torch.Generator()) as pool:
        for _ in data.map_iter(normalise, chunksize=8, pool=pool):
            pass

    sample = Sample(obs=torch.zeros(3, 2), batch_size=[3])
    sample = Sample(torch.zeros(3, 2), "cat", batch_size=[3], device="cpu")
    first: Sample = sample[0]
    size: torch.Size = sample.batch_size
    print(size.numel())
    print(first.label, sample.clone().obs.shape)
    for part in sample.map_iter(normalise, chunksize=1, generator=torch.Generator()):
        print(part)
    sample.memmap_("/tmp/typing-sample-tc")

    pair = Pair(a=torch.zeros(2), b=torch.ones(2))
    print(pair.a + pair.b)
