"""The free functions of the top-level API that build, combine or split tensordicts."""

# `key in td` may be refused (main): membership goes through td.keys().
# ruff: noqa: SIM118

from __future__ import annotations

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorDict,
    dense_stack_tds,
    from_dict,
    fromkeys,
    group_by,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    lazy_stack,
    make_tensordict,
    maybe_dense_stack,
    merge_tensordicts,
    tensorclass,
)
from tensordict.utils import _zip_strict, isin, remove_duplicates


@tensorclass
class Point:
    x: torch.Tensor


def test_lazy_stack_keeps_members_even_when_they_agree() -> None:
    a, b = TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))
    out = lazy_stack([a, b], 0)
    assert isinstance(out, LazyStackedTensorDict)
    assert out.tensordicts[0] is a and out.tensordicts[1] is b
    out[1]["x"].fill_(5)  # no copy: writes reach the member
    assert (b["x"] == 5).all()


def test_lazy_stack_along_inner_dim_places_the_new_dim() -> None:
    td = TensorDict(x=torch.zeros(3, 4), batch_size=[3])
    out = lazy_stack([td, td], 1)
    assert out.batch_size == torch.Size([3, 2])
    assert out["x"].shape == torch.Size([3, 2, 4])


def test_lazy_stack_of_tensors_is_torch_stack() -> None:
    out = lazy_stack([torch.zeros(2), torch.ones(2)])
    assert torch.equal(out, torch.stack([torch.zeros(2), torch.ones(2)]))


def test_lazy_stack_of_tensorclasses_keeps_the_class() -> None:
    out = lazy_stack([Point(x=torch.zeros(2)), Point(x=torch.ones(2))])
    assert isinstance(out, Point)
    assert out.x.shape == torch.Size([2, 2])


def test_lazy_stack_of_nothing_raises() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        lazy_stack([])


def test_maybe_dense_stack_is_dense_when_shapes_agree_and_lazy_otherwise() -> None:
    same = maybe_dense_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))])
    differ = maybe_dense_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3))])
    assert type(same) is TensorDict and same["x"].shape == torch.Size([2, 2])
    assert isinstance(differ, LazyStackedTensorDict)


def test_dense_stack_tds_of_a_lazy_stack_uses_its_stack_dim() -> None:
    td = TensorDict(x=torch.arange(6.0).reshape(2, 3), batch_size=[2])
    out = dense_stack_tds(lazy_stack([td, td + 1], 1))
    assert type(out) is TensorDict
    assert out.batch_size == torch.Size([2, 2])
    assert torch.equal(out["x"], torch.stack([td["x"], td["x"] + 1], 1))


def test_dense_stack_tds_of_lazy_stacks_stacks_densely() -> None:
    inner = [TensorDict(x=torch.full((2,), float(i))) for i in range(3)]
    members = [lazy_stack(inner, 0), lazy_stack(inner, 0)]
    out = dense_stack_tds(members, 0)
    assert type(out) is TensorDict
    assert out.batch_size == torch.Size([2, 3])
    assert torch.equal(out["x"][1], torch.stack([t["x"] for t in inner]))


def test_make_tensordict_merges_dict_and_kwargs_and_infers_on_request() -> None:
    td = make_tensordict({"a": torch.zeros(3, 4)}, b=torch.ones(3))
    assert td.batch_size == torch.Size([])
    assert sorted(td.keys()) == ["a", "b"]
    assert make_tensordict(a=torch.zeros(3, 4), auto_batch_size=True).batch_size == (3, 4)
    assert make_tensordict({"a": torch.zeros(3, 4)}, batch_size=[3]).batch_size == (3,)


def test_make_tensordict_dict_wins_over_kwargs_on_a_shared_key() -> None:
    td = make_tensordict({"a": torch.ones(1)}, a=torch.zeros(1))
    assert td["a"].item() == 1


def test_from_dict_batch_dims_and_default() -> None:
    d = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
    assert from_dict(d).batch_size == torch.Size([])
    assert from_dict(d, batch_dims=1).batch_size == torch.Size([3])
    assert from_dict(d, batch_size=3).batch_size == torch.Size([3])


def test_fromkeys_sets_every_nested_key() -> None:
    td = fromkeys(["a", ("b", "c")], 1)
    assert td["a"].item() == 1 and td["b", "c"].item() == 1


def test_merge_keeps_first_value_and_adds_new_keys() -> None:
    a, b = TensorDict(a=1, b=2), TensorDict(b=3, c={"d": 4})
    out = merge_tensordicts(a, b)
    assert out["b"].item() == 2 and out["c", "d"].item() == 4
    assert "c" not in a.keys()  # inputs unchanged


def test_merge_callback_receives_existing_then_new() -> None:
    seen = []
    out = merge_tensordicts(
        TensorDict(b=2), TensorDict(b=3), callback_exist=lambda x, y: seen.append((x, y)) or x + y
    )
    assert out["b"].item() == 5
    assert [(int(x), int(y)) for x, y in seen] == [(2, 3)]


def test_merge_callback_mapping_applies_per_key() -> None:
    out = merge_tensordicts(TensorDict(a=1, b=1), TensorDict(a=5, b=5), callback_exist={"a": max})
    assert out["a"].item() == 5 and out["b"].item() == 1


