"""NonTensorData / NonTensorStack as upstream: constructors, the tensordict API, shared/memmap
entries, LinkedList."""

from __future__ import annotations

import pickle

import pytest
import torch

from tensordict import MetaData, NonTensorData, NonTensorStack, TensorDict
from tensordict.core.nontensor.data import LinkedList
from tensordict.errors import LockedError

# ---------------------------------------------------------------------- constructors


def test_stack_takes_items_as_arguments() -> None:
    s = NonTensorStack("a", "b", "c")
    assert s.batch_size == torch.Size([3]) and s.tolist() == ["a", "b", "c"]


def test_a_list_argument_is_one_element() -> None:
    s = NonTensorStack(["a", "b"])
    assert s.batch_size == torch.Size([1]) and s.tolist() == [["a", "b"]]


def test_stack_dim_places_the_new_dimension() -> None:
    s = NonTensorStack(
        NonTensorData("a", batch_size=[3]), NonTensorData("b", batch_size=[3]), stack_dim=1
    )
    assert s.batch_size == torch.Size([3, 2]) and s[0].tolist() == ["a", "b"]


def test_empty_stack() -> None:
    assert NonTensorStack().batch_size == torch.Size([0])


def test_from_list_follows_the_nesting_and_unwraps() -> None:
    s = NonTensorStack.from_list([["a", NonTensorData("b")], ["c", "d"]])
    assert s.batch_size == torch.Size([2, 2]) and s[0, 1].data == "b"


def test_from_nontensordata_and_maybe_to_stack() -> None:
    n = NonTensorData("x", batch_size=[2])
    assert NonTensorStack.from_nontensordata(n).tolist() == ["x", "x"]
    assert n.maybe_to_stack().tolist() == ["x", "x"]
    s = NonTensorStack("a")
    assert s.maybe_to_stack() is s


def test_append_and_extend_grow_the_first_dimension() -> None:
    s = NonTensorStack("a")
    s.append(NonTensorData("b"))
    s.extend(["c", "d"])
    assert s.tolist() == ["a", "b", "c", "d"] and s.batch_size == torch.Size([4])


def test_data_of_a_uniform_stack_and_of_a_mixed_one() -> None:
    assert NonTensorStack("a", "a").data == "a"
    with pytest.raises(AttributeError, match="tolist"):
        _ = NonTensorStack("a", "b").data


# ---------------------------------------------------------------------- the tensordict API


@pytest.mark.parametrize(
    "op, shape",
    [
        (lambda n: n.reshape(6), (6,)),
        (lambda n: n.permute(1, 0), (3, 2)),
        (lambda n: n.flatten(), (6,)),
        (lambda n: n.unbind(0)[0], (3,)),
        (lambda n: n.split(1)[1], (1, 3)),
        (lambda n: n[0], (3,)),
        (lambda n: n.repeat(2, 1), (4, 3)),
    ],
)
def test_non_tensor_data_shape_ops_keep_the_value(op, shape) -> None:  # type: ignore[no-untyped-def]
    out = op(NonTensorData("x", batch_size=[2, 3]))
    assert type(out) is NonTensorData and out.batch_size == shape and out.data == "x"


def test_expand_and_unsqueeze_give_a_stack_except_for_metadata() -> None:
    n = NonTensorData(0, batch_size=[3])
    assert isinstance(n.expand(2, 3), NonTensorStack) and n.expand(2, 3).tolist() == [[0] * 3] * 2
    assert isinstance(n.unsqueeze(0), NonTensorStack)
    m = MetaData(0, batch_size=[3])
    assert type(m.expand(2, 3)) is MetaData and m.unsqueeze(0).batch_size == (1, 3)


def test_stack_shape_ops_move_the_elements_like_tensors() -> None:
    s = NonTensorStack(*"abcdef")
    assert s.view(2, 3).tolist() == [["a", "b", "c"], ["d", "e", "f"]]
    assert s.reshape(3, 2).permute(1, 0).tolist() == [["a", "c", "e"], ["b", "d", "f"]]
    assert s.flip(0).tolist() == list("fedcba")
    assert s.gather(0, torch.tensor([2, 0])).tolist() == ["c", "a"]
    assert s.masked_select(torch.tensor([1, 0, 1, 0, 1, 0]).bool()).tolist() == list("ace")


def test_boolean_mask_on_a_stack() -> None:
    s = NonTensorStack("a", "b", "c")
    assert s[torch.tensor([True, False, True])].tolist() == ["a", "c"]
    assert s[torch.zeros(3, dtype=torch.bool)].batch_size == torch.Size([0])


def test_forwarded_methods_are_listed_by_dir() -> None:
    assert {"reshape", "apply", "memmap_"} <= set(dir(NonTensorData("x")))


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = NonTensorData("x").no_such_method


def test_call_calls_the_stored_function() -> None:
    td = TensorDict(f=lambda x: x + 1)
    assert td.get("f")(1) == 2


# ---------------------------------------------------------------------- updates, lock, storage


def test_update_replaces_the_value_unless_locked() -> None:
    n = NonTensorData("x")
    assert n.update(NonTensorData("y")) is n and n.data == "y"
    n.lock_()
    with pytest.raises(LockedError, match="lock"):
        n.update(NonTensorData("z"))
    n.update_(NonTensorData("z"))
    assert n.data == "z"


