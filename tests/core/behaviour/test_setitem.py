"""``td[idx] = value``: in-place writes, preallocation, validation before writing."""

# Some tests spell membership as `key in td.keys()` on purpose (the view under test).
# ruff: noqa: SIM118

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import LockedError, ShapeMismatchError


def make() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(24.0).reshape(4, 3, 2),
            "b": {"c": torch.arange(12).reshape(4, 3)},
            "n": TensorDict({"x": torch.zeros(4, 3, 5)}, [4, 3, 5]),
        },
        [4, 3],
    )


def snapshot(td: TensorDict) -> dict[Any, torch.Tensor]:
    return {k: v.clone() for k, v in td.items(True, True)}


def unchanged(td: TensorDict, before: dict[Any, torch.Tensor]) -> bool:
    now = dict(td.items(True, True))
    return list(now) == list(before) and all(torch.equal(now[k], v) for k, v in before.items())


def test_setitem_tensordict_writes_every_leaf_in_place() -> None:
    td = make()
    a, c = td["a"], td["b", "c"]
    value = TensorDict(
        {
            "a": torch.full((3, 2), -1.0),
            "b": {"c": torch.full((3,), -1)},
            "n": TensorDict({"x": torch.ones(3, 5)}, [3, 5]),
        },
        [3],
    )
    td[1] = value
    assert td["a"] is a and td["b", "c"] is c
    assert (td["a"][1] == -1).all() and (td["b", "c"][1] == -1).all()
    assert (td["n", "x"][1] == 1).all() and td["n", "x"][0].sum() == 0
    assert td["a"][0, 0, 1] == 1


def test_setitem_dict_writes_given_keys_only() -> None:
    td = make()
    td[2] = {"a": torch.zeros(3, 2)}
    assert td["a"][2].sum() == 0 and td["b", "c"][2].tolist() == [6, 7, 8]


def test_setitem_nested_dict() -> None:
    td = make()
    td[0] = {"b": {"c": torch.tensor([7, 7, 7])}}
    assert td["b", "c"][0].tolist() == [7, 7, 7]


def test_setitem_scalar_writes_every_leaf() -> None:
    td = make()
    td[1:3] = 0
    assert td["a"][1:3].sum() == 0 and td["b", "c"][1:3].sum() == 0
    assert td["n", "x"][1:3].sum() == 0
    assert td["a"][3].sum() > 0


def test_setitem_zero_dim_tensor_broadcasts() -> None:
    td = make()
    td[0] = torch.tensor(5)
    assert (td["a"][0] == 5).all() and (td["b", "c"][0] == 5).all()


def test_setitem_value_broadcasts_over_index_batch() -> None:
    td = make()
    td[0:2] = TensorDict({"a": torch.ones(3, 2)}, [3])
    assert (td["a"][0:2] == 1).all()


@pytest.mark.parametrize(
    ("idx", "leaf_idx"),
    [
        (torch.tensor([True, False, True, False]), torch.tensor([True, False, True, False])),
        ([0, 2], torch.tensor([0, 2])),
        (torch.tensor([0, 2]), torch.tensor([0, 2])),
        ((slice(None), 1), (slice(None), 1)),
        ((Ellipsis, 0), (slice(None), 0)),
    ],
)
def test_setitem_with_any_index_matches_tensor_setitem(idx: Any, leaf_idx: Any) -> None:
    td = make()
    expected_a, expected_c = td["a"].clone(), td["b", "c"].clone()
    expected_a[leaf_idx] = -3.0
    expected_c[leaf_idx] = -3
    td[idx] = -3.0
    assert torch.equal(td["a"], expected_a)
    assert torch.equal(td["b", "c"], expected_c)


def test_setitem_on_locked_td_is_allowed() -> None:
    td = make().lock_()
    td[0] = {"a": torch.zeros(3, 2)}
    assert td["a"][0].sum() == 0


def test_setitem_missing_key_preallocates_zeros() -> None:
    td = TensorDict(batch_size=[5])
    td[0] = TensorDict({"x": torch.ones(3), "y": {"z": torch.ones(2, 2)}}, [])
    assert td["x"].shape == torch.Size([5, 3]) and td["x"].dtype == torch.float32
    assert td["x"][0].tolist() == [1.0, 1.0, 1.0] and td["x"][1:].sum() == 0
    assert td["y", "z"].shape == torch.Size([5, 2, 2])
    assert td["y"].batch_size == torch.Size([5])


