"""LazyStackedTensorDict: heterogeneous stacks."""

# `key in td` is refused by design: membership tests go through td.keys().
# ruff: noqa: SIM118

from __future__ import annotations

import pytest
import torch

import tensordict
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import ShapeMismatchError


def members() -> tuple[TensorDict, TensorDict]:
    a = TensorDict(
        {"x": torch.zeros(3, 2), "y": torch.zeros(3, 4), "n": {"m": torch.zeros(3)}}, [3]
    )
    b = TensorDict(
        {
            "x": torch.ones(3, 2),
            "y": torch.ones(3, 5),
            "z": torch.ones(3),
            "n": {"m": torch.ones(3)},
        },
        [3],
    )
    return a, b


def hetero() -> LazyStackedTensorDict:
    return LazyStackedTensorDict.lazy_stack(list(members()), 0)


def homo(dim: int = 0) -> LazyStackedTensorDict:
    a = TensorDict({"x": torch.arange(6.0).reshape(3, 2), "n": {"m": torch.arange(3)}}, [3])
    return LazyStackedTensorDict.lazy_stack([a, a + 10], dim)


def test_lazy_stack_batch_size_inserts_stack_dim() -> None:
    assert hetero().batch_size == torch.Size([2, 3])
    assert homo(1).batch_size == torch.Size([3, 2])


def test_tensordict_lazy_stack_classmethod() -> None:
    a, b = members()
    assert isinstance(TensorDict.lazy_stack([a, b]), LazyStackedTensorDict)


def test_lazy_stack_of_identical_members_stays_lazy() -> None:
    a, _ = members()
    assert isinstance(LazyStackedTensorDict.lazy_stack([a, a.clone()]), LazyStackedTensorDict)


def test_maybe_dense_stack_gives_dense_when_members_agree() -> None:
    a, _ = members()
    out = LazyStackedTensorDict.maybe_dense_stack([a, a.clone()])
    assert type(out) is TensorDict and out.batch_size == torch.Size([2, 3])


def test_maybe_dense_stack_gives_lazy_when_keys_differ() -> None:
    out = LazyStackedTensorDict.maybe_dense_stack(list(members()))
    assert isinstance(out, LazyStackedTensorDict)


def test_maybe_dense_stack_gives_lazy_when_leaf_shapes_differ() -> None:
    a = TensorDict({"x": torch.zeros(3, 2)}, [3])
    b = TensorDict({"x": torch.zeros(3, 4)}, [3])
    assert isinstance(LazyStackedTensorDict.maybe_dense_stack([a, b]), LazyStackedTensorDict)


def test_strict_lazy_stack_of_different_batch_sizes_raises_naming_them() -> None:
    a, _ = members()
    with pytest.raises(ShapeMismatchError) as info:
        LazyStackedTensorDict.lazy_stack([a, a[:2]], strict_shape=True)
    assert "[3]" in str(info.value) and "[2]" in str(info.value)
    with pytest.raises(ShapeMismatchError, match="batch sizes in tensordicts differs"):
        LazyStackedTensorDict(a, a[:2], strict_shape=True)


def _ragged() -> LazyStackedTensorDict:
    return LazyStackedTensorDict(
        TensorDict(x=torch.arange(12.0).view(3, 4), batch_size=[3, 4]),
        TensorDict(x=torch.arange(15.0).view(3, 5), batch_size=[3, 5]),
        stack_dim=1,
    )


def test_members_of_different_batch_sizes_show_minus_one_where_they_differ() -> None:
    td = _ragged()
    assert td.is_ragged and td.batch_size == (3, 2, -1)
    assert td[0].batch_size == (2, -1) and td[0].is_ragged
    assert td[:, :, 0].batch_size == (3, 2) and not td[:, :, 0].is_ragged
    # each member bounds the index by its own size: the last two of 4 and of 5
    assert td[:, :, -2:]["x"][0].tolist() == [[2.0, 3.0], [3.0, 4.0]]
    assert td[:, 1] is td.tensordicts[1]
    assert td[..., 1:3].batch_size == (3, 2, 2)


