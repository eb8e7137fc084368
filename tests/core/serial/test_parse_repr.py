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


def test_compact_scalar_leaf_of_an_unbatched_tensordict_is_read() -> None:
    # (the default repr of TensorDict(a=0), as upstream prints it)
    out = parse_tensor_dict_string("TensorDict(batch_size=[], fields={a: i64[]})")
    assert out.batch_size == torch.Size([])
    assert out["a"].shape == torch.Size([]) and out["a"].dtype == torch.int64


def test_compact_nested_tensordict_with_batch_dims_of_its_own_is_read() -> None:
    out = parse_tensor_dict_string(
        "TensorDict(batch_size=[1], fields={a: i64[2], b: [2]{c: i64[]}})"
    )
    assert out["b"].batch_size == torch.Size([1, 2])
    assert out["b", "c"].shape == torch.Size([1, 2]) and out["a"].shape == torch.Size([1, 2])


def test_compact_default_repr_round_trips_over_lines_and_devices() -> None:
    source: dict = {f"entry_with_a_long_name_{i}": torch.zeros(2, 3) for i in range(6)}
    source["nest"] = TensorDict(x=torch.zeros(2, 4, 1, device="meta"), batch_size=[2, 4])
    td = TensorDict(source, batch_size=[2])
    with set_printoptions(compact=True):
        text = str(td)
        assert "\n" in text and "[4]{x: f32[1]@meta}" in text
        out = parse_tensor_dict_string(text)
        assert str(out) == text
    assert out["nest", "x"].device == torch.device("meta")
    assert out["nest"].batch_size == torch.Size([2, 4])


def test_not_a_repr_raises() -> None:
    with pytest.raises(ValueError, match="repr of a tensordict"):
        parse_tensor_dict_string("hello")
