"""pad / pad_sequence / unpad_sequence / collate."""

# `key in td` may be refused (main): membership goes through td.keys().
# ruff: noqa: SIM118

from __future__ import annotations

from collections import namedtuple
from functools import partial

import pytest
import torch
from torch.utils.data import DataLoader

from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorDict,
    collate,
    pad,
    pad_sequence,
    tensorclass,
    unpad_sequence,
)


@tensorclass
class Sample:
    x: torch.Tensor


def test_pad_grows_batch_dims_from_the_first_one() -> None:
    td = TensorDict(
        a=torch.arange(6.0).reshape(2, 3),
        b=TensorDict(c=torch.ones(2, 3, 1), batch_size=[2, 3]),
        batch_size=[2, 3],
    )
    out = pad(td, [1, 0, 0, 2], value=-1)
    assert out.batch_size == torch.Size([3, 5])
    assert out["b", "c"].shape == torch.Size([3, 5, 1])
    assert torch.equal(out["a"][1:, :3], td["a"])
    assert (out["a"][0] == -1).all() and (out["a"][:, 3:] == -1).all()


def test_pad_inplace_keeps_identity() -> None:
    td = TensorDict(a=torch.ones(2, 3), batch_size=[2])
    out = pad(td, [0, 1], inplace=True)
    assert out is td
    assert td.batch_size == torch.Size([3]) and td["a"].shape == torch.Size([3, 3])


def test_pad_non_tensor_slots_hold_none() -> None:
    td = TensorDict(a=torch.ones(2), batch_size=[2])
    td["s"] = NonTensorStack.from_list(["x", "y"])
    out = pad(td, [1, 0])
    assert out["s"] == [None, "x", "y"]


@pytest.mark.parametrize("pad_size", [[1, 0, 0], [1, 0, 0, 0]])
def test_pad_rejects_odd_or_too_long_sizes(pad_size: list) -> None:
    with pytest.raises(RuntimeError, match="pad_size"):
        pad(TensorDict(a=torch.ones(2), batch_size=[2]), pad_size)


def test_pad_tensorclass_keeps_class() -> None:
    out = pad(Sample(x=torch.ones(2), batch_size=[2]), [0, 1])
    assert isinstance(out, Sample) and out.x.tolist() == [1.0, 1.0, 0.0]


def test_pad_sequence_pads_batch_dim_and_returns_masks() -> None:
    tds = [TensorDict(a=torch.ones(n, 3), batch_size=[n]) for n in (2, 4)]
    out = pad_sequence(tds, return_mask=True)
    assert out.batch_size == torch.Size([2, 4])
    assert out["a"].shape == torch.Size([2, 4, 3])
    assert out["masks", "a"].tolist() == [[True, True, False, False], [True] * 4]
    assert (out["a"][0, 2:] == 0).all()


def test_pad_sequence_left_side_and_per_key_values() -> None:
    tds = [TensorDict(a=torch.ones(n), b=torch.ones(n), batch_size=[n]) for n in (1, 3)]
    out = pad_sequence(tds, padding_value={"a": 5.0}, return_mask="m", padding_side="left")
    assert out["a"][0].tolist() == [5.0, 5.0, 1.0]
    assert out["b"][0].tolist() == [0.0, 0.0, 1.0]
    assert out["m", "a"][0].tolist() == [False, False, True]


def test_pad_sequence_feature_dim_leaves_batch_size() -> None:
    tds = [TensorDict(a=torch.ones(n)) for n in (2, 3)]
    out = pad_sequence(tds, return_mask=True)
    assert out.batch_size == torch.Size([2])
    assert out["a"].shape == torch.Size([2, 3])
    assert out["masks", "a"].tolist() == [[True, True, False], [True] * 3]


def test_pad_sequence_stacks_non_tensor_data_with_none_padding() -> None:
    tds = [TensorDict(a=torch.ones(n), batch_size=[n]) for n in (1, 2)]
    tds[0]["s"] = NonTensorStack.from_list(["x"])
    tds[1]["s"] = NonTensorStack.from_list(["y", "z"])
    out = pad_sequence(tds)
    assert out["s"] == [["x", None], ["y", "z"]]


def test_pad_sequence_errors() -> None:
    with pytest.raises(RuntimeError, match="at least one"):
        pad_sequence([])
    tds = [TensorDict(a=torch.ones(2))]
    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence(tds, padding_side="middle")
    with pytest.raises(KeyError, match="missing"):
        pad_sequence(tds, padding_value={"missing": 1.0})
    bad = [TensorDict(a=torch.ones(2, 3)), TensorDict(a=torch.ones(2, 4))]
    with pytest.raises(RuntimeError, match="differ in shape"):
        pad_sequence(bad)


