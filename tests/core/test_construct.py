"""Construction of a TensorDict and its size, device and names properties."""

# Some tests spell membership as `key in td.keys()` on purpose (the view under test).
# ruff: noqa: SIM118

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorDict
from tensordict.errors import BatchSizeError, KeyTypeError


def test_dict_of_tensors_is_stored_without_copy() -> None:
    a = torch.zeros(3, 4)
    td = TensorDict({"a": a}, batch_size=[3])
    assert td["a"] is a


def test_keyword_arguments_are_entries() -> None:
    td = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
    assert list(td.keys()) == ["a", "b"]


def test_source_and_keyword_entries_together_raise_as_upstream() -> None:
    with pytest.raises(ValueError, match="not both"):
        TensorDict({"a": torch.zeros(2)}, [2], b=torch.ones(2))
    with pytest.raises(ValueError, match="not both"):
        TensorDict(a=1, source={"b": 1})
    assert list(TensorDict(None, a=1).keys()) == ["a"]


def test_from_dict_batch_dims_also_bound_nested_tensordicts() -> None:
    data = {
        "a": torch.zeros(3, 4, 5),
        "n": {"b": torch.zeros(3, 4, 5), "m": {"c": torch.zeros(3, 4, 5, 6)}},
    }
    td = TensorDict.from_dict(data, batch_dims=1, auto_batch_size=True)
    assert td.batch_size == (3,) and td["n"].batch_size == (3,) and td["n", "m"].batch_size == (3,)
    td = TensorDict.from_dict(data, batch_dims=2)
    assert td["n", "m"].batch_size == (3, 4)
    td = TensorDict.from_dict(data, auto_batch_size=True)
    assert td.batch_size == (3, 4, 5) and td["n", "m"].batch_size == (3, 4, 5, 6)


def test_nested_dict_becomes_nested_tensordict_with_parent_batch_size() -> None:
    td = TensorDict({"a": {"b": torch.zeros(3, 2)}}, batch_size=[3])
    assert isinstance(td["a"], TensorDict)
    assert td["a"].batch_size == torch.Size([3])
    assert td["a", "b"].shape == torch.Size([3, 2])


def test_tuple_key_in_source_creates_nested_entry() -> None:
    td = TensorDict({("a", "b"): torch.zeros(2)}, [2])
    assert td["a", "b"].shape == torch.Size([2])


@pytest.mark.parametrize(
    ("value", "dtype"),
    [(1, torch.int64), (2.5, torch.float32), (True, torch.bool), (np.float64(1.0), torch.float64)],
)
def test_python_numbers_become_tensors(value: object, dtype: torch.dtype) -> None:
    td = TensorDict({"x": value})
    assert isinstance(td["x"], torch.Tensor)
    assert td["x"].dtype == dtype
    assert td["x"].item() == value


def test_numpy_array_becomes_tensor() -> None:
    td = TensorDict({"x": np.arange(3)}, [3])
    assert torch.equal(td["x"], torch.arange(3))


def test_string_is_stored_as_non_tensor_data() -> None:
    td = TensorDict({"s": "hello"}, [3])
    assert td["s"] == "hello"
    assert isinstance(td.get("s"), NonTensorData)
    assert td.get("s").batch_size == torch.Size([3])


def test_arbitrary_python_object_is_stored_as_non_tensor_data() -> None:
    obj = object()
    td = TensorDict({"o": obj}, [2])
    assert td["o"] is obj


def test_no_batch_size_means_empty_size() -> None:
    td = TensorDict({"a": torch.zeros(3, 4)})
    assert td.batch_size == torch.Size([])


def test_empty_constructor() -> None:
    td = TensorDict()
    assert td.batch_size == torch.Size([]) and len(td.keys()) == 0


@pytest.mark.parametrize("batch_size", [3, [3], (3,), torch.Size([3])])
def test_batch_size_accepts_int_sequence_and_size(batch_size: object) -> None:
    td = TensorDict({"a": torch.zeros(3)}, batch_size=batch_size)  # type: ignore[arg-type]
    assert td.batch_size == torch.Size([3])


def test_leaf_with_wrong_leading_dims_raises_naming_key_shape_and_batch_size() -> None:
    with pytest.raises(BatchSizeError) as info:
        TensorDict({"obs": torch.zeros(3, 2)}, batch_size=[4])
    msg = str(info.value)
    assert "'obs'" in msg and "[3, 2]" in msg and "[4]" in msg


