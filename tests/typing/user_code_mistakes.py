"""User code with mistakes: each line marked ``# error: WORD`` must get a type error from both
mypy and pyright whose message contains WORD, and no other line any (tests/typing/test_typing.py).

Never run, only type-checked.
"""

from __future__ import annotations

import torch

from tensordict import TensorClass, TensorDict


def normalise(chunk: TensorDict) -> TensorDict:
    return chunk


class Sample(TensorClass):
    obs: torch.Tensor


def main() -> None:
    data = TensorDict({"obs": torch.rand(16, 4)}, batch_size=[16])
    data.map_iter(normalise, chunk_size=5)  # error: chunk_size
    data.map(normalise, num_workers="two")  # error: num_workers
    data.map_iter(normalise, chunksize="4")  # error: chunksize
    data.map_iter(normalise, shuffle=0.5)  # error: shuffle
    TensorDict.from_h5("/tmp/x.h5", mod="r")  # error: mod
    Sample(obs=torch.zeros(3), bach_size=[3])  # error: bach_size
    Sample(obs=torch.zeros(3), batch_size=[3]).map_iter(normalise, chunk=1)  # error: chunk
