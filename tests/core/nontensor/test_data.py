"""NonTensorData and NonTensorStack: python objects stored over a batch."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict
from tensordict.core.options import set_capture_non_tensor_stack
from tensordict.errors import BatchSizeError, ShapeMismatchError


def alternating() -> TensorDict:
    td = TensorDict({"s": "a", "x": torch.arange(10)}, [10])
    td[1::2] = TensorDict({"s": "b"}, [5])
    return td


def test_getitem_returns_the_object() -> None:
    td = TensorDict({"s": "hello"}, [3])
    assert td["s"] == "hello"


def test_get_returns_non_tensor_data() -> None:
    td = TensorDict({"s": "hello"}, [3])
    value = td.get("s")
    assert isinstance(value, NonTensorData) and value.data == "hello"
    assert value.batch_size == torch.Size([3])


def test_non_tensor_data_value_is_broadcast_over_rows() -> None:
    td = TensorDict({"s": "hello", "x": torch.zeros(3)}, [3])
    assert td[0]["s"] == "hello" and td[1:]["s"] == "hello"


def test_number_labels_can_be_wrapped_explicitly() -> None:
    td = TensorDict({"n": NonTensorData(3)}, [2])
    assert td["n"] == 3 and not isinstance(td["n"], torch.Tensor)


def test_set_string_on_existing_td() -> None:
    td = TensorDict(batch_size=[2])
    td["label"] = "cat"
    assert td["label"] == "cat" and td.get("label").batch_size == torch.Size([2])


def test_non_tensor_data_tolist_repeats_over_batch() -> None:
    assert NonTensorData("a", batch_size=[2]).tolist() == ["a", "a"]


def test_writing_different_value_into_part_of_batch_makes_a_stack() -> None:
    td = alternating()
    assert isinstance(td.get("s"), NonTensorStack)
    assert td["s"] == ["a", "b"] * 5


def test_writing_same_value_keeps_non_tensor_data() -> None:
    td = TensorDict({"s": "a"}, [4])
    td[0:2] = TensorDict({"s": "a"}, [2])
    assert isinstance(td.get("s"), NonTensorData)


def test_writing_python_value_at_int_index() -> None:
    td = TensorDict({"s": "a"}, [3])
    td[1] = {"s": "z"}
    assert td["s"] == ["a", "z", "a"]


def test_indexing_a_stack_with_int_gives_the_element() -> None:
    td = alternating()
    assert td[0]["s"] == "a" and td[1]["s"] == "b" and td[-1]["s"] == "b"


def test_indexing_a_stack_with_slice_gives_element_values() -> None:
    assert alternating()[2:5]["s"] == ["a", "b", "a"]


def test_indexing_a_stack_with_tensor_and_mask() -> None:
    td = alternating()
    assert td[torch.tensor([1, 2])]["s"] == ["b", "a"]
    mask = torch.arange(10) < 2
    assert td[mask]["s"] == ["a", "b"]


def test_stacking_rows_with_equal_values_gives_a_stack() -> None:
    td = alternating()
    out = torch.stack([td[0], td[2]])
    assert isinstance(out.get("s"), NonTensorStack) and out["s"] == ["a", "a"]


def test_capture_non_tensor_stack_collapses_equal_values() -> None:
    td = alternating()
    with pytest.warns(DeprecationWarning), set_capture_non_tensor_stack(True):
        out = torch.stack([td[0], td[2]])
    assert isinstance(out.get("s"), NonTensorData) and out["s"] == "a"


def test_stacking_rows_with_different_values_gives_stack() -> None:
    td = alternating()
    out = torch.stack([td[0], td[1]])
    assert isinstance(out.get("s"), NonTensorStack) and out["s"] == ["a", "b"]


def test_lazy_stack_of_different_values_reads_as_list() -> None:
    ls = LazyStackedTensorDict.lazy_stack([TensorDict({"s": "a"}), TensorDict({"s": "b"})])
    assert ls["s"] == ["a", "b"]


def test_cat_of_stacks() -> None:
    td = alternating()
    assert torch.cat([td[:2], td[2:4]])["s"] == ["a", "b", "a", "b"]


def test_stack_follows_shape_ops() -> None:
    td = alternating()
    assert td.reshape(2, 5)["s"] == [["a", "b", "a", "b", "a"], ["b", "a", "b", "a", "b"]]
    assert td.unsqueeze(0).get("s").batch_size == torch.Size([1, 10])


def test_stack_in_two_dims() -> None:
    td = TensorDict({"s": "a"}, [2, 3])
    td[0, 1] = TensorDict({"s": "b"}, [])
    assert td["s"] == [["a", "b", "a"], ["a", "a", "a"]]
    assert td[:, 1]["s"] == ["b", "a"]
    assert td.transpose(0, 1)["s"][1] == ["b", "a"]


def test_clone_of_stack_is_independent() -> None:
    td = alternating()
    c = td.clone()
    c[0] = TensorDict({"s": "z"}, [])
    assert td[0]["s"] == "a" and c[0]["s"] == "z"


def test_filter_non_tensor_data_removes_them_recursively() -> None:
    td = TensorDict({"a": {"s": "x", "t": torch.zeros(())}, "s": "y", "x": torch.zeros(())})
    out = td.filter_non_tensor_data()
    assert list(out.keys(True)) == [("a", "t"), "a", "x"]


def test_filter_non_tensor_data_removes_stacks() -> None:
    assert list(alternating().filter_non_tensor_data().keys()) == ["x"]


def test_equality_of_stacks_is_elementwise() -> None:
    td = alternating()
    other = TensorDict({"s": "a", "x": torch.arange(10)}, [10])
    assert (td == other)["s"].tolist() == [True, False] * 5


def test_writing_python_object_into_tensor_key_raises() -> None:
    td = TensorDict({"x": torch.zeros(3)}, [3])
    with pytest.raises(ShapeMismatchError, match="'x'"):
        td[0] = {"x": "text"}


def test_non_tensor_stack_from_list() -> None:
    td = TensorDict({"s": NonTensorStack.from_list(["a", "b"])}, [2])
    assert td["s"] == ["a", "b"] and td[1]["s"] == "b"


def test_reduction_over_batch_dim_carries_non_tensor_data() -> None:
    td = TensorDict({"a": torch.ones(4, 3), "s": "x"}, [4, 3])
    out = td.sum(dim=0)
    assert out["s"] == "x" and out.get("s").batch_size == torch.Size([3])


def test_apply_with_batch_size_carries_non_tensor_data() -> None:
    td = TensorDict({"a": torch.ones(4, 3), "s": "x"}, [4, 3])
    out = td.apply(lambda t: t[0], batch_size=[3])
    assert out.get("s").batch_size == torch.Size([3])


def test_reduction_with_non_tensor_stack_raises_naming_key() -> None:
    td = alternating()
    with pytest.raises(BatchSizeError) as info:
        td.sum(dim=0)
    assert "'s'" in str(info.value) and "exclude" in str(info.value)


def test_reduction_with_uniform_non_tensor_stack_collapses_it() -> None:
    td = TensorDict({"s": NonTensorStack.from_list(["a", "a"]), "x": torch.ones(2)}, [2])
    assert td.sum(dim=0)["s"] == "a"


def test_a_stack_of_batched_non_tensor_data_gives_its_members_back_as_data() -> None:
    members = [NonTensorData(data="x", batch_size=[4]), NonTensorData(data="y", batch_size=[4])]
    with set_capture_non_tensor_stack(False):
        stack = LazyStackedTensorDict.lazy_stack(members)
    assert isinstance(stack, NonTensorStack) and stack.batch_size == torch.Size([2, 4])
    first = stack[0]
    assert isinstance(first, NonTensorData) and first.batch_size == torch.Size([4])
    assert first.data == "x" and isinstance(stack.tensordicts[1], NonTensorData)
    assert isinstance(stack[:, 0], NonTensorStack) and stack[1, 2].data == "y"
    stack[1, 2] = "w"  # a member whose elements no longer agree is a stack again
    assert isinstance(stack[1], NonTensorStack) and stack[1].tolist() == ["y", "y", "w", "y"]
    rows = NonTensorStack.from_list([["a", "a"], ["b", "b"]])
    assert isinstance(rows[0], NonTensorStack)  # (built from objects, not from data)


def test_unbind_of_a_stack_and_writes_through_a_lazy_stack_give_non_tensor_data() -> None:
    stack = NonTensorStack("1", "2")
    pieces = stack.unbind(0)
    assert all(isinstance(p, NonTensorData) for p in pieces) and pieces[1].data == "2"
    lazy = LazyStackedTensorDict(TensorDict(s="a"), TensorDict(s="b"), stack_dim=0)
    lazy.update_(TensorDict(s=NonTensorStack("p", "q"), batch_size=[2]))
    members = [m.get("s") for m in lazy.tensordicts]
    assert all(isinstance(v, NonTensorData) for v in members) and lazy[1]["s"] == "q"
