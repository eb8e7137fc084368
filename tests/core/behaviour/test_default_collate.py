"""torch's DataLoader helpers on tensordict samples: default_collate stacks them (as upstream);
a tensordict is a MutableMapping (as upstream), so DataLoader(batch_size=None) needs an identity
collate_fn to pass the samples through, and fails loudly without one (never an empty loop)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from tensordict import TensorDict


def test_default_collate_stacks_tensordict_samples() -> None:
    samples = [TensorDict(a=torch.full((2,), float(i)), b={"c": torch.ones(3)}) for i in range(3)]
    batch = default_collate(samples)
    assert isinstance(batch, TensorDict) and batch.batch_size == (3,)
    assert torch.equal(batch["a"][:, 0], torch.arange(3.0)) and batch["b", "c"].shape == (3, 3)


class _Samples(Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> TensorDict:
        return TensorDict(a=torch.full((3,), float(i)))


def test_a_dataloader_without_batching_yields_the_tensordicts_with_identity_collate() -> None:
    parts = list(DataLoader(_Samples(), batch_size=None, collate_fn=lambda x: x))
    assert [p["a"].tolist() for p in parts] == [[0.0] * 3, [1.0] * 3]
    batched = next(iter(DataLoader(_Samples(), batch_size=2)))
    assert batched.batch_size == (2,) and torch.equal(batched["a"][1], torch.ones(3))


def test_a_dataloader_without_batching_or_collate_fails_loudly_as_upstream() -> None:
    # torch rebuilds a Mapping sample key by key through iter(): a 0-d tensordict refuses
    # iteration with a TypeError (a StopIteration here used to end the loop: no samples, no error)
    with pytest.raises(TypeError, match="no batch dimension"):
        list(DataLoader(_Samples(), batch_size=None))