def test_leaf_with_too_few_dims_raises() -> None:
    with pytest.raises(BatchSizeError, match="'x'"):
        TensorDict({"x": 1}, batch_size=[3])


def test_nested_tensordict_with_wrong_batch_size_raises() -> None:
    with pytest.raises(BatchSizeError, match="'b'"):
        TensorDict({"b": TensorDict({"c": torch.zeros(2)}, [2])}, [3])


def test_batch_size_error_is_a_runtime_error_and_value_error() -> None:
    with pytest.raises(RuntimeError):
        TensorDict({"a": torch.zeros(3)}, batch_size=[4])
    with pytest.raises(ValueError):
        TensorDict({"a": torch.zeros(3)}, batch_size=[4])


@pytest.mark.parametrize("bad", ["abc", [1.5, "x"], [-1], -2])
def test_invalid_batch_size_raises(bad: object) -> None:
    with pytest.raises(BatchSizeError, match="batch_size"):
        TensorDict({}, batch_size=bad)  # type: ignore[arg-type]


def test_non_string_key_raises_key_type_error() -> None:
    with pytest.raises(KeyTypeError, match="int"):
        TensorDict({1: torch.zeros(3)}, batch_size=[3])  # type: ignore[dict-item]


def test_non_mapping_source_raises_type_error() -> None:
    with pytest.raises(TypeError, match="dict"):
        TensorDict([torch.zeros(3)])  # type: ignore[arg-type]


def test_tensordict_source_is_copied_shallowly() -> None:
    src = TensorDict({"a": torch.zeros(2)}, [2])
    td = TensorDict(src, batch_size=[2])
    td["b"] = torch.ones(2)
    assert "b" not in src.keys()
    assert td["a"] is src["a"]


def test_lock_argument_locks() -> None:
    assert TensorDict({"a": torch.zeros(2)}, [2], lock=True).is_locked


# ---------------------------------------------------------------------- batch size property
def test_shape_is_batch_size() -> None:
    td = TensorDict({"a": torch.zeros(3, 4, 5)}, [3, 4])
    assert td.shape == td.batch_size == torch.Size([3, 4])


def test_ndim_and_batch_dims() -> None:
    td = TensorDict({"a": torch.zeros(3, 4, 5)}, [3, 4])
    assert td.ndim == 2 and td.batch_dims == 2 and td.dim() == 2


def test_numel_is_product_of_batch_size() -> None:
    assert TensorDict({}, [3, 4]).numel() == 12
    assert TensorDict({}, []).numel() == 1


def test_len_is_first_batch_dim() -> None:
    assert len(TensorDict({}, [5, 2])) == 5
    assert len(TensorDict({}, [])) == 0


def test_size_with_dim() -> None:
    td = TensorDict({}, [5, 2])
    assert td.size() == torch.Size([5, 2]) and td.size(1) == 2


def test_batch_size_setter_shrinks() -> None:
    td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    td.batch_size = [3]
    assert td.batch_size == torch.Size([3])
    assert td["a"].shape == torch.Size([3, 4])


def test_batch_size_setter_grows_when_leaves_allow() -> None:
    td = TensorDict({"a": torch.zeros(3, 4)}, [3])
    td.batch_size = [3, 4]
    assert td.batch_size == torch.Size([3, 4])


def test_batch_size_setter_grows_nested_tensordicts() -> None:
    td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}, [3])
    td.batch_size = [3, 4]
    assert td["b"].batch_size == torch.Size([3, 4])


def test_batch_size_setter_rejects_size_that_does_not_fit_and_leaves_it_unchanged() -> None:
    td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 5)}}, [3])
    with pytest.raises(BatchSizeError) as info:
        td.batch_size = [3, 4]
    assert "b has shape" in str(info.value) and "[3, 4]" in str(info.value)
    assert td.batch_size == torch.Size([3])
    assert td["b"].batch_size == torch.Size([3])


def test_batch_size_setter_updates_non_tensor_data() -> None:
    td = TensorDict({"a": torch.zeros(3, 4), "s": "x"}, [3])
    td.batch_size = [3, 4]
    assert td.get("s").batch_size == torch.Size([3, 4])


def test_auto_batch_size_uses_common_prefix() -> None:
    td = TensorDict({"a": torch.zeros(3, 4, 5), "b": {"c": torch.zeros(3, 4)}})
    assert td.auto_batch_size_().batch_size == torch.Size([3, 4])


