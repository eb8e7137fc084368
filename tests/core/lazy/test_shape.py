"""Shape operations keep a lazy stack lazy (as upstream) and agree with the dense result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import BatchSizeError, ShapeMismatchError


def stack(stack_dim: int) -> LazyStackedTensorDict:
    members = [
        TensorDict(
            {"a": torch.arange(12.0).view(3, 4) + 100 * i, ("n", "b"): torch.randn(3, 4, 2)},
            [3, 4],
        )
        for i in range(2)
    ]
    return LazyStackedTensorDict(*members, stack_dim=stack_dim)


OPS: dict[str, Callable[[Any], Any]] = {
    "unsqueeze(0)": lambda t: t.unsqueeze(0),
    "unsqueeze(1)": lambda t: t.unsqueeze(1),
    "unsqueeze(-1)": lambda t: t.unsqueeze(-1),
    "squeeze()": lambda t: t.unsqueeze(1).squeeze(),
    "squeeze(1)": lambda t: t.unsqueeze(1).squeeze(1),
    "permute": lambda t: t.permute(2, 0, 1),
    "transpose(0, 2)": lambda t: t.transpose(0, 2),
    "transpose(0, 1)": lambda t: t.transpose(0, 1),
    "view(-1)": lambda t: t.view(-1),
    "view merging the last dims": lambda t: t.view(t.shape[0], -1),
    "view splitting the last dim": lambda t: (
        t.view(*t.shape[:2], t.shape[2] // 2, 2) if t.shape[2] % 2 == 0 else t.view(t.shape)
    ),
    "reshape(-1)": lambda t: t.reshape(-1),
    "flatten()": lambda t: t.flatten(),
    "flatten(0, 1)": lambda t: t.flatten(0, 1),
    "flatten(1, 2)": lambda t: t.flatten(1, 2),
    "unflatten(0, (1, -1))": lambda t: t.unflatten(0, (1, -1)),
    "cat along 0": lambda t: torch.cat([t, t], 0),
    "cat along 1": lambda t: torch.cat([t, t], 1),
    "cat along 2": lambda t: torch.cat([t, t], 2),
    "stack along 0": lambda t: torch.stack([t, t], 0),
    "stack along 2": lambda t: torch.stack([t, t], 2),
}


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
@pytest.mark.parametrize("name", list(OPS))
def test_shape_op_keeps_a_lazy_stack_equal_to_the_dense_result(name: str, stack_dim: int) -> None:
    td = stack(stack_dim)
    op = OPS[name]
    expected = op(td.to_tensordict())
    result = op(td)
    assert isinstance(result, LazyStackedTensorDict)
    assert result.batch_size == expected.batch_size
    assert (result["a"] == expected["a"]).all()
    assert (result["n", "b"] == expected["n", "b"]).all()


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
@pytest.mark.parametrize(
    "name", ["unsqueeze(0)", "permute", "transpose(0, 2)", "view(-1)", "flatten(1, 2)"]
)
def test_shape_op_result_writes_into_the_source(name: str, stack_dim: int) -> None:
    td = stack(stack_dim)
    result = OPS[name](td)
    result.apply_(lambda x: x.zero_())
    assert (td["a"] == 0).all() and (td["n", "b"] == 0).all()


def test_unsqueeze_before_the_stack_dim_moves_it() -> None:
    out = stack(0).unsqueeze(0)
    assert out.stack_dim == 1 and out.tensordicts[0].batch_size == torch.Size([1, 3, 4])


def test_squeeze_of_the_stack_dim_gives_the_member() -> None:
    td = stack(0)
    single = td[:1]
    assert single.squeeze(0) is td.tensordicts[0]


def test_permute_moves_the_stack_dim() -> None:
    out = stack(0).permute(1, 2, 0)
    assert out.stack_dim == 2 and out.batch_size == torch.Size([3, 4, 2])


def test_view_merging_all_dims_makes_one_member_per_element() -> None:
    out = stack(0).view(-1)
    assert out.stack_dim == 0 and len(out.tensordicts) == 24


def test_view_that_cannot_regroup_raises_and_reshape_copies() -> None:
    td = stack(1)
    with pytest.raises(BatchSizeError, match="reshape"):
        td.view(2, 12)
    out = td.reshape(2, 12)
    assert type(out) is TensorDict
    assert (out["a"] == td.to_tensordict().reshape(2, 12)["a"]).all()


def test_cat_of_lazy_and_dense_along_the_stack_dim_appends_members() -> None:
    td = stack(0)
    dense = td.to_tensordict() + 1
    out = torch.cat([td, dense], 0)
    assert isinstance(out, LazyStackedTensorDict) and len(out.tensordicts) == 4
    assert out.tensordicts[0] is td.tensordicts[0]
    assert (out[2:]["a"] == dense["a"]).all()


def test_cat_of_ragged_lazy_stacks_along_the_stack_dim() -> None:
    a = LazyStackedTensorDict(TensorDict({"x": torch.zeros(2)}), TensorDict({"x": torch.ones(3)}))
    out = torch.cat([a, a], 0)
    assert [m["x"].shape[0] for m in out.tensordicts] == [2, 3, 2, 3]


def test_cat_along_another_dim_needs_as_many_members() -> None:
    td = LazyStackedTensorDict(*[TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(2)])
    dense = TensorDict({"a": torch.zeros(3, 2)}, [3, 2])
    with pytest.raises(ShapeMismatchError, match="same number of stacked tensordicts"):
        torch.cat([td, dense], 1)


def test_cat_with_out_writes_into_the_lazy_destination() -> None:
    td = stack(0)
    out = torch.cat([td.clone()], 0, out=td.clone().zero_())
    assert isinstance(out, LazyStackedTensorDict)
    assert (out["a"] == td["a"]).all()


def test_shape_ops_keep_the_lock() -> None:
    td = stack(0).lock_()
    assert td.unsqueeze(0).is_locked and td.permute(1, 0, 2).is_locked and td.view(-1).is_locked


def test_pad_of_a_lazy_stack_pads_members_and_adds_filled_members() -> None:
    a = TensorDict({"x": torch.ones(4)}, [4])
    b = TensorDict({"x": torch.ones(4) * 2}, [4])
    td = LazyStackedTensorDict(a, b)
    out = td.pad([1, 0, 0, 2], value=9.0)
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == torch.Size([3, 6])
    assert out["x"][0].tolist() == [9.0] * 6 and out["x"][1].tolist() == [1, 1, 1, 1, 9, 9]
    assert td.batch_size == torch.Size([2, 4])  # not in place


def test_pad_in_place_keeps_the_members_and_refuses_negative_sizes() -> None:
    td = LazyStackedTensorDict(
        TensorDict({"x": torch.ones(4)}, [4]), TensorDict({"x": torch.ones(4)}, [4])
    )
    members = list(td.tensordicts)
    with pytest.raises(BatchSizeError, match="negative output size"):
        td.pad([0, 0, -10, 0], inplace=True)
    assert td.batch_size == torch.Size([2, 4])
    out = td.pad([0, 1, 0, 1], inplace=True)
    assert out is td and td.tensordicts[0] is members[0] and td.batch_size == torch.Size([3, 5])


def test_maybe_dense_stack_of_dense_and_ragged_lazy_steps_stays_lazy() -> None:
    dense = TensorDict(obs=torch.zeros(2, 2), batch_size=[2])
    ragged = LazyStackedTensorDict(TensorDict(obs=torch.zeros(2)), TensorDict(obs=torch.zeros(3)))
    out = LazyStackedTensorDict.maybe_dense_stack([dense, ragged], 1)  # (a rollout's steps)
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == torch.Size([2, 2])
    assert out.tensordicts[0] is dense and out.tensordicts[1] is ragged


def test_stack_of_a_dense_tensordict_then_a_lazy_stack_is_dense() -> None:
    dense = TensorDict(a=torch.zeros(2), batch_size=[2])
    lazy = LazyStackedTensorDict(TensorDict(a=torch.zeros(())), TensorDict(a=torch.ones(())))
    for stack in (torch.stack, LazyStackedTensorDict.maybe_dense_stack):
        out = stack([dense, lazy], 0)
        assert type(out) is TensorDict and out["a"].tolist() == [[0.0, 0.0], [0.0, 1.0]]
