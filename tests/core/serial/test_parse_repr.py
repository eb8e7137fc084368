"""parse_tensor_dict_string rebuilds the printed structure."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, parse_tensor_dict_string, set_printoptions


@pytest.fixture(autouse=True)
def _detailed_repr():
    """These tests pin the detailed form (the compact one is tested in test_compact_repr)."""
    with set_printoptions(compact=False):
        yield


@pytest.mark.parametrize(
    "td",
    [
        TensorDict(a=0),
        TensorDict(a=torch.zeros(1, 2, dtype=torch.int32), batch_size=[1]),
        TensorDict(
            a=torch.zeros(1, 2),
            b=TensorDict(c=torch.ones(1, 2, 3, dtype=torch.bool), batch_size=[1, 2]),
            batch_size=[1],
            device="cpu",
        ),
        TensorDict(a=torch.zeros(2), s="text", batch_size=[2]),
    ],
    ids=["scalar", "batched", "nested-device", "non-tensor"],
)
def test_round_trip_through_the_repr(td: TensorDict) -> None:
    out = parse_tensor_dict_string(str(td))
    assert str(out) == str(td)
    for key, value in td.items(True, True):
        if isinstance(value, torch.Tensor):
            assert out.get(key).shape == value.shape and out.get(key).dtype == value.dtype


def test_compact_layout_is_read() -> None:
    out = parse_tensor_dict_string("TensorDict(batch_size=[3], fields={a: f32[2], b: {c: i64[]}})")
    assert out.batch_size == torch.Size([3])
    assert out["a"].shape == torch.Size([3, 2]) and out["a"].dtype == torch.float32
    assert out["b", "c"].dtype == torch.int64


def test_not_a_repr_raises() -> None:
    with pytest.raises(ValueError, match="repr of a tensordict"):
        parse_tensor_dict_string("hello")
