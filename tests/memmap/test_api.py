"""The function forms tensordict.save / load / memmap / load_memmap."""

from __future__ import annotations

import torch

import tensordict
from tensordict import TensorDict, tensorclass


@tensorclass
class Pair:
    a: torch.Tensor


def test_save_then_load_round_trips(tmp_path) -> None:
    td = TensorDict(a=torch.arange(3), b={"c": torch.ones(3, 2)}, batch_size=[3])
    saved = tensordict.save(td, tmp_path / "td")
    assert saved.is_memmap() and not td.is_memmap()
    for load in (tensordict.load, tensordict.load_memmap):
        out = load(tmp_path / "td")
        assert (out == td).all() and out.batch_size == td.batch_size


def test_memmap_function_returns_a_locked_memmapped_copy(tmp_path) -> None:
    td = TensorDict(a=torch.arange(3), batch_size=[3])
    out = tensordict.memmap(td, tmp_path / "m")
    assert out.is_memmap() and out.is_locked and out is not td


def test_save_tensorclass_keeps_its_class(tmp_path) -> None:
    tensordict.save(Pair(a=torch.ones(2), batch_size=[2]), tmp_path / "p")
    out = tensordict.load(tmp_path / "p")
    assert isinstance(out, Pair) and out.a.tolist() == [1.0, 1.0]
