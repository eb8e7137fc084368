"""Dimension names travel through every operation as upstream carries them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict
from tensordict.errors import DimNamesError


def named() -> TensorDict:
    nested = TensorDict({"c": torch.zeros(3, 4, 2, 5)}, [3, 4, 2])
    return TensorDict(
        {"a": torch.arange(12.0).reshape(3, 4), "n": nested}, [3, 4], names=["x", "y"]
    )


MASK = torch.tensor([True, False, True])


@pytest.mark.parametrize(
    ("op", "names"),
    [
        (lambda td: torch.cat([td, td], 0), ["x", "y"]),
        (lambda td: torch.stack([td, td], 0), [None, "x", "y"]),
        (lambda td: torch.stack([td, td], 1), ["x", None, "y"]),
        (lambda td: td.expand(2, 3, 4), [None, "x", "y"]),
        (lambda td: td.unflatten(0, (1, 3)), [None, "x", "y"]),
        (lambda td: td.unflatten(1, (2, 2)), ["x", None, "y"]),
        (lambda td: td.sum(0), ["y"]),
        (lambda td: td.mean(1, keepdim=True), ["x", "y"]),
        (lambda td: td.std(-1), ["x"]),
        (lambda td: td.repeat(2, 1), ["x", "y"]),
        (lambda td: td.gather(0, torch.zeros(3, 4, dtype=torch.long)), ["x", "y"]),
        (lambda td: td.where(torch.ones(3, 4, dtype=torch.bool), 0.0), ["x", "y"]),
        (lambda td: td.softmax(0), ["x", "y"]),
        (lambda td: td.reshape(3, 4), ["x", "y"]),
        (lambda td: td.reshape(12), [None]),
        (lambda td: td.new_zeros(5), ["y"]),
        (lambda td: td[MASK], ["x", "y"]),
        (lambda td: td[torch.tensor([0, 2])], ["x", "y"]),
        (lambda td: td[:, [0, 1]], ["x", "y"]),
        (lambda td: td[torch.tensor([[0, 1]])], [None, "x", "y"]),
        (lambda td: td + torch.ones(2, 3, 4), [None, "x", "y"]),
    ],
)
def test_operation_carries_names(op: Callable[[TensorDict], Any], names: list[Any]) -> None:
    assert op(named()).names == names


@pytest.mark.parametrize(
    ("op", "names", "batch_size"),
    [
        (lambda td: td.sum(0), ["y", None], [4, 2]),
        (lambda td: td.expand(5, 3, 4), [None, "x", "y", None], [5, 3, 4, 2]),
        (lambda td: torch.cat([td, td], 0), ["x", "y", None], [6, 4, 2]),
        (lambda td: torch.stack([td, td], 0), [None, "x", "y", None], [2, 3, 4, 2]),
        (lambda td: td.where(torch.ones(3, 4, dtype=torch.bool), 0.0), ["x", "y", None], [3, 4, 2]),
    ],
)
def test_nested_tensordict_keeps_its_extra_batch_dims_and_takes_the_names(
    op: Callable[[TensorDict], Any], names: list[Any], batch_size: list[int]
) -> None:
    nested = op(named())["n"]
    assert nested.names == names and list(nested.batch_size) == batch_size


def test_cat_keeps_the_first_names_stack_keeps_only_names_all_share() -> None:
    other = named()
    other.names = ["x", "z"]
    assert torch.cat([named(), other], 0).names == ["x", "y"]  # (as upstream)
    assert torch.cat([other, named()], 1).names == ["x", "z"]
    stacked = torch.stack([named(), other], 0)  # (as upstream: the result is unnamed)
    assert stacked.names == [None, None, None] and stacked.batch_size[0] == 2
    other.names = [None, "y"]  # one unnamed dim is a difference too
    assert torch.stack([named(), other], 1).names == [None, None, None]
    assert torch.stack([named(), named()], 1).names == ["x", None, "y"]


def test_refine_names_fills_unnamed_dims_and_refuses_to_rename() -> None:
    td = TensorDict(batch_size=[2, 3]).refine_names("a", None)
    assert td.refine_names(..., "b").names == ["a", "b"]
    with pytest.raises(DimNamesError, match="cannot coerce"):
        td.refine_names("a", "z")
    assert td.names == ["a", "b"]


def test_changing_the_batch_size_keeps_the_names_dim_by_dim() -> None:
    td = TensorDict(batch_size=[3, 4, 1, 6], names=["a", "b", "c", "z"])
    td.batch_size = [3, 4, 1, 6, 1]
    assert td.names == ["a", "b", "c", "z", None]
    td.batch_size = [3]
    assert td.names == ["a"]


def test_flatten_names_the_merged_dim_none() -> None:
    td = TensorDict(batch_size=[3, 4, 1, 6], names=["a", "b", "c", "d"])
    assert td.flatten(1, 2).names == ["a", None, "d"]
    assert td.flatten(1, 2).unflatten(1, (4, 1)).names == ["a", None, None, "d"]


def test_a_nested_tensordict_shares_names_with_its_parent() -> None:
    td = TensorDict(batch_size=[3, 4], names=["a", "b"])
    td["n"] = TensorDict(batch_size=[3, 4, 2])
    assert td["n"].names == ["a", "b", None]
    unnamed = TensorDict({}, [3])
    unnamed["m"] = TensorDict({}, [3, 4], names=["x", "y"])
    assert unnamed.names == ["x"] and unnamed["m"].names == ["x", "y"]


def test_names_reach_non_tensor_entries_and_nested_lazy_stacks() -> None:
    stack = NonTensorStack.from_list([["a"] * 3] * 4)
    lazy = LazyStackedTensorDict(*[TensorDict(x=torch.zeros(3), batch_size=[3])] * 4)
    td = TensorDict(
        data=NonTensorData("x", batch_size=[4, 3]), n={"s": stack}, lazy=lazy, batch_size=[4, 3]
    )
    td.names = ["i", "j"]
    assert td.get("data").names == ["i", "j"] and td.get(("n", "s")).names == ["i", "j"]
    assert td.get("lazy").names == ["i", "j"]
    td.lock_()
    td.names = ["u", "v"]  # (renaming a locked tensordict renames its entries too)
    assert td.get("data").names == ["u", "v"] and td.get(("n", "s")).names == ["u", "v"]


def test_lazy_stack_of_members_naming_dims_differently_has_no_names_as_upstream() -> None:
    named_one = TensorDict(x=torch.zeros(2, 3), batch_size=[2, 3], names=["a", "b"])
    unnamed = TensorDict(x=torch.zeros(2, 3), batch_size=[2, 3])
    stack = LazyStackedTensorDict(named_one, unnamed)
    with pytest.raises(DimNamesError, match="Not all dim names match"):
        stack.names  # (it answered the first member's names)  # noqa: B018
    assert stack.unsqueeze(0).batch_size == (1, 2, 2, 3)  # (other operations still work)
    stack.names = ["s", "a", "b"]  # renaming them all makes them agree
    assert stack.names == ["s", "a", "b"] and unnamed.names == ["a", "b"]


def test_empty_keeps_the_names_of_the_remaining_dims_and_applies_new_ones() -> None:
    td = TensorDict({"a": torch.zeros(3, 4), "n": {"b": torch.zeros(3, 4, 2)}}, [3, 4])
    td.names = ["p", "q"]
    assert td.empty(batch_size=[3]).names == ["p"]
    assert td.empty(batch_size=[5, 6]).names == ["p", "q"]
    assert td.empty(batch_size=[3, 4, 5]).names == ["p", "q", None]
    out = td.empty(recurse=True, names=["x", "y"])
    assert out.names == ["x", "y"] and out.get("n").names == ["x", "y"]
    with pytest.raises(ValueError, match="unique"):
        td.empty(names=["x", "x"])
