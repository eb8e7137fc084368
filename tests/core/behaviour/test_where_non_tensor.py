"""``where(..., pad=)`` with non-tensor entries, as upstream: they pass through (from either
side), and a nested tensordict holding only non-tensor data needs no counterpart."""

from __future__ import annotations

import torch

from tensordict import NonTensorData, TensorDict


def _td() -> TensorDict:
    return TensorDict(
        a=torch.zeros(4, 3),
        data=NonTensorData("txt", batch_size=[4]),
        n={"s": NonTensorData("y", batch_size=[4])},
        batch_size=[4],
    )


MASK = torch.tensor([True, False, True, False])


def test_where_pad_keeps_non_tensor_entries_of_either_side() -> None:
    td = _td()
    left = td.where(MASK, td.empty(), pad=1)
    assert left.get("data").data == "txt" and left.get(("n", "s")).data == "y"
    assert (left["a"][~MASK] == 1).all() and (left["a"][MASK] == 0).all()
    right = td.empty().where(~MASK, td, pad=1)
    assert right.get("data").data == "txt" and right.get(("n", "s")).data == "y"
    assert (right["a"][~MASK] == 1).all()


def test_where_pad_with_out_fills_it() -> None:
    td = _td()
    out = td.empty()
    assert td.where(MASK, td.empty(), pad=1, out=out) is out
    assert out.get("data").data == "txt" and (out["a"][~MASK] == 1).all()


def test_where_picks_non_tensor_entries_both_sides_hold_element_by_element() -> None:
    node = TensorDict(s=NonTensorData("6", batch_size=[2]), x=torch.zeros(2), batch_size=[2])
    reset = TensorDict(s=NonTensorData("0", batch_size=[2]), x=torch.ones(2), batch_size=[2])
    out = node.where(torch.tensor([False, True]), reset, out=node, pad=0)
    assert out is node and node["s"] == ["0", "6"] and node["x"].tolist() == [1.0, 0.0]
    a = TensorDict(n={"s": NonTensorData("a", batch_size=[2, 3])}, batch_size=[2, 3])
    b = TensorDict(n={"s": NonTensorData("b", batch_size=[2, 3])}, batch_size=[2, 3])
    picked = a.where(torch.tensor([True, False]), b)  # (a condition on the leading dim)
    assert picked["n", "s"] == [["a"] * 3, ["b"] * 3]


def test_where_pad_keeps_stacks_of_different_objects_on_both_sides() -> None:
    from tensordict import NonTensorStack, set_capture_non_tensor_stack

    with set_capture_non_tensor_stack(False):  # (TorchRL's partial reset of a string entry)
        node = TensorDict(
            s=NonTensorStack("6", "7"), x=torch.zeros(2), a=torch.zeros(2), batch_size=[2]
        )
        reset = TensorDict(s=NonTensorStack("0", None), x=torch.ones(2), batch_size=[2])
        node.where(torch.tensor([False, True]), reset, out=node, pad=0)
    assert node["s"] == ["0", "7"] and node["a"].tolist() == [0.0, 0.0]
