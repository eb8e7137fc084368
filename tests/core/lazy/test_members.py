"""Members of a lazy stack: construction, append/insert/extend, empty stacks, to_tensordict."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict
from tensordict.errors import (
    DeviceMismatchError,
    LockedError,
    NotATensorDictError,
    ShapeMismatchError,
)


def member(value: float, n: int = 4) -> TensorDict:
    return TensorDict({"a": torch.full((n,), value)}, [n])


def test_varargs_constructor_with_stack_dim_keyword() -> None:
    td = LazyStackedTensorDict(member(0), member(1), stack_dim=1)
    assert td.batch_size == torch.Size([4, 2]) and td.stack_dim == 1


def test_empty_stack_takes_the_members_batch_size_and_device() -> None:
    assert LazyStackedTensorDict(stack_dim=0).batch_size == torch.Size([0])
    td = LazyStackedTensorDict(stack_dim=1, batch_size=[1, 2], device="cpu")
    assert td.batch_size == torch.Size([1, 0, 2]) and td.device == torch.device("cpu")
    assert list(td.keys()) == []


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_append_adds_a_member_at_the_end(stack_dim: int) -> None:
    td = LazyStackedTensorDict(member(0), member(0), stack_dim=stack_dim)
    new = TensorDict({"a": torch.ones(4), "extra": torch.ones(4)}, [4])
    td.append(new)
    assert td.tensordicts[-1] is new
    assert td.batch_size[stack_dim] == 3 and list(td.keys()) == ["a"]
    assert (td["a"].select(stack_dim, 2) == 1).all()


@pytest.mark.parametrize("index", [0, 1])
def test_insert_adds_a_member_before_the_index(index: int) -> None:
    td = LazyStackedTensorDict(member(0), member(0))
    new = member(1)
    td.insert(index, new)
    assert td.tensordicts[index] is new and (td["a"][index] == 1).all()


def test_extend_appends_every_member() -> None:
    td = LazyStackedTensorDict(member(0))
    td.extend([member(1), member(2)])
    assert td["a"][:, 0].tolist() == [0, 1, 2]


def test_extend_checks_every_member_before_adding_any() -> None:
    td = LazyStackedTensorDict(member(0))
    with pytest.raises(ShapeMismatchError):
        td.extend([member(1), member(2, n=3)])
    assert len(td.tensordicts) == 1


def test_append_of_a_tensor_raises_type_error() -> None:
    td = LazyStackedTensorDict(member(0))
    with pytest.raises(NotATensorDictError, match="Expected new value to be TensorDictBase"):
        td.append(torch.zeros(4))  # type: ignore[arg-type]


def test_append_of_another_batch_size_raises_value_error() -> None:
    td = LazyStackedTensorDict(member(0))
    with pytest.raises(ValueError, match="Batch sizes in tensordicts differs"):
        td.append(member(0, n=17))


def test_append_on_another_device_raises() -> None:
    td = LazyStackedTensorDict(member(0).to("meta"))
    with pytest.raises(DeviceMismatchError, match="Devices differ"):
        td.append(member(0))


def test_append_to_a_locked_stack_raises() -> None:
    td = LazyStackedTensorDict(member(0)).lock_()
    with pytest.raises(LockedError):
        td.append(member(1))


def test_append_to_an_empty_stack() -> None:
    td = LazyStackedTensorDict(stack_dim=0, batch_size=[4])
    td.append(member(3))
    assert td.batch_size == torch.Size([1, 4]) and (td["a"] == 3).all()


def test_constructor_of_a_non_tensordict_raises() -> None:
    with pytest.raises(NotATensorDictError):
        LazyStackedTensorDict(member(0), {"a": torch.zeros(4)})  # type: ignore[arg-type]


def test_to_tensordict_keeps_the_shared_keys() -> None:
    a = TensorDict({"x": torch.zeros(3), "only_a": torch.zeros(1)})
    b = TensorDict({"x": torch.ones(3), "only_b": torch.zeros(1)})
    out = LazyStackedTensorDict(a, b).to_tensordict()
    assert type(out) is TensorDict and list(out.keys()) == ["x"]


def test_to_tensordict_makes_nested_lazy_stacks_dense() -> None:
    inner = LazyStackedTensorDict(member(0), member(1))
    outer = LazyStackedTensorDict(inner, inner.clone())
    assert type(outer.to_tensordict()) is TensorDict
    holder = TensorDict({"lazy": inner}, [2])
    assert type(holder.to_tensordict()["lazy"]) is TensorDict
    assert type(holder.clone()["lazy"]) is LazyStackedTensorDict


def test_to_tensordict_of_ragged_members_raises_upstream_wording() -> None:
    td = LazyStackedTensorDict(member(0, 3), member(0, 3))
    td.tensordicts[1].set("r", torch.zeros(3, 2))
    td.tensordicts[0].set("r", torch.zeros(3, 5))
    with pytest.raises(RuntimeError, match="Failed to stack tensors within a tensordict"):
        td.to_tensordict()


def test_deprecated_accessors_warn() -> None:
    td = LazyStackedTensorDict(member(0), member(1))
    with pytest.deprecated_call():
        assert list(td.valid_keys) == ["a"]
    with pytest.deprecated_call():
        assert td.hook_in is None
    with pytest.deprecated_call():
        assert td.hook_out is None


# ---------------------------------------------------------------- member-wise updates
def ragged_pair() -> LazyStackedTensorDict:
    return LazyStackedTensorDict(
        TensorDict({"a": torch.zeros(3, 4)}, [3]), TensorDict({"a": torch.zeros(3, 5)}, [3])
    )


def test_update_from_a_lazy_stack_goes_member_by_member() -> None:
    td = ragged_pair()
    other = ragged_pair().apply(lambda x: x + 1)
    td.update(other)
    assert [float(m["a"].sum()) for m in td.tensordicts] == [12, 15]
    td.update_(other.apply(lambda x: x + 1))
    assert [float(m["a"].sum()) for m in td.tensordicts] == [24, 30]


def test_update_of_a_dense_entry_with_a_lazy_stack_merges_member_by_member() -> None:
    source = TensorDict({"parent": ragged_pair().apply(lambda x: x + 1)}, [2])
    dest = TensorDict({"parent": {"a": torch.zeros(2, 3, 4), "keep": torch.zeros(2, 3)}}, [2])
    dest.update(source)
    parent = dest["parent"]
    assert isinstance(parent, LazyStackedTensorDict)
    assert parent.tensordicts[1]["a"].shape == torch.Size([3, 5])
    assert (parent["keep"] == 0).all()  # entries the update does not name are kept


def test_update_with_update_batch_size_takes_the_new_members() -> None:
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4]).to_lazystack(0)
    td.update(TensorDict(a=torch.ones(2, 4), batch_size=[2, 4]), update_batch_size=True)
    assert td.batch_size == torch.Size([2, 4]) and (td["a"] == 1).all()


def test_membership_of_members_and_keys() -> None:
    a = member(0)
    td = LazyStackedTensorDict(a, a)
    assert a in td and a.clone() not in td
    assert "a" in td and "missing" not in td


def test_to_lazystack_swaps_the_stack_dim() -> None:
    td = LazyStackedTensorDict(member(0, 3), member(1, 3), stack_dim=1)
    assert td.to_lazystack(1) is td
    swapped = td.to_lazystack(0)
    assert len(swapped.tensordicts) == 3 and (swapped["a"] == td["a"]).all()
    assert len(TensorDict(a=torch.zeros(2, 5), batch_size=[2, 5]).to_lazystack(-1).tensordicts) == 5


def test_keys_of_a_lazy_stack_of_ragged_lazy_stacks() -> None:
    inner = LazyStackedTensorDict(
        TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})
    )
    outer = LazyStackedTensorDict(inner, inner.clone())
    assert list(outer.keys(True, True)) == ["a"]
    assert (outer + 1 == outer.apply(lambda x: x + 1)).all()


# ---------------------------------------------------------------- best-intention stacking
def test_maybe_dense_stack_keeps_dense_top_with_lazy_nested() -> None:
    a = TensorDict({"x": torch.zeros(()), "n": {"c": torch.zeros(())}})
    b = TensorDict({"x": torch.ones(()), "n": {"d": torch.ones(())}})
    out = LazyStackedTensorDict.maybe_dense_stack([a, b])
    assert type(out) is TensorDict and isinstance(out["n"], LazyStackedTensorDict)
    assert out["x"].tolist() == [0, 1]


def test_maybe_dense_stack_of_lazy_stacks_with_other_keys_stays_lazy_per_member() -> None:
    a = LazyStackedTensorDict(TensorDict(x=torch.zeros(2)), TensorDict(x=torch.zeros(3)))
    b = a.clone()
    dense_members = TensorDict.maybe_dense_stack([a, b])
    assert all(type(m) is TensorDict for m in dense_members.tensordicts)
    del a.tensordicts[0]["x"]
    a.tensordicts[0]["y"] = torch.zeros(2)
    lazy_members = TensorDict.maybe_dense_stack([a, b])
    assert all(isinstance(m, LazyStackedTensorDict) for m in lazy_members.tensordicts)


def test_expand_of_a_tensordict_holding_a_ragged_lazy_stack() -> None:
    inner = LazyStackedTensorDict(TensorDict(h=torch.zeros(2)), TensorDict(h=torch.zeros(3)))
    outer = TensorDict({"lazy": inner, "dense": torch.zeros(2)}, []).expand(4)
    lazy = outer["lazy"]
    assert isinstance(lazy, LazyStackedTensorDict) and lazy.batch_size == torch.Size([4, 2])
    assert lazy.stack_dim == 1 and type(lazy[..., 0]) is TensorDict
    assert lazy[..., 1]["h"].shape == torch.Size([4, 3])


def test_where_on_a_lazy_stack_splits_the_condition_along_the_stack_dim() -> None:
    td = LazyStackedTensorDict(member(1, 3), member(2, 3), stack_dim=1)
    mask = torch.tensor([[True, False], [False, True], [True, True]])
    out = torch.where(mask, td, 0)
    assert isinstance(out, LazyStackedTensorDict)
    assert out["a"].tolist() == [[1, 0], [0, 2], [1, 2]]
    holder = TensorDict({"lazy": td}, [3, 2])
    assert torch.where(mask, holder, -1)["lazy", "a"].tolist() == [[1, -1], [-1, 2], [1, 2]]


def test_nested_stack_read_from_a_locked_stack_is_locked_and_held() -> None:
    a = TensorDict({"n": {"x": torch.zeros(3)}}, [3])
    td = LazyStackedTensorDict(a, a.clone()).lock_()
    nested = td.get("n")
    assert nested.is_locked
    with pytest.raises(LockedError):
        nested.unlock_()
    td.unlock_()
    assert not td.get("n").is_locked


def test_setting_a_list_gives_each_member_its_part() -> None:
    td = LazyStackedTensorDict(TensorDict(), TensorDict())
    td["s"] = ["0", "1"]
    td["b"] = [torch.ones(2) * 2, torch.ones(1)]
    assert td[0]["s"] == "0" and td[1]["s"] == "1"
    assert td.get("b", as_padded_tensor=True).tolist() == [[2, 2], [1, 0]]


def test_setting_a_nested_list_follows_the_batch_dims() -> None:
    inner = [LazyStackedTensorDict(TensorDict(), TensorDict()) for _ in range(3)]
    td = LazyStackedTensorDict(*inner, stack_dim=1)  # batch [2, 3]
    td["a"] = [[torch.ones(i + 3 * j + 1) for i in range(3)] for j in range(2)]
    assert [td[j, i]["a"].shape[0] for j in range(2) for i in range(3)] == [1, 2, 3, 4, 5, 6]
    td["c"] = [[[2], [3], [4]], [[5], [6], [7]]]
    assert td["c"].tolist() == [[[2], [3], [4]], [[5], [6], [7]]]


def test_update_takes_entries_as_keyword_arguments() -> None:
    td = LazyStackedTensorDict(*[TensorDict({"a": torch.zeros(())}) for _ in range(3)])
    td.update(b=torch.ones(3))
    td.update_(a=torch.ones(3))
    assert (td["b"] == 1).all() and (td["a"] == 1).all()


def test_inplace_shape_ops_on_a_lazy_stack_are_refused() -> None:
    from tensordict.errors import InplaceNotSupportedError

    td = LazyStackedTensorDict(member(0, 4), member(1, 4))
    for op, args in (("flatten", (0, 1)), ("unflatten", (1, (2, 2))), ("contiguous", ())):
        with pytest.raises(InplaceNotSupportedError, match=op):
            getattr(td, op)(*args, inplace=True)


def test_assert_close_compares_ragged_lazy_stacks_member_by_member() -> None:
    from tensordict.core.checks import assert_close

    inner = LazyStackedTensorDict(TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3)))
    holder = TensorDict({"lazy": inner}, [2])
    assert assert_close(holder, holder.clone())
    other = holder.clone()
    other["lazy"].tensordicts[1]["a"] += 1
    with pytest.raises(AssertionError, match="<1>"):
        assert_close(holder, other)


def test_tensorclass_from_a_ragged_lazy_stack() -> None:
    from tensordict import TensorClass

    class Ragged(TensorClass):
        a: torch.Tensor

    inner = LazyStackedTensorDict(TensorDict(a=torch.randn(3)), TensorDict(a=torch.randn(5)))
    tc = Ragged.from_tensordict(inner)
    assert list(tc.keys()) == ["a"] and tc[1].a.shape == torch.Size([5])


def test_feature_reductions_of_a_ragged_lazy_stack_go_member_by_member() -> None:
    td = LazyStackedTensorDict(
        TensorDict(a=torch.ones(2, 3), b=torch.zeros(2, 1), batch_size=[2]),
        TensorDict(a=torch.ones(2, 5), b=torch.ones(2, 1), batch_size=[2]),
        stack_dim=1,
    )
    assert td.sum(dim="feature", reduce=True).tolist() == [[3, 6], [3, 6]]
    per_leaf = td.sum(dim="feature")
    assert isinstance(per_leaf, LazyStackedTensorDict)
    assert per_leaf["a"].tolist() == [[3, 5], [3, 5]]


def _two_members_stack(dim: int) -> LazyStackedTensorDict:
    a = TensorDict({"x": torch.zeros(3), "n": {"z": torch.zeros(3)}}, [3])
    b = TensorDict({"x": torch.zeros(3), "n": {"z": torch.zeros(3)}, "y": torch.zeros(3, 2)}, [3])
    return LazyStackedTensorDict(a, b, stack_dim=dim)


@pytest.mark.parametrize(
    ("dim", "batch_size", "members"),
    [(0, [2, 3], (3,)), (0, [2], ()), (0, [2, 3, 4], (3, 4)), (1, [3, 2], (3,))],
)
def test_empty_with_a_batch_size_that_keeps_the_stack_dims_stays_a_lazy_stack(
    dim: int, batch_size: list[int], members: tuple[int, ...]
) -> None:
    # TorchRL's step_mdp reads .stack_dim of what td.empty(batch_size=td.batch_size) returns
    out = _two_members_stack(dim).empty(batch_size=batch_size, recurse=True)
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == dim
    assert out.batch_size == torch.Size(batch_size)
    assert [tuple(m.batch_size) for m in out.tensordicts] == [members, members]
    assert list(out.keys(True)) == ["n"]


@pytest.mark.parametrize(("dim", "batch_size"), [(0, [3]), (0, []), (1, [4, 2]), (1, [3])])
def test_empty_with_a_batch_size_that_changes_the_stack_dims_is_dense(
    dim: int, batch_size: list[int]
) -> None:
    out = _two_members_stack(dim).empty(batch_size=batch_size)
    assert type(out) is TensorDict and out.batch_size == torch.Size(batch_size)


def test_empty_passes_device_and_names_to_the_members() -> None:
    out = _two_members_stack(0).empty(device="cpu", names=["s", "t"])
    assert isinstance(out, LazyStackedTensorDict) and out.device == torch.device("cpu")
    assert out.names == ["s", "t"] and out.tensordicts[0].names == ["t"]


def _holding_a_ragged_stack() -> TensorDict:
    a = TensorDict({"v": torch.zeros(2), "w": torch.zeros(1), "s": NonTensorData("a")}, [])
    b = TensorDict({"v": torch.zeros(3), "w": torch.zeros(1), "s": NonTensorData("b")}, [])
    return TensorDict({"lazy": LazyStackedTensorDict(a, b), "x": torch.zeros(2)}, [2])


def test_select_into_a_nested_stack_whose_members_differ_in_shape() -> None:
    # TorchRL's batched envs select ("lazy", "vector") keys of heterogeneous agents
    td = _holding_a_ragged_stack()
    out = td.select(("lazy", "v"), ("lazy", "w"), "x", ("lazy", "gone"), strict=False)
    assert list(out.keys()) == ["lazy", "x"]
    lazy = out.get("lazy")
    assert isinstance(lazy, LazyStackedTensorDict) and sorted(lazy.keys()) == ["v", "w"]
    assert lazy.tensordicts[1]["v"].shape == (3,)
    with pytest.raises(KeyError):
        td.select(("lazy", "gone"))


def test_share_memory_of_a_tensordict_holding_a_ragged_stack() -> None:
    td = _holding_a_ragged_stack().share_memory_()
    assert td.is_locked and td.get("lazy")._is_shared
    member = td.get("lazy").tensordicts[1]
    assert member["v"].is_shared() and member.get("s").is_shared()