def test_a_ragged_stack_refuses_what_its_members_cannot_share() -> None:
    from tensordict.errors import IndexingError

    td = _ragged()
    with pytest.raises(IndexingError, match="ints and slices on the members' dims"):
        td[:, :, torch.tensor([0, 1])]
    with pytest.raises(ShapeMismatchError, match="index one member"):
        td[:, :, 0] = TensorDict(x=torch.zeros(3, 2), batch_size=[3, 2])
    td[:, 1] = TensorDict(x=torch.zeros(3, 5), batch_size=[3, 5])
    assert (td.tensordicts[1]["x"] == 0).all()
    with pytest.raises(ShapeMismatchError, match="numbers of batch dims"):
        LazyStackedTensorDict(TensorDict(batch_size=[3]), TensorDict(batch_size=[3, 1]))


def test_update_with_update_batch_size_takes_ragged_members_in_place() -> None:
    dest = TensorDict(stack=_ragged())
    inner = dest["stack"]
    three = LazyStackedTensorDict(
        *(TensorDict(x=torch.ones(2, k), batch_size=[2, k]) for k in (1, 2, 3)), stack_dim=1
    )
    dest.update(TensorDict(stack=three), update_batch_size=True)
    assert dest["stack"] is inner and inner.batch_size == (2, 3, -1)


def test_keys_are_the_keys_all_members_share() -> None:
    assert list(hetero().keys()) == ["x", "y", "n"]


def test_keys_work_when_shapes_differ() -> None:
    keys = hetero().keys(include_nested=True, leaves_only=True)
    assert list(keys) == ["x", "y", ("n", "m")]
    assert "y" in keys and "z" not in keys and len(keys) == 3


def test_reading_shared_key_stacks_member_values() -> None:
    ls = hetero()
    a, b = ls.tensordicts
    assert torch.equal(ls["x"], torch.stack([a["x"], b["x"]]))
    assert torch.equal(ls["n", "m"], torch.stack([a["n", "m"], b["n", "m"]]))


def test_reading_key_along_inner_stack_dim() -> None:
    ls = homo(1)
    assert torch.equal(ls["x"], torch.stack([m["x"] for m in ls.tensordicts], 1))


def test_reading_key_with_differing_shapes_raises_naming_key_and_shapes() -> None:
    with pytest.raises(ShapeMismatchError) as info:
        hetero()["y"]
    msg = str(info.value)
    assert "'y'" in msg and "[3, 4]" in msg and "[3, 5]" in msg


def test_reading_key_of_one_member_only_raises_key_error() -> None:
    with pytest.raises(KeyError, match='"z"'):
        hetero()["z"]


def test_int_index_on_stack_dim_returns_member() -> None:
    ls = hetero()
    assert ls[1] is ls.tensordicts[1]
    assert torch.equal(ls[1]["z"], torch.ones(3))


def test_index_on_other_dim_keeps_lazy_stack() -> None:
    out = hetero()[:, 1]
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == torch.Size([2])
    assert torch.equal(out["x"], torch.stack([torch.zeros(2), torch.ones(2)]))


def test_slice_index_on_stack_dim() -> None:
    out = hetero()[1:]
    assert out.batch_size == torch.Size([1, 3]) and "z" in out.keys()


def test_tensor_index_on_stack_dim_reorders_members() -> None:
    out = hetero()[torch.tensor([1, 0])]
    assert out["x"][:, 0, 0].tolist() == [1.0, 0.0]


def test_mask_index_on_stack_dim() -> None:
    out = hetero()[torch.tensor([False, True])]
    assert out.batch_size == torch.Size([1, 3])


def test_index_with_ellipsis_and_none() -> None:
    ls = hetero()
    assert ls[..., 0].batch_size == torch.Size([2])
    assert ls[None].batch_size == torch.Size([1, 2, 3])


def test_index_of_inner_stack_dim() -> None:
    ls = homo(1)
    out = ls[0]
    assert out.batch_size == torch.Size([2])
    assert torch.equal(out["x"], ls["x"][0])


def test_unbind_along_stack_dim_gives_members() -> None:
    ls = hetero()
    assert all(p is m for p, m in zip(ls.unbind(0), ls.tensordicts))


def test_unbind_along_other_dim() -> None:
    parts = hetero().unbind(1)
    assert len(parts) == 3 and parts[0].batch_size == torch.Size([2])


def test_iteration_and_len() -> None:
    ls = hetero()
    assert len(ls) == 2
    assert [type(m) for m in ls] == [TensorDict, TensorDict]