def test_preallocated_buffer_fills_row_by_row() -> None:
    td = TensorDict(batch_size=[4])
    for i in range(4):
        td[i] = {"obs": torch.full((2,), float(i)), "step": torch.tensor(i)}
    assert td["obs"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert td["step"].tolist() == [0, 1, 2, 3] and td["step"].dtype == torch.int64


def test_preallocation_with_slice_value() -> None:
    td = TensorDict({"a": torch.zeros(6)}, batch_size=[6])
    td[2:4] = TensorDict({"a": torch.ones(2), "new": torch.ones(2, 3)}, [2])
    assert td["new"].shape == torch.Size([6, 3]) and td["new"].sum() == 6


def test_preallocating_on_locked_td_raises_and_writes_nothing() -> None:
    td = make().lock_()
    before = snapshot(td)
    with pytest.raises(LockedError, match="'zz'"):
        td[0] = {"a": torch.ones(3, 2), "zz": torch.ones(3)}
    assert unchanged(td, before)


def test_setitem_wrong_shape_raises_naming_key_and_shapes() -> None:
    td = make()
    with pytest.raises(ShapeMismatchError) as info:
        td[0] = {"b": {"c": torch.zeros(5)}}
    msg = str(info.value)
    assert "('b', 'c')" in msg and "[5]" in msg and "[3]" in msg


def test_failed_setitem_leaves_target_unchanged() -> None:
    td = make()
    before = snapshot(td)
    with pytest.raises(ShapeMismatchError):
        td[0] = {"a": torch.zeros(3, 2), "b": {"c": torch.zeros(5)}}
    assert unchanged(td, before)


def test_failed_setitem_does_not_preallocate_new_keys() -> None:
    td = make()
    with pytest.raises(ShapeMismatchError):
        td[0] = {"new": torch.ones(3), "a": torch.zeros(7)}
    assert "new" not in td.keys()


def test_failed_scalar_setitem_leaves_target_unchanged() -> None:
    td = make()
    before = snapshot(td)
    with pytest.raises(ShapeMismatchError):
        td[0] = torch.zeros(7)
    assert unchanged(td, before)


def test_setitem_with_wrong_batch_size_value_raises() -> None:
    td = make()
    with pytest.raises(ShapeMismatchError, match=r"\[3, 3\]"):
        td[0:2] = TensorDict({"a": torch.ones(3, 3)}, [3])


def test_setitem_python_object_into_tensor_key_raises() -> None:
    td = TensorDict({"x": torch.zeros(3)}, [3])
    with pytest.raises(ShapeMismatchError, match="'x'"):
        td[0] = {"x": "text"}


def test_setitem_out_of_range_raises_index_error() -> None:
    td = make()
    with pytest.raises(IndexError):
        td[9] = 0


def test_setitem_through_view_writes_parent() -> None:
    td = make()
    view = td[1:]
    view[0] = 0
    assert td["a"][1].sum() == 0


def test_setitem_on_lazy_stack_writes_members() -> None:
    a = TensorDict({"x": torch.zeros(3)}, [3])
    b = TensorDict({"x": torch.zeros(3), "y": torch.zeros(3)}, [3])
    ls = LazyStackedTensorDict.lazy_stack([a, b])
    ls[1] = TensorDict({"x": torch.ones(3)}, [3])
    assert b["x"].sum() == 3 and a["x"].sum() == 0


def test_setitem_float_into_integer_leaf_with_advanced_index_casts_all_leaves() -> None:
    td = make()
    td[[0, 2]] = 1.5
    assert td["b", "c"].dtype == torch.int64
    assert td["b", "c"][0].tolist() == [1, 1, 1] and td["a"][0, 0].tolist() == [1.5, 1.5]


def test_a_dict_value_with_nested_keys_writes_the_nested_entries() -> None:
    td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.zeros(3)}}, [3])
    td[1] = {"a": 1.0, ("b", "c"): 2.0}  # was silently ignored for the nested key
    assert td["a"].tolist() == [0, 1, 0] and td["b", "c"].tolist() == [0, 2, 0]


def test_setitem_of_a_new_key_in_a_nested_tensordict_with_extra_batch_dims() -> None:
    td = TensorDict(a=torch.zeros(4, 3), batch_size=[4, 3])
    td["n"] = TensorDict({"x": torch.zeros(4, 3, 2, 5)}, [4, 3, 2])
    value = TensorDict(
        {
            "a": torch.ones(3),
            "n": TensorDict({"x": torch.ones(3, 2, 5), "y": torch.ones(3, 2, 7)}, [3, 2]),
        },
        [3],
    )
    td[0] = value
    assert td["n", "y"].shape == torch.Size([4, 3, 2, 7])
    assert (td["n", "y"][0] == 1).all() and (td["n", "y"][1:] == 0).all()