def test_auto_batch_size_with_batch_dims_limit() -> None:
    td = TensorDict({"a": torch.zeros(3, 4, 5)})
    assert td.auto_batch_size_(batch_dims=1).batch_size == torch.Size([3])


def test_auto_batch_size_returns_self() -> None:
    td = TensorDict({"a": torch.zeros(3)})
    assert td.auto_batch_size_() is td


# ---------------------------------------------------------------------- device
def test_device_is_none_by_default() -> None:
    assert TensorDict({"a": torch.zeros(2)}, [2]).device is None


def test_device_argument_sets_device_of_td_and_leaves() -> None:
    td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, [2], device="cpu")
    assert td.device == torch.device("cpu")
    assert td["b"].device == torch.device("cpu")
    assert td["a"].device == torch.device("cpu")


def test_device_argument_casts_leaves() -> None:
    td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, [2], device="meta")
    assert td["a"].device.type == "meta" and td["b", "c"].device.type == "meta"
    assert td["b"].device == torch.device("meta")


def test_set_on_td_with_device_casts_value() -> None:
    td = TensorDict({}, [2], device="meta")
    td["x"] = torch.zeros(2)
    assert td["x"].device.type == "meta"


def test_device_is_none_when_leaves_sit_on_several_devices() -> None:
    td = TensorDict({"a": torch.zeros(2), "m": torch.zeros(2, device="meta")}, [2])
    assert td.device is None


def test_to_device_moves_leaves() -> None:
    td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, [2]).to("meta")
    assert td.device == torch.device("meta") and td["b", "c"].device.type == "meta"


def test_device_cannot_be_assigned() -> None:
    td = TensorDict({}, [])
    with pytest.raises(RuntimeError, match="to\\(device\\)"):
        td.device = "cpu"  # type: ignore[misc]


def test_clear_device_forgets_device() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    assert td.clear_device_().device is None


# ---------------------------------------------------------------------- names
def test_names_default_to_none_per_dim() -> None:
    assert TensorDict({}, [3, 4]).names == [None, None]


def test_names_argument() -> None:
    assert TensorDict({}, [3, 4], names=["x", "y"]).names == ["x", "y"]


def test_names_setter() -> None:
    td = TensorDict({}, [3, 4])
    td.names = ["x", None]
    assert td.names == ["x", None]


def test_names_of_wrong_length_raise_naming_batch_size() -> None:
    with pytest.raises(BatchSizeError, match=r"\[3, 4\]"):
        TensorDict({}, [3, 4], names=["x"])


def test_duplicate_names_raise() -> None:
    with pytest.raises(ValueError, match="unique"):
        TensorDict({}, [3, 4], names=["x", "x"])


def test_names_reach_nested_tensordicts() -> None:
    td = TensorDict({"a": {"b": torch.zeros(3, 4, 2)}}, [3, 4], names=["x", "y"])
    assert td["a"].names == ["x", "y"]


def test_refine_names_with_ellipsis() -> None:
    td = TensorDict({}, [3, 4, 5]).refine_names(..., "z")
    assert td.names == [None, None, "z"]


def test_auto_batch_size_counts_batched_non_tensor_entries_as_upstream() -> None:
    td = TensorDict(a=torch.zeros(3, 2), b=NonTensorData("x", batch_size=[3]))
    assert td.auto_batch_size_().batch_size == (3,)
    td = TensorDict(a=torch.zeros(3, 2), b="x")  # (an unbatched one does not restrict)
    assert td.auto_batch_size_().batch_size == (3, 2)
    only = TensorDict(n={"s": NonTensorData("x", batch_size=[4, 3])}, batch_size=[])
    assert only.auto_batch_size_().batch_size == (4, 3)  # (it was [])


def test_new_unsafe_takes_the_entries_as_keywords_and_the_batch_size_as_a_list() -> None:
    a = torch.zeros(3, 2)
    td = TensorDict._new_unsafe(a=a, batch_size=[3])
    assert td["a"] is a and td.batch_size == torch.Size([3]) and type(td) is TensorDict
    nested = TensorDict._new_unsafe({"n": {"b": a}}, torch.Size([3]), nested=False)
    assert type(nested._tensordict["n"]) is dict  # (nested=False: kept as given)