def test_to_tensordict_gives_dense_copy() -> None:
    ls = homo(1)
    out = ls.to_tensordict()
    assert type(out) is TensorDict and out.batch_size == torch.Size([3, 2])
    assert torch.equal(out["x"], ls["x"])
    out["x"].zero_()
    assert ls.tensordicts[0]["x"].sum() > 0


def test_contiguous_gives_dense_copy() -> None:
    assert type(homo().contiguous()) is TensorDict


def test_to_tensordict_with_differing_shapes_raises_naming_shapes() -> None:
    with pytest.raises(ShapeMismatchError) as info:
        hetero().to_tensordict()
    assert "[3, 4]" in str(info.value) and "[3, 5]" in str(info.value)


def test_select_shared_keys_then_densify() -> None:
    out = hetero().select("x", "n").to_tensordict()
    assert list(out.keys()) == ["x", "n"]


def test_exclude_keeps_members_exclusive_keys() -> None:
    out = hetero().exclude("y")
    assert list(out.keys()) == ["x", "n"]
    assert "z" in out[1].keys()


def test_set_key_splits_value_over_members() -> None:
    ls = hetero()
    ls.set("w", torch.arange(6.0).reshape(2, 3))
    assert ls.tensordicts[1]["w"].tolist() == [3.0, 4.0, 5.0]


def test_setitem_on_member_index_writes_member() -> None:
    ls = hetero()
    ls[0] = TensorDict({"x": torch.full((3, 2), 5.0)}, [3])
    assert (ls.tensordicts[0]["x"] == 5).all()


def test_arithmetic_on_lazy_stack_is_memberwise() -> None:
    out = hetero() + 1
    assert isinstance(out, LazyStackedTensorDict)
    assert torch.equal(out[1]["z"], torch.full((3,), 2.0))
    assert out[0]["y"].shape == torch.Size([3, 4])


def test_equality_of_lazy_stacks() -> None:
    ls = hetero()
    assert (ls == ls.clone()).all() is True


def test_zero_writes_into_members() -> None:
    ls = hetero()
    ls.zero_()
    assert ls.tensordicts[1]["y"].sum() == 0 and ls.tensordicts[1]["z"].sum() == 0


def test_clone_is_independent_and_keeps_exclusive_keys() -> None:
    ls = hetero()
    c = ls.clone()
    c[1]["z"].zero_()
    assert ls[1]["z"].sum() == 3


def test_lock_reaches_members() -> None:
    ls = hetero().lock_()
    assert all(m.is_locked for m in ls.tensordicts)
    assert ls[:, 0].is_locked


def test_locked_lazy_stack_refuses_new_keys() -> None:
    with pytest.raises(RuntimeError, match="locked"):
        hetero().lock_().set("w", torch.zeros(2, 3))


def test_dense_ops_through_to_tensordict() -> None:
    ls = homo()
    assert ls.reshape(-1).batch_size == torch.Size([6])
    assert torch.cat([ls, ls], 0).batch_size == torch.Size([4, 3])


def test_failed_setitem_on_lazy_stack_leaves_every_member_unchanged() -> None:
    ls = hetero()
    a, b = ls.tensordicts
    with pytest.raises(ShapeMismatchError, match="'y'"):
        ls[:, 0] = {"x": torch.full((2,), 7.0), "y": torch.full((4,), 7.0)}
    assert a["x"].sum() == 0 and a["y"].sum() == 0 and b["x"].sum() == 6


def test_setitem_across_members_with_stacked_value() -> None:
    ls = hetero()
    value = TensorDict(
        {"x": torch.stack([torch.full((3, 2), 3.0), torch.full((3, 2), 4.0)])}, [2, 3]
    )
    ls[:] = value
    assert (ls.tensordicts[0]["x"] == 3).all() and (ls.tensordicts[1]["x"] == 4).all()


def test_setitem_value_broadcasts_over_members() -> None:
    ls = hetero()
    ls[:] = TensorDict({"x": torch.full((3, 2), 2.0)}, [3])
    assert all((m["x"] == 2).all() for m in ls.tensordicts)


def test_setitem_on_inner_stack_dim() -> None:
    ls = homo(1)
    ls[0] = TensorDict({"x": torch.full((2, 2), -1.0)}, [2])
    assert all((m["x"][0] == -1).all() and (m["x"][1] != -1).all() for m in ls.tensordicts)