def test_merge_needs_two_tensordicts() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        merge_tensordicts(TensorDict(a=1))


@pytest.mark.parametrize(
    ("dtype", "flags"),
    [
        (torch.float32, (True, False, True, False)),
        (torch.complex64, (False, False, True, False)),
        (torch.int64, (False, True, False, False)),
        (torch.uint8, (False, True, False, False)),
        (torch.bool, (False, False, False, True)),
    ],
)
def test_dtype_predicates_read_the_last_argument(dtype: torch.dtype, flags: tuple) -> None:
    value = torch.zeros(2, dtype=dtype)
    got = tuple(f("key", value) for f in (is_floating, is_integer, is_inexact, is_bool))
    assert got == flags


def test_dtype_predicate_needs_a_value_with_a_dtype() -> None:
    with pytest.raises(TypeError, match="dtype"):
        is_floating("not a tensor")
    with pytest.raises(TypeError, match="no argument"):
        is_floating()


def test_group_by_tensor_entry_groups_rows_in_order() -> None:
    td = TensorDict(uid=torch.tensor([2, 0, 2, 1, 0]), r=torch.arange(5.0), batch_size=[5])
    values, groups = group_by(td, "uid")
    assert values.tolist() == [0, 1, 2]
    assert [g["r"].tolist() for g in groups] == [[1.0, 4.0], [3.0], [0.0, 2.0]]
    assert all(type(g) is TensorDict for g in groups)


def test_group_by_multi_column_entry_compares_rows() -> None:
    key = torch.tensor([[1, 2], [0, 0], [1, 2]])
    td = TensorDict(k=key, v=torch.arange(3), batch_size=[3])
    values, groups = group_by(td, "k")
    assert values.tolist() == [[0, 0], [1, 2]]
    assert [g["v"].tolist() for g in groups] == [[1], [0, 2]]


def test_group_by_non_tensor_entry_gives_a_list_of_values() -> None:
    td = TensorDict(v=torch.arange(3), batch_size=[3])
    td["name"] = NonTensorStack.from_list(["b", "a", "b"])
    values, groups = group_by(td, "name")
    assert values == ["a", "b"]
    assert [g["v"].tolist() for g in groups] == [[1], [0, 2]]


def test_group_by_broadcast_non_tensor_entry_is_one_group() -> None:
    td = TensorDict(v=torch.arange(3), label="same", batch_size=[3])
    values, groups = group_by(td, "label")
    assert values == ["same"] and groups[0]["v"].tolist() == [0, 1, 2]


def test_group_by_errors() -> None:
    with pytest.raises(ValueError, match="batch dimension"):
        group_by(TensorDict(a=torch.zeros(2)), "a")
    with pytest.raises(KeyError):
        group_by(TensorDict(a=torch.zeros(2), batch_size=[2]), "b")


def test_isin_compares_slices_along_dim() -> None:
    td = TensorDict(x=torch.tensor([[1, 2], [3, 4], [1, 2], [5, 6]]), batch_size=[4])
    ref = TensorDict(x=torch.tensor([[1, 2], [5, 6]]), batch_size=[2])
    assert isin(td, ref, "x").tolist() == [True, False, True, True]


def test_isin_errors() -> None:
    td = TensorDict(x=torch.zeros(4), batch_size=[4])
    with pytest.raises(ValueError, match="number of dimensions"):
        isin(td, TensorDict(x=torch.zeros(2, 2), batch_size=[2, 2]), "x")
    with pytest.raises(KeyError, match="Key 'missing' not found"):
        isin(td, td, "missing")
    with pytest.raises(ValueError, match="dimension '1' is invalid"):
        isin(td, td, "x", dim=1)


def test_isin_negative_dim_is_a_batch_dim() -> None:
    td = TensorDict(x=torch.tensor([[1, 2], [3, 4]]), batch_size=[2])
    ref = TensorDict(x=torch.tensor([[3, 4]]), batch_size=[1])
    assert isin(td, ref, "x", dim=-1).tolist() == [False, True]


def test_remove_duplicates_errors_and_negative_dim() -> None:
    td = TensorDict(x=torch.tensor([[1], [1]]), n=TensorDict(batch_size=[2]), batch_size=[2])
    with pytest.raises(KeyError, match="does not exist"):
        remove_duplicates(td, "missing")
    with pytest.raises(KeyError, match="does not point to a tensor"):
        remove_duplicates(td, "n")
    with pytest.raises(ValueError, match="dimension '1' is invalid"):
        remove_duplicates(td, "x", dim=1)
    assert remove_duplicates(td, "x", dim=-1).batch_size == torch.Size([1])


def test_remove_duplicates_keeps_first_and_sorts_by_value() -> None:
    td = TensorDict(x=torch.tensor([7, 1, 7, 3]), y=torch.arange(4), batch_size=[4])
    out, idx = remove_duplicates(td, "x", return_indices=True)
    assert out["x"].tolist() == [1, 3, 7]
    assert out["y"].tolist() == [1, 3, 0]
    assert torch.equal(out["x"][idx], td["x"])


def test_zip_strict_raises_on_unequal_lengths() -> None:
    assert list(_zip_strict([1, 2], "ab")) == [(1, "a"), (2, "b")]
    with pytest.raises(ValueError):
        list(_zip_strict([1, 2], [3]))