def test_pad_sequence_out_writes_into_given_tensordict() -> None:
    tds = [TensorDict(a=torch.ones(n)) for n in (1, 2)]
    out = TensorDict(batch_size=[2])
    assert pad_sequence(tds, out=out) is out
    assert out["a"].tolist() == [[1.0, 0.0], [1.0, 1.0]]


def test_unpad_sequence_inverts_pad_sequence() -> None:
    tds = [TensorDict(a=torch.arange(n), b=torch.rand(n, 2)) for n in (2, 3)]
    back = unpad_sequence(pad_sequence(tds, return_mask=True, padding_side="left"))
    assert isinstance(back, LazyStackedTensorDict)
    assert "masks" not in back.keys()
    for original, restored in zip(tds, back.tensordicts):
        assert torch.equal(original["a"], restored["a"])
        assert torch.equal(original["b"], restored["b"])


def test_unpad_sequence_with_a_tensor_mask() -> None:
    padded = TensorDict(a=torch.tensor([[1, 2, 0], [3, 4, 5]]), batch_size=[2])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    back = unpad_sequence(padded, mask, pad_dim=0)
    assert back.tensordicts[0]["a"].tolist() == [1, 2]


def test_unpad_sequence_errors() -> None:
    with pytest.raises(ValueError, match="masks"):
        unpad_sequence(TensorDict(a=torch.zeros(2, 3), batch_size=[2]))
    with pytest.raises(ValueError, match="shape"):
        unpad_sequence(TensorDict(a=torch.zeros(2, 3), batch_size=[2]), torch.ones(3, 3).bool())
    with pytest.raises(ValueError, match="contiguous"):
        unpad_sequence(
            TensorDict(a=torch.zeros(1, 3), batch_size=[1]), torch.tensor([[True, False, True]])
        )


def test_collate_stacks_samples_and_structures() -> None:
    samples = [(TensorDict(x=torch.full((3,), float(i))), i) for i in range(4)]
    td, label = next(iter(DataLoader(samples, batch_size=4, collate_fn=collate)))
    assert td.batch_size == torch.Size([4]) and label.tolist() == [0, 1, 2, 3]
    pair = namedtuple("pair", "td n")
    out = collate([pair(TensorDict(a=torch.zeros(1)), 1), pair(TensorDict(a=torch.ones(1)), 2)])
    assert isinstance(out, pair) and out.n.tolist() == [1, 2]
    assert collate([{"k": torch.zeros(2)}, {"k": torch.ones(2)}])["k"].shape == (2, 2)


def test_collate_ragged_samples_give_a_lazy_stack_and_non_lists_pass_through() -> None:
    clouds = [TensorDict(points=torch.rand(n, 3)) for n in (5, 2)]
    assert isinstance(collate(clouds), LazyStackedTensorDict)
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    assert collate(td) is td


def test_collate_pad_keys_mask_and_nested_keys() -> None:
    samples = [
        TensorDict(ids=torch.ones(n, dtype=torch.long), pts=torch.rand(n + 1, 3), s=torch.tensor(n))
        for n in (2, 3)
    ]
    fn = partial(collate, pad_keys={"ids": 7}, nested_keys=["pts"], mask_key="mask")
    out = fn(samples)
    assert out["ids"].tolist() == [[1, 1, 7], [1, 1, 1]]
    assert out["mask", "ids"].tolist() == [[True, True, False], [True] * 3]
    assert out["pts"].is_nested and out["s"].tolist() == [2, 3]


def test_collate_keyword_errors() -> None:
    samples = [TensorDict(a=torch.ones(2)), TensorDict(a=torch.ones(3))]
    with pytest.raises(ValueError, match="mask_key needs pad_keys"):
        collate(samples, mask_key="m")
    with pytest.raises(ValueError, match="both padded and nested"):
        collate(samples, pad_keys={"a": 0}, nested_keys=["a"])
    with pytest.raises(KeyError, match="no entry"):
        collate(samples, pad_keys={"b": 0})
    batched = [TensorDict(a=torch.ones(2, 1), batch_size=[2])] * 2
    with pytest.raises(ValueError, match="empty batch size"):
        collate(batched, pad_keys={"a": 0})