def test_failed_setitem_through_nested_lazy_stack_writes_nothing() -> None:
    ls = hetero()
    outer = TensorDict({"ls": ls, "t": torch.zeros(2, 3)}, [2, 3])
    with pytest.raises(ShapeMismatchError):
        outer[0] = {"t": torch.ones(3), "ls": {"x": torch.ones(3, 2), "y": torch.ones(3, 7)}}
    assert outer["t"].sum() == 0 and ls.tensordicts[0]["x"].sum() == 0


def test_linked_list_of_a_non_tensor_stack_is_a_pytree_node() -> None:
    import torch.utils._pytree as pytree

    td = LazyStackedTensorDict(TensorDict({"s": "x"}), TensorDict({"s": "y"}))
    leaves, _ = pytree.tree_flatten(td["s"])
    assert leaves == ["x", "y"]


def test_shape_ops_and_stacking_into_out_never_stack_heterogeneous_leaves() -> None:
    td = hetero()  # members hold "z" with different shapes
    assert td.unsqueeze(0).batch_size == (1, *td.batch_size)
    out = torch.stack([td, td], 0)
    assert torch.stack([td, td], 0, out=out) is out  # (grad mode on: leaves are checked)


def test_exclude_in_place_removes_a_key_from_the_members_holding_it() -> None:
    ls = hetero()
    first = ls.tensordicts[0]
    assert ls.exclude("z", inplace=True) is ls
    assert ls.tensordicts[0] is first and all("z" not in m.keys() for m in ls.tensordicts)


def test_del_removes_a_key_from_the_members_holding_it() -> None:
    # TorchRL's LazyStackedComposite deletes keys only some members hold, or whose shapes differ
    ls = hetero()
    ls.del_("z")  # only the second member holds it
    assert all("z" not in m.keys() for m in ls.tensordicts)
    ls.del_("y")  # shapes [3, 4] and [3, 5]: not readable stacked, still deletable
    assert all("y" not in m.keys() for m in ls.tensordicts)
    with pytest.raises(KeyError, match="not found in any of the stacked"):
        ls.del_("zz")


def test_a_non_key_names_upstreams_sequence_error() -> None:
    # TorchRL's spec tests match upstream's "key should be a Sequence<NestedKey>"
    with pytest.raises(RuntimeError, match="key should be a Sequence<NestedKey>"):
        hetero().get(0)


# ---------------------------------------------------------------------- lazy_stack of tensors
def test_lazy_stack_of_tensors_as_list_padded_or_nested() -> None:
    ts = [torch.zeros(3), torch.ones(2)]
    assert LazyStackedTensorDict.lazy_stack(ts, as_list=True) == ts
    right = tensordict.lazy_stack(ts, as_padded_tensor=True, padding_value=-1.0)
    assert right.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, -1.0]]
    left = TensorDict.lazy_stack(ts, as_padded_tensor=True, padding_side="left")
    assert left.tolist() == [[0.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    nested = tensordict.lazy_stack(ts, as_nested_tensor=True)
    assert nested.is_nested and nested.layout == torch.jagged
    assert [t.tolist() for t in nested.unbind()] == [t.tolist() for t in ts]
    with pytest.raises(
        TypeError, match=r"^as_list, as_padded_tensor and as_nested_tensor are exclusive"
    ):
        tensordict.lazy_stack(ts, as_list=True, as_padded_tensor=True)


def test_entry_class_of_a_ragged_leaf_does_not_stack_it() -> None:
    # TorchRL's _aggregate_end_of_traj walks a lazy stack with entry_class: a leaf the members
    # hold with different shapes is a tensor (the first member's class), as upstream
    a = TensorDict({"b": {"c": torch.zeros(1, 2)}, "r": torch.zeros(1, 2)}, [1, 2])
    b = TensorDict({"b": {"c": torch.zeros(1, 2, 5)}, "r": torch.ones(1, 2)}, [1, 2])
    s = LazyStackedTensorDict.lazy_stack([a, b], 0)
    assert s.entry_class(("b", "c")) is torch.Tensor
    assert s["b"].entry_class("c") is torch.Tensor
    assert s.entry_class("r") is torch.Tensor
    assert s.entry_class("b") is LazyStackedTensorDict
    with pytest.raises(ShapeMismatchError):
        s.get(("b", "c"))  # reading it stacked is still refused
