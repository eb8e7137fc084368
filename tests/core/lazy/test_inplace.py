"""Every in-place path of a lazy stack writes into its members (reads are stacked copies)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import ShapeMismatchError


def stack(stack_dim: int = 0) -> tuple[LazyStackedTensorDict, list[TensorDict]]:
    members = [
        TensorDict({"a": torch.zeros(3, 4), ("n", "b"): torch.zeros(3, 2)}, [3]) for _ in range(2)
    ]
    return LazyStackedTensorDict(*members, stack_dim=stack_dim), members


def sums(members: list[TensorDict]) -> list[float]:
    """Per member: sum of "a", then per member: sum of ("n", "b")."""
    return [float(m["a"].sum()) for m in members] + [float(m["n", "b"].sum()) for m in members]


def test_update_inplace_writes_into_the_members() -> None:
    td, members = stack()
    td.update_({"a": torch.ones(2, 3, 4)})
    assert sums(members) == [12, 12, 0, 0]


def test_update_inplace_writes_nested_entries_into_the_members() -> None:
    td, members = stack()
    td.update_({"n": {"b": torch.ones(2, 3, 2)}})
    assert sums(members) == [0, 0, 6, 6]


def test_update_inplace_splits_the_value_along_the_stack_dim() -> None:
    td, members = stack(stack_dim=1)
    value = torch.arange(2.0).view(1, 2, 1).expand(3, 2, 4)
    td.update_({"a": value})
    assert (members[0]["a"] == 0).all() and (members[1]["a"] == 1).all()


def test_set_inplace_writes_into_the_members() -> None:
    td, members = stack()
    td.set_("a", torch.ones(2, 3, 4))
    assert sums(members) == [12, 12, 0, 0]


def test_set_inplace_nested_key_writes_into_the_members() -> None:
    td, members = stack()
    td.set_(("n", "b"), torch.ones(2, 3, 2))
    assert sums(members) == [0, 0, 6, 6]


def test_set_with_inplace_true_writes_into_the_members() -> None:
    td, members = stack()
    td.set("a", torch.ones(2, 3, 4), inplace=True)
    assert sums(members) == [12, 12, 0, 0]


def test_update_with_inplace_true_keeps_the_members_tensors() -> None:
    td, members = stack()
    before = members[0]["a"]
    td.update({"a": torch.ones(2, 3, 4)}, inplace=True)
    assert members[0]["a"] is before and float(before.sum()) == 12


def test_copy_inplace_writes_into_the_members() -> None:
    td, members = stack()
    td.copy_(td.apply(lambda x: x + 1))
    assert sums(members) == [12, 12, 6, 6]


def test_copy_inplace_from_a_dense_tensordict_writes_into_the_members() -> None:
    td, members = stack()
    td.copy_(td.to_tensordict() + 1)
    assert sums(members) == [12, 12, 6, 6]


def test_fill_writes_into_the_members() -> None:
    td, members = stack()
    td.fill_("a", 1.0)
    assert sums(members) == [12, 12, 0, 0]


def test_set_at_writes_into_the_right_member() -> None:
    td, members = stack()
    td.set_at_("a", torch.ones(4), (0, 1))
    assert sums(members) == [4, 0, 0, 0]
    assert (members[0]["a"][1] == 1).all()


def test_set_at_nested_key_writes_into_the_right_member() -> None:
    td, members = stack()
    td.set_at_(("n", "b"), torch.tensor([1.0, 2.0]), (1, 0))
    assert members[1]["n", "b"][0].tolist() == [1.0, 2.0]
    assert sums(members) == [0, 0, 0, 3]


def test_set_at_with_an_index_reaching_feature_dims() -> None:
    td, members = stack(stack_dim=1)
    td.set_at_("a", 5.0, (slice(None), 1, 2))
    assert (members[1]["a"][:, 2] == 5).all() and float(members[1]["a"].sum()) == 15
    assert float(members[0]["a"].sum()) == 0


def test_update_at_writes_into_the_members() -> None:
    td, members = stack()
    td.update_at_({"a": torch.ones(4)}, (slice(None), 1))
    assert sums(members) == [4, 4, 0, 0]


@pytest.mark.parametrize(
    "op",
    [
        lambda td: td.apply_(lambda x: x.add_(1)),
        lambda td: td.apply_(lambda x: x + 1),
        lambda td: td.add_(1),
        lambda td: td.__iadd__(1),
        lambda td: td.exp_(),
    ],
    ids=["apply_ in place", "apply_ result", "add_", "+=", "exp_"],
)
def test_inplace_maths_writes_into_the_members(op: Callable[[Any], Any]) -> None:
    td, members = stack()
    op(td)
    assert sums(members) == [12, 12, 6, 6]


def test_zero_writes_into_the_members() -> None:
    td, members = stack()
    td.add_(1).zero_()
    assert sums(members) == [0, 0, 0, 0]


def test_masked_fill_writes_into_the_members() -> None:
    td, members = stack()
    td.masked_fill_(torch.tensor([[True, False, False], [False, False, True]]), 1.0)
    assert sums(members) == [4, 4, 2, 2]
    assert (members[1]["a"][2] == 1).all() and (members[1]["a"][0] == 0).all()


SETITEM_INDICES: dict[str, tuple[Any, list[float]]] = {
    "int": (0, [12, 0, 6, 0]),
    "slice": (slice(0, 1), [12, 0, 6, 0]),
    "list": ([1], [0, 12, 0, 6]),
    "tensor": (torch.tensor([1]), [0, 12, 0, 6]),
    "mask": (torch.tensor([False, True]), [0, 12, 0, 6]),
    "2-d mask": (torch.tensor([[False, True, False], [True, False, False]]), [4, 4, 2, 2]),
    "ints": ((0, 1), [4, 0, 2, 0]),
    "slice and int": ((slice(None), 1), [4, 4, 2, 2]),
    "paired lists": (([0, 1], [1, 2]), [4, 4, 2, 2]),
    "tensor and int": ((torch.tensor([0, 1]), 2), [4, 4, 2, 2]),
    "ellipsis": ((..., 0), [4, 4, 2, 2]),
    "2-d index tensor": (torch.tensor([[1, 1], [1, 1]]), [0, 12, 0, 6]),
}


@pytest.mark.parametrize("name", list(SETITEM_INDICES))
def test_setitem_with_a_scalar_writes_the_indexed_elements(name: str) -> None:
    index, expected = SETITEM_INDICES[name]
    td, members = stack()
    td[index] = 1.0
    assert sums(members) == expected


@pytest.mark.parametrize("name", list(SETITEM_INDICES))
def test_setitem_with_a_tensordict_reads_back_equal(name: str) -> None:
    index, _ = SETITEM_INDICES[name]
    if name == "2-d index tensor":
        index = torch.tensor([[1], [0]])
    td, _ = stack()
    shape = td[index].batch_size
    n = shape.numel()
    value = TensorDict(
        {
            "a": torch.arange(n * 4.0).view(*shape, 4),
            "n": {"b": torch.arange(n * 2.0).view(*shape, 2) + 1},
        },
        shape,
    )
    td[index] = value
    assert (td[index]["a"] == value["a"]).all()
    assert (td[index]["n", "b"] == value["n", "b"]).all()
    dense = TensorDict({"a": torch.zeros(2, 3, 4), ("n", "b"): torch.zeros(2, 3, 2)}, [2, 3])
    dense[index] = value
    assert (td.to_tensordict() == dense).all()


def test_setitem_with_a_dict_splits_it_along_the_stack_dim() -> None:
    td, members = stack()
    td[:, 0] = {"a": torch.tensor([[1.0], [2.0]]).expand(2, 4)}
    assert (members[0]["a"][0] == 1).all() and (members[1]["a"][0] == 2).all()


def test_setitem_with_a_dict_broadcasts_a_feature_shaped_value() -> None:
    td, members = stack()
    td[:, 0] = {"n": {"b": torch.tensor([1.0, 2.0])}}
    assert members[0]["n", "b"][0].tolist() == [1.0, 2.0]
    assert members[1]["n", "b"][0].tolist() == [1.0, 2.0]


def test_setitem_nested_key_writes_into_the_members() -> None:
    td, members = stack()
    td["n", "b"] = torch.ones(2, 3, 2)
    assert sums(members) == [0, 0, 6, 6]


def test_setitem_with_a_mismatched_tensordict_writes_nothing() -> None:
    td, members = stack()
    value = TensorDict({"a": torch.ones(3, 3, 4)}, [3, 3])
    with pytest.raises(ShapeMismatchError):
        td[:] = value
    assert sums(members) == [0, 0, 0, 0]


# ---------------------------------------------------------------- a lazy stack inside a TensorDict
def outer() -> tuple[TensorDict, list[TensorDict]]:
    td, members = stack()
    return TensorDict({"lazy": td}, [2]), members


def test_dense_setitem_writes_into_a_nested_lazy_stack() -> None:
    td, members = outer()
    td[0] = 1.0
    assert sums(members) == [12, 0, 6, 0]


def test_dense_masked_fill_writes_into_a_nested_lazy_stack() -> None:
    td, members = outer()
    td.masked_fill_(torch.tensor([True, False]), 1.0)
    assert sums(members) == [12, 0, 6, 0]


def test_dense_update_inplace_writes_into_a_nested_lazy_stack() -> None:
    td, members = outer()
    td.update_({"lazy": {"a": torch.ones(2, 3, 4)}})
    assert sums(members) == [12, 12, 0, 0]


def test_dense_set_inplace_writes_into_a_nested_lazy_stack() -> None:
    td, members = outer()
    td.set_(("lazy", "a"), torch.ones(2, 3, 4))
    assert sums(members) == [12, 12, 0, 0]


def test_dense_zero_writes_into_a_nested_lazy_stack() -> None:
    td, members = outer()
    td += 1
    td.zero_()
    assert sums(members) == [0, 0, 0, 0]


def test_dense_set_at_writes_into_a_nested_lazy_stack() -> None:
    td, members = outer()
    td.set_at_(("lazy", "a"), 1.0, (1, 2))
    assert sums(members) == [0, 4, 0, 0]


def test_nested_lazy_stacks_write_through_both_levels() -> None:
    inner, members = stack()
    other = TensorDict({"a": torch.zeros(2, 3, 4), ("n", "b"): torch.zeros(2, 3, 2)}, [2, 3])
    td = LazyStackedTensorDict(inner, other, stack_dim=0)
    td.update_({"a": torch.ones(2, 2, 3, 4)})
    td.set_at_("a", 5.0, (0, 1, 2))
    assert float(members[0]["a"].sum()) == 12 and float(members[1]["a"].sum()) == 12 + 16
    assert float(other["a"].sum()) == 24


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_update_at_writes_a_ragged_stack_member_by_member(stack_dim: int) -> None:
    # members hold "x" with different feature sizes: the stack cannot be read whole, yet
    # update_at_ writes each member's rows (TorchRL extends buffers of ragged lazy stacks so)
    def ragged(rows: int, fill: float) -> LazyStackedTensorDict:
        members = [TensorDict(x=torch.full((rows, n), fill), batch_size=[rows]) for n in (2, 3)]
        return LazyStackedTensorDict(*members, stack_dim=stack_dim)

    dest, src = ragged(4, 0.0), ragged(2, 1.0)
    index = slice(1, 3) if stack_dim == 1 else (slice(None), slice(1, 3))
    dest.update_at_(src, index)
    for member in dest.tensordicts:
        assert member["x"][1:3].eq(1).all() and member["x"][[0, 3]].eq(0).all()


def test_select_in_place_keeps_nested_keys_in_every_member() -> None:
    def member() -> TensorDict:
        nested = TensorDict(inner=torch.zeros(3, 2), other=torch.zeros(3), batch_size=[3])
        return TensorDict(a=torch.zeros(3), b=torch.zeros(3), n=nested, batch_size=[3])

    stack = LazyStackedTensorDict(member(), member(), stack_dim=0)
    assert stack.select("a", ("n", "inner"), inplace=True) is stack
    assert set(stack.keys(True, True)) == {"a", ("n", "inner")}  # (the nested key was dropped)
    assert all(set(m.keys(True, True)) == {"a", ("n", "inner")} for m in stack.tensordicts)
    with pytest.raises(KeyError):
        stack.select("a", "missing", inplace=True)
    assert set(stack.keys(True, True)) == {"a", ("n", "inner")}  # (nothing changed)


def test_to_in_place_casts_every_member_and_batch_size_is_refused() -> None:
    members = [TensorDict(a=torch.zeros(3, dtype=torch.int64), batch_size=[3]) for _ in range(2)]
    stack = LazyStackedTensorDict(*members, stack_dim=1)
    assert stack.to(torch.float32, inplace=True) is stack
    assert stack["a"].dtype == torch.float32
    assert all(m["a"].dtype == torch.float32 for m in members)  # the members themselves
    with pytest.raises(TypeError, match="Cannot pass batch-size"):
        stack.to(torch.int32, batch_size=[])
    assert stack["a"].dtype == torch.float32


def test_in_place_ops_that_reshape_a_lazy_stack_still_refuse() -> None:
    stack = LazyStackedTensorDict(*[TensorDict(x=torch.zeros(4), batch_size=[4])] * 2)
    with pytest.raises(NotImplementedError, match="repeat_interleave"):
        stack.repeat_interleave(2, dim=1, inplace=True)
    assert stack.batch_size == (2, 4)
