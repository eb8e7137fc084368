"""A plain tensor operand lines up with the batch dimensions, as upstream does.

``td * t`` broadcasts ``t`` with the batch size (aligned from the right, like torch broadcasting
of two shapes); each leaf then sees it with trailing singleton dims. The property tests compare
every leaf with the torch operation written out over the broadcast batch shape.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import TensorDict
from tensordict.errors import ShapeMismatchError

SETTINGS = settings(max_examples=60, deadline=None)

OUT_OF_PLACE: list[Callable[[Any, Any], Any]] = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.pow,
    operator.eq,
    operator.ne,
    operator.lt,
    operator.ge,
    lambda a, b: b + a,
    lambda a, b: b - a,
    lambda a, b: b * a,
    lambda a, b: b / a,
]
METHODS = ["add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max"]
INPLACE = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
}


@st.composite
def td_and_operand(draw: st.DrawFn, grow: bool) -> tuple[TensorDict, torch.Tensor]:
    """A tensordict and a tensor that broadcasts with its batch size (``grow``: it may add
    leading dims or stretch size-1 dims of the batch)."""
    bs = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    if grow:
        bs = tuple(draw(st.sampled_from([s, 1])) for s in bs)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    feature = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    extra = draw(st.integers(1, 2))

    def leaf(shape: tuple[int, ...]) -> torch.Tensor:
        return torch.rand((*bs, *shape), generator=gen) + 1

    td = TensorDict(
        {
            "a": leaf(feature),
            "b": {"c": leaf(())},
            "n": TensorDict({"x": leaf((extra, 2))}, [*bs, extra]),
        },
        bs,
    )
    # the operand: a suffix of the batch shape, with some dims set to 1 (or grown)
    k = draw(st.integers(1, len(bs)))
    shape = [draw(st.sampled_from([s, 1])) for s in bs[len(bs) - k :]]
    if grow:  # a size-1 batch dim may be stretched by the operand
        shape = [draw(st.integers(1, 3)) if b == 1 else s for s, b in zip(shape, bs[len(bs) - k :])]
        if k == len(bs):  # new leading dims only when the operand covers every batch dim
            shape = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1)))] + shape
    return td, torch.rand(shape, generator=gen) + 1


def expected_leaf(
    op: Callable[[Any, Any], Any], leaf: torch.Tensor, t: torch.Tensor, bs: tuple[int, ...]
) -> torch.Tensor:
    """``op`` of a leaf and ``t`` written out: both broadcast over the batch dims first."""
    new_bs = torch.broadcast_shapes(bs, t.shape)
    feature = leaf.shape[len(bs) :]
    leaf = leaf.expand(*new_bs, *feature)
    aligned = t.expand(new_bs).reshape(*new_bs, *([1] * len(feature)))
    return op(leaf, aligned)  # type: ignore[no-any-return]


@SETTINGS
@given(td_and_operand(grow=True), st.sampled_from(OUT_OF_PLACE))
def test_operator_with_tensor_equals_op_over_batch_dims(
    case: tuple[TensorDict, torch.Tensor], op: Callable[[Any, Any], Any]
) -> None:
    td, t = case
    out = op(td, t)
    new_bs = torch.broadcast_shapes(td.batch_size, t.shape)
    assert out.batch_size == new_bs
    for key, value in td.items(include_nested=True, leaves_only=True):
        expected = expected_leaf(op, value, t, tuple(td.batch_size))
        assert out[key].shape == expected.shape, key
        assert torch.allclose(out[key], expected, equal_nan=True), key
    assert out["n"].batch_size == (*new_bs, td["n"].batch_size[-1])


@SETTINGS
@given(td_and_operand(grow=False), st.sampled_from(METHODS))
def test_method_with_tensor_equals_op_over_batch_dims(
    case: tuple[TensorDict, torch.Tensor], name: str
) -> None:
    td, t = case
    out = getattr(td, name)(t)
    fn = getattr(torch, name)
    for key, value in td.items(include_nested=True, leaves_only=True):
        assert torch.allclose(out[key], expected_leaf(fn, value, t, tuple(td.batch_size))), key


@SETTINGS
@given(td_and_operand(grow=False), st.sampled_from(list(INPLACE)))
def test_inplace_operator_with_tensor_writes_op_over_batch_dims(
    case: tuple[TensorDict, torch.Tensor], iop: Callable[[Any, Any], Any]
) -> None:
    td, t = case
    before = {k: v.clone() for k, v in td.items(include_nested=True, leaves_only=True)}
    ids = {k: id(v) for k, v in td.items(include_nested=True, leaves_only=True)}
    assert iop(td, t) is td
    for key, value in td.items(include_nested=True, leaves_only=True):
        expected = expected_leaf(INPLACE[iop], before[key], t, tuple(td.batch_size))
        assert id(value) == ids[key] and torch.allclose(value, expected), key


def test_lerp_with_a_batch_shaped_weight() -> None:
    td = TensorDict({"a": torch.zeros(3, 2)}, [3])
    end = TensorDict({"a": torch.ones(3, 2)}, [3])
    out = td.lerp(end, torch.tensor([0.0, 0.5, 1.0]))
    assert out["a"].tolist() == [[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]


def test_tensor_that_does_not_broadcast_with_the_batch_raises_and_names_both_shapes() -> None:
    td = TensorDict({"a": torch.ones(3, 4, 5)}, [3, 4])
    with pytest.raises(ShapeMismatchError, match=r"\[5\].*batch_size=\[3, 4\]"):
        td + torch.ones(5)  # trailing dims of the leaf: not how upstream lines tensors up
    with pytest.raises(RuntimeError):
        td + torch.ones(3)  # the leading batch dim alone: use t.reshape(3, 1)
    assert (td + torch.ones(3, 1))["a"].shape == (3, 4, 5)


def test_inplace_with_a_tensor_that_would_grow_the_batch_raises_and_changes_nothing() -> None:
    td = TensorDict({"a": torch.ones(3, 4), "b": torch.ones(3)}, [3])
    with pytest.raises(RuntimeError, match="in place"):
        td += torch.ones(2, 3)
    assert td["a"].eq(1).all() and td["b"].eq(1).all()


def test_tensordicts_with_broadcastable_batch_sizes_are_expanded() -> None:
    td = TensorDict({"a": torch.arange(3.0).reshape(1, 3)}, [1, 3])
    other = TensorDict({"a": torch.full((2, 3), 10.0)}, [2, 3])
    out = td + other
    assert out.batch_size == (2, 3) and out["a"].tolist() == [[10.0, 11.0, 12.0]] * 2


def test_ampersand_combines_a_tensor_with_each_leaf_as_torch_does() -> None:
    # upstream's `&` (unlike + - * / ...) broadcasts a tensor against each leaf's trailing dims
    td = TensorDict({"a": torch.tensor([[1, 2, 3]] * 3)}, [3])
    out = td & torch.tensor([1, 0, 1])
    assert out["a"].tolist() == [[1, 0, 1]] * 3


def test_clamp_bounds_line_up_with_the_batch_dims() -> None:
    td = TensorDict({"a": torch.arange(6.0).reshape(3, 2)}, [3])
    low, high = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.5, 4.0, 9.0])
    out = td.clamp(low, high)
    assert torch.equal(out["a"], torch.clamp(td["a"], low[:, None], high[:, None]))
    td.clamp_(low, high)
    assert torch.equal(td["a"], out["a"])
    with pytest.raises(ValueError, match="min and max"):
        td.clamp()


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "clamp_min"])
def test_default_stands_in_for_missing_entries_or_keeps_the_intersection(name: str) -> None:
    td0 = TensorDict(a=torch.tensor(1.0), b=torch.tensor(2.0))
    td1 = TensorDict(b=torch.tensor(3.0), d=torch.tensor(4.0))
    with pytest.raises(KeyError):
        getattr(td0, name)(td1)
    fn = getattr(torch, {"div": "true_divide"}.get(name, name))
    out = getattr(td0, name)(td1, default=torch.tensor(5.0))
    assert torch.equal(out["a"], fn(torch.tensor(1.0), torch.tensor(5.0)))
    assert torch.equal(out["d"], fn(torch.tensor(5.0), torch.tensor(4.0)))
    assert list(getattr(td0, name)(td1, default="intersection").keys()) == ["b"]


def test_reflected_bitwise_operators() -> None:
    td = TensorDict(a=torch.tensor([True, False]), batch_size=[2])
    assert (False | td)["a"].tolist() == [True, False]
    assert (True ^ td)["a"].tolist() == [False, True]
    assert (torch.ones((), dtype=torch.bool) & td)["a"].tolist() == [True, False]
