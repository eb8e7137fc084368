"""``keys``/``values``/``items`` with ``leaves_only=True`` and non-tensor entries (as upstream:
non-tensor data is a leaf only under ``is_leaf=is_leaf_nontensor``), and our own operations that
must still carry the non-tensor entries."""

from __future__ import annotations

import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    is_leaf_nontensor,
    tensorclass,
)


@tensorclass
class _WithText:
    x: torch.Tensor
    text: str


def _td() -> TensorDict:
    return TensorDict(
        a=torch.zeros(3),
        s=NonTensorData("x", batch_size=[3]),
        n={"b": torch.ones(3), "t": "y"},
        c=_WithText(x=torch.zeros(3), text="z", batch_size=[3]),
        batch_size=[3],
    )


def test_leaves_only_skips_non_tensor_entries_by_default() -> None:
    td = _td()
    assert list(td.keys(True, True)) == ["a", ("n", "b"), ("c", "x")]
    assert [k for k, _ in td.items(True, True)] == ["a", ("n", "b"), ("c", "x")]
    assert all(isinstance(v, torch.Tensor) for v in td.values(True, True))
    assert len(td.keys(True, True)) == 3
    assert list(td.keys(False, True)) == ["a"]


def test_client_loop_over_leaves_only_meets_tensors_only() -> None:
    td = _td()
    for key in td.keys(True, True):
        td[key] = td[key].float() + 1  # fails on a str if a non-tensor entry were listed
    assert td["n", "b"].eq(2).all() and td["s"] == "x"


def test_is_leaf_nontensor_lists_non_tensor_entries() -> None:
    td = _td()
    expected = ["a", "s", ("n", "b"), ("n", "t"), ("c", "x"), ("c", "text")]
    assert list(td.keys(True, True, is_leaf=is_leaf_nontensor)) == expected
    values = dict(td.items(True, True, is_leaf=is_leaf_nontensor))
    assert isinstance(values["s"], NonTensorData) and values["s"].data == "x"
    assert len(list(td.values(True, True, is_leaf=is_leaf_nontensor))) == 6


def test_without_leaves_only_non_tensor_entries_are_listed() -> None:
    keys = list(_td().keys(True, False))
    assert {"s", ("n", "t"), ("c", "text"), "n", "c"} <= set(keys)


def test_membership_of_a_non_tensor_entry_in_a_leaves_view() -> None:
    keys = _td().keys(True, True)
    assert "s" in keys and ("n", "t") in keys and ("c", "text") in keys  # as upstream
    assert ("n", "zz") not in keys


def test_non_tensor_stack_entry_is_left_out_unless_is_leaf_nontensor() -> None:
    td = TensorDict(s=NonTensorStack("a", "b"), batch_size=[2])
    assert list(td.keys(True, True)) == [] and list(td.keys(False, True)) == []
    assert list(td.keys(True, True, is_leaf=is_leaf_nontensor)) == ["s"]


def test_lazy_stack_leaves_only_skips_non_tensor_entries() -> None:
    members = [TensorDict(a=torch.zeros(()), s=f"x{i}") for i in range(2)]
    stack = LazyStackedTensorDict(*members)
    assert list(stack.keys(True, True)) == ["a"]
    assert len(list(stack.values(True, True))) == 1
    assert list(stack.keys(True, True, is_leaf=is_leaf_nontensor)) == ["a", "s"]


def test_our_operations_keep_the_non_tensor_entries() -> None:
    td = _td()
    assert list(td.flatten_keys().keys()) == ["a", "s", "n.b", "n.t", "c.x", "c.text"]
    assert td.clone()["n", "t"] == "y" and td.select("s")["s"] == "x"
    stacked = torch.stack([td, td])
    assert stacked[1, 0]["s"] == "x" and stacked[1, 0]["c"].text == "z"
    assert not TensorDict(s="x").is_empty()


def test_memmap_round_trip_keeps_the_non_tensor_entries(tmp_path) -> None:
    loaded = TensorDict.load_memmap(_td().exclude("c").memmap(tmp_path).saved_path)
    assert loaded["s"] == "x" and loaded["n", "t"] == "y"
    assert list(loaded.keys(True, True)) == ["a", ("n", "b")]


def test_apply_with_is_leaf_nontensor_calls_fn_on_non_tensor_entries_too() -> None:
    td = _td()
    seen: list[str] = []

    def record(x: object, *others: object) -> object:
        seen.append(type(x).__name__)
        return None if isinstance(x, (NonTensorData, NonTensorStack)) else x

    out = td.apply(record, is_leaf=is_leaf_nontensor)
    assert "NonTensorData" in seen and "Tensor" in seen
    # a None result drops the non-tensor entry, as it drops a tensor one
    assert "s" not in out and ("n", "t") not in out.keys(True)
    seen.clear()
    kept = td.apply(record)  # default: tensors only, non-tensor entries carried over
    assert "NonTensorData" not in seen and kept["s"] == "x"
