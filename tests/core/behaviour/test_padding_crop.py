"""pad: negative widths crop (non-tensor entries too), the ``safe`` check runs before anything
changes, non-tensor entries and stacks keep their identity in place; nested tuple keys."""

from __future__ import annotations

import pytest
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict, pad, pad_sequence


def _td() -> TensorDict:
    return TensorDict({"x": torch.arange(3), "s": NonTensorStack("a", "b", "c")}, batch_size=[3])


def test_negative_pad_crops_non_tensor_entries_like_tensors() -> None:
    out = pad(_td(), [-1, 2])
    assert out.batch_size == (4,)
    assert out["x"].tolist() == [1, 2, 0, 0]
    assert out.get("s").tolist() == ["b", "c", None, None]
    assert pad(_td(), [-3, 0]).get("s").tolist() == []


@pytest.mark.parametrize("inplace", [False, True])
def test_safe_refuses_an_over_crop_before_changing_anything(inplace: bool) -> None:
    td = TensorDict({"a": torch.ones(3, 4), "s": NonTensorStack(*"abc")}, [3])
    before_a, before_s = td["a"], td.get("s")
    with pytest.raises(RuntimeError, match=r"Pad \(-2, -2\) on batch dim 0 .*negative output"):
        td.pad([-2, -2], inplace=inplace)
    assert td["a"] is before_a and td.get("s") is before_s
    assert td.batch_size == (3,) and before_s.tolist() == ["a", "b", "c"]


def test_inplace_pad_keeps_non_tensor_stack_identity() -> None:
    td = _td()
    stack = td.get("s")
    assert pad(td, [0, 1], inplace=True) is td
    assert td.get("s") is stack and stack.tolist() == ["a", "b", "c", None]
    assert stack.batch_size == (4,) and stack[3].data is None


def test_pad_a_non_tensor_entry_itself() -> None:
    stack = NonTensorStack("a", "b")
    assert stack.pad([1, 1]).tolist() == [None, "a", "b", None]
    assert pad(stack, [0, 1], inplace=True) is stack
    assert stack.tolist() == ["a", "b", None]
    data = NonTensorData("m", batch_size=[2])
    assert pad(data, [0, 1]).tolist() == ["m", "m", None]
    with pytest.raises(RuntimeError, match="cannot preserve the identity"):
        pad(data, [0, 1], inplace=True)


def test_pad_sequence_mask_under_a_nested_key() -> None:
    tds = [TensorDict({"a": torch.ones(n)}, [n]) for n in (1, 2)]
    out = pad_sequence(tds, return_mask=("m", "n"))
    assert out[("m", "n"), "a"].tolist() == [[True, False], [True, True]]
    out[("m",), ("n", "a")] = torch.zeros(2, 2, dtype=torch.bool)
    assert not out["m", "n", "a"].any()


def test_pad_leaves_unbatched_entries_alone() -> None:
    from tensordict import UnbatchedTensor

    td = TensorDict({"x": torch.zeros(2, 3), "u": UnbatchedTensor(torch.ones(7))}, [2, 3])
    out = pad(td, [0, 1, 1, 1])
    assert out.batch_size == (3, 5) and out["x"].shape == (3, 5)
    assert out.get("u").shape == (7,) and out.get("u").batch_size == (3, 5)