def test_update_with_a_stack_says_to_convert_first() -> None:
    with pytest.raises(ValueError, match="maybe_to_stack"):
        NonTensorData("x").update(NonTensorStack("a", "b"))


def test_value_is_not_an_instance_attribute() -> None:
    n = NonTensorData("x")
    assert "data" not in n.__dict__ and n._non_tensordict["data"] == "x"


def test_share_memory_marks_and_locks_entries() -> None:
    td = TensorDict(val=NonTensorData(1)).share_memory_()
    assert td.get("val")._is_shared and td.get("val").is_locked


@pytest.mark.parametrize("value", ["s", [0, "x"], {"k": 1}])
def test_in_place_update_of_a_saved_entry_rewrites_it(tmp_path, value) -> None:  # type: ignore[no-untyped-def]
    td = TensorDict(val=NonTensorData("before")).memmap_(tmp_path)
    entry = td.get("val")
    assert entry._is_memmap and entry._tensordict._is_memmap
    entry.update_(NonTensorData(value))
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True)["val"] == value


def test_saved_metadata_loads_as_metadata(tmp_path) -> None:  # type: ignore[no-untyped-def]
    TensorDict(m=MetaData("x")).memmap(tmp_path)
    assert "MetaData" in (tmp_path / "m" / "meta.json").read_text()
    assert type(TensorDict.load_memmap(tmp_path).get("m")) is MetaData


def test_pickling_keeps_value_and_batch_size() -> None:
    back = pickle.loads(pickle.dumps(NonTensorData("x", batch_size=[2])))
    assert back.data == "x" and back.batch_size == (2,)


# ---------------------------------------------------------------------- LinkedList


def test_getitem_of_a_stack_is_a_linked_list_writing_back() -> None:
    td = TensorDict(a=NonTensorStack("foo", "bar"), batch_size=[2])
    out = td["a"]
    assert isinstance(out, LinkedList) and out._td() is td.get("a")
    out[0] = "baz"
    assert td["a"] == ["baz", "bar"] and repr(td["a"]) == "LinkedList(['baz', 'bar'])"


def test_growing_a_linked_list_detaches_it() -> None:
    td = TensorDict(a=NonTensorStack("foo", "bar"), batch_size=[2])
    out = td["a"]
    out.extend(["x"])
    assert out._td() is None and td["a"] == ["foo", "bar"]


def test_nested_linked_lists_write_back() -> None:
    td = TensorDict(a=NonTensorStack.from_list([["a", "b"], ["c", "d"]]), batch_size=[2, 2])
    td["a"][1][0] = "q"
    assert td.get("a").tolist() == [["a", "b"], ["q", "d"]]


def test_non_tensor_entries_list_no_entries_as_upstream() -> None:
    # generic walkers call values() on every tensor collection (upstream's test helpers too):
    # a non-tensor stack's object array must not shadow the method
    stack = NonTensorStack("a", "b")
    data = NonTensorData("x", batch_size=[2])
    for entry in (stack, data):
        assert list(entry.keys()) == [] and list(entry.values()) == []
        assert list(entry.items()) == [] and list(entry.keys(True, True)) == []
    assert stack.tolist() == ["a", "b"]  # (the objects themselves are still there)


def test_filter_non_tensor_data_clears_tensorclass_non_tensor_fields_as_upstream() -> None:
    from tensordict import tensorclass

    @tensorclass
    class Pair:
        x: torch.Tensor
        label: str

    td = TensorDict(p=Pair(x=torch.zeros(3), label="a", batch_size=[3]), batch_size=[3])
    filtered = td.filter_non_tensor_data()
    assert filtered.get("p").label is None and torch.equal(filtered.get("p").x, torch.zeros(3))
    assert td.get("p").label == "a"  # (the source keeps it)
    assert set((filtered != filtered.clone()).keys(True, True)) == {("p", "x")}


def test_get_reads_the_data_field_and_defaults_elsewhere() -> None:
    # TorchRL's transforms call .get("data") on what may be a NonTensorData (as upstream)
    entry = NonTensorData("abc", batch_size=[2])
    assert entry.get("data") == "abc" and entry.get(("data",)) == "abc"
    assert entry.get("other") is None and entry.get("other", 7) == 7
    assert NonTensorStack("a", "b").get("data", 3) == 3


@pytest.mark.parametrize("values", [["a", "b"], [1, 2], [torch.zeros(1), torch.ones(1)]])
def test_dtype_is_none_for_data_and_stacks(values: list) -> None:
    # TorchRL's NonTensor spec compares a value's dtype with its own (None)
    assert NonTensorStack(*values).dtype is None
    assert NonTensorData(values[0]).dtype is None
    td = TensorDict({"s": NonTensorStack(*values)}, [2])
    assert td.get("s").dtype is None


def test_lazy_stack_of_non_tensor_data_is_a_non_tensor_stack() -> None:
    # TorchRL's NonTensor spec builds its samples with lazy_stack of NonTensorData
    from tensordict import LazyStackedTensorDict, lazy_stack

    members = [NonTensorData("a", batch_size=[3]), NonTensorData("b", batch_size=[3])]
    out = lazy_stack(members)
    assert isinstance(out, NonTensorStack) and out.batch_size == (2, 3)
    assert out.tolist() == [["a"] * 3, ["b"] * 3]
    again = LazyStackedTensorDict.lazy_stack(members, 1)
    assert isinstance(again, NonTensorStack) and again.batch_size == (3, 2)
