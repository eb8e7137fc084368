"""Batch-shape helpers clients import from ``tensordict.utils``."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tensordict import TensorDict
from tensordict.errors import IndexingError
from tensordict.utils import (
    _getitem_batch_size,
    _maybe_correct_neg_dim,
    _shape,
    convert_ellipsis_to_idx,
    expand_as_right,
    expand_right,
)

_ITEM = st.one_of(
    st.integers(-2, 1),
    st.just(slice(None)),
    st.builds(slice, st.integers(0, 2), st.integers(0, 3)),
    st.none(),
    st.just(Ellipsis),
    st.lists(st.integers(0, 1), min_size=1, max_size=3).map(torch.tensor),
)


@given(st.lists(_ITEM, max_size=3))
def test_getitem_batch_size_matches_indexing_a_tensor(items: list) -> None:
    shape = torch.Size([2, 3, 4])
    if sum(1 for i in items if i is Ellipsis) > 1:
        return
    index = tuple(items)
    try:
        expected = torch.zeros(shape)[index].shape
    except IndexError:
        return
    assert _getitem_batch_size(shape, index) == expected


def test_getitem_batch_size_boolean_mask_counts_true_entries() -> None:
    mask = torch.tensor([[True, False], [True, True]])
    assert _getitem_batch_size(torch.Size([2, 2, 5]), mask) == torch.Size([3, 5])


@given(st.lists(_ITEM, max_size=3))
def test_convert_ellipsis_gives_the_same_result_when_indexing(items: list) -> None:
    tensor = torch.arange(24).reshape(2, 3, 4)
    if sum(1 for i in items if i is Ellipsis) > 1:
        return
    index = tuple(items)
    try:
        expected = tensor[index]
    except IndexError:
        return
    converted = convert_ellipsis_to_idx(index, tensor.shape)
    assert Ellipsis not in [i for i in converted if not isinstance(i, torch.Tensor)]
    assert torch.equal(tensor[converted], expected)


def test_convert_ellipsis_cases() -> None:
    assert convert_ellipsis_to_idx((0, ..., 1), [2, 3, 4]) == (0, slice(None), 1)
    assert convert_ellipsis_to_idx((0, 1, ...), [2, 3]) == (0, 1)
    assert convert_ellipsis_to_idx(..., [2, 3]) == (slice(None), slice(None))
    assert convert_ellipsis_to_idx(0, [2, 3]) == 0
    with pytest.raises(IndexingError, match="one ellipsis"):
        convert_ellipsis_to_idx((..., ...), [2, 3])


def test_maybe_correct_neg_dim() -> None:
    assert _maybe_correct_neg_dim(-1, torch.Size([2, 3])) == 1
    assert _maybe_correct_neg_dim(1, None, 4) == 1
    assert _maybe_correct_neg_dim(-4, None, 4) == 0
    with pytest.raises(IndexError, match="Incompatible dim 5"):
        _maybe_correct_neg_dim(5, torch.Size([2, 3]))
    with pytest.raises(IndexError, match="Incompatible dim -5"):
        _maybe_correct_neg_dim(-5, None, 4)


def test_expand_right_adds_trailing_dims() -> None:
    t = torch.arange(2.0)
    out = expand_right(t, (2, 3))
    assert out.shape == (2, 3) and torch.equal(out[:, 2], t)
    with pytest.raises(RuntimeError):
        expand_right(torch.zeros(2, 3), (2, 4))


def test_expand_as_right_tensor_and_tensordict() -> None:
    from tensordict import TensorDict

    out = expand_as_right(torch.arange(2.0), torch.zeros(2, 3, 4))
    assert out.shape == (2, 3, 4) and out[1, 2, 3] == 1
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    assert expand_as_right(td, torch.zeros(2, 5)).batch_size == torch.Size([2, 5])
    with pytest.raises(RuntimeError, match="more than dest"):
        expand_as_right(torch.zeros(2, 3), torch.zeros(2))
    with pytest.raises(RuntimeError, match="does not match"):
        expand_as_right(torch.zeros(3), torch.zeros(2, 4))


def test_expand_as_right_broadcasts_singleton_dims() -> None:
    # TorchRL's replanning actor expands a (batch, 1) mask over (batch, chunk, 1) actions
    mask = torch.tensor([[True], [False]])
    out = expand_as_right(mask, torch.zeros(2, 4, 1))
    assert out.shape == (2, 4, 1) and out[0].all() and not out[1].any()
    assert expand_as_right(torch.ones(1, 3), torch.zeros(2, 3, 5)).shape == (2, 3, 5)
    with pytest.raises(RuntimeError, match="does not match"):
        expand_as_right(torch.zeros(2, 3), torch.zeros(2, 4, 1))


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_shape_of_nested_tensor_marks_ragged_dims() -> None:
    nt = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3)])
    assert _shape(nt) == torch.Size([2, -1, 3])
    assert _shape(nt, nested_shape=True).tolist() == [[2, 3], [4, 3]]
    assert _shape(torch.zeros(2, 3)) == torch.Size([2, 3])


def test_expand_right_of_a_scalar_to_an_empty_shape() -> None:
    # TorchRL expands a done flag of shape [] to the batch size [] of an unbatched env
    out = expand_right(torch.tensor(True), torch.Size([]))
    assert out.shape == () and bool(out)
    assert expand_right(torch.tensor(2.0), (3,)).tolist() == [2.0, 2.0, 2.0]


def test_shape_ops_of_zero_dim_leaves_to_an_empty_batch() -> None:
    td = TensorDict({"a": torch.tensor(1.0)}, [])
    assert td.reshape(()).batch_size == () and td.view(()).batch_size == ()
    assert td.expand(()).batch_size == () and td.reshape(())["a"] == 1.0
