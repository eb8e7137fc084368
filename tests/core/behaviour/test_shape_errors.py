"""Shape operations: the error types (and the words client code matches on) of upstream 0.15,
and the no-op forms that return the tensordict itself."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tensordict.core.batch_shape import convert_ellipsis_to_idx
from tensordict.errors import BatchSizeError, DimIndexError
from tensordict.utils import set_lazy_legacy


def _td(*batch: int) -> TensorDict:
    return TensorDict({"x": torch.zeros(*batch, 2)}, list(batch))


def test_no_op_permute_movedim_transpose_return_self() -> None:
    td = _td(2, 3, 4)
    assert td.permute(0, 1, 2) is td
    assert td.movedim(1, 1) is td
    assert td.movedim((0, 2), (0, -1)) is td
    assert td.transpose(1, 1) is td
    moved = td.movedim(0, 2)
    assert moved is not td and moved.batch_size == (3, 4, 2)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("legacy", [False, True])
def test_permute_errors(legacy: bool) -> None:
    td = _td(2, 3, 4)
    with set_lazy_legacy(legacy):
        with pytest.raises(RuntimeError, match="repeated dim in permute"):
            td.permute(1, 1, 0)
        with pytest.raises(ValueError, match="repeated dim in permute"):
            td.permute(2, -1, 0)
        with pytest.raises(RuntimeError, match=r"number of dims don't match .*got 4, expected 3"):
            td.permute(3, 2, 1, 0)
        for dims in [(2, 3, 0), (2, -4, 0)]:
            with pytest.raises(IndexError, match=r"\[-3, 2\]"):
                td.permute(*dims)


def test_movedim_errors() -> None:
    td = _td(2, 3, 4)
    with pytest.raises(IndexError):
        td.movedim(0, 3)
    with pytest.raises(IndexError):
        td.movedim(-4, 0)
    with pytest.raises(RuntimeError, match="repeated dim in source"):
        td.movedim((0, 0), (1, 2))
    with pytest.raises(RuntimeError, match="repeated dim in destination"):
        td.movedim((0, 1), (2, -1))
    with pytest.raises(ValueError, match="same number of elements, got 1 and 2"):
        td.movedim((0,), (1, 2))


def test_flips_and_rot90_need_enough_batch_dims() -> None:
    with pytest.raises(RuntimeError, match="fliplr requires at least 2 batch dimensions"):
        _td(3).fliplr()
    with pytest.raises(RuntimeError, match="flipud requires at least 1 batch dimension"):
        _td().flipud()
    with pytest.raises(RuntimeError, match="rot90 requires at least 2 batch dimensions"):
        _td(3).rot90()
    with pytest.raises(RuntimeError, match="rot90 requires exactly 2 dims"):
        _td(2, 3, 4).rot90(1, (0,))
    td = TensorDict({"x": torch.arange(6).view(2, 3)}, [2, 3])
    assert torch.equal(td.flipud()["x"], torch.arange(6).view(2, 3).flipud())
    assert torch.equal(td.rot90(3)["x"], torch.arange(6).view(2, 3).rot90(3))


def test_more_than_one_ellipsis_is_a_runtime_and_index_error() -> None:
    for index in [(..., 0, ...), (0, ..., 0, ...)]:
        with pytest.raises(RuntimeError, match="one ellipsis"):
            convert_ellipsis_to_idx(index, [3, 4, 5])
        with pytest.raises(IndexError, match="one ellipsis"):
            _td(3, 4, 5)[index]


def test_split_dim_out_of_range() -> None:
    with pytest.raises(IndexError, match="Incompatible dim 0"):
        TensorDict({"a": torch.zeros(2)}, []).split(1, 0)
    for dim in (2, -3):
        with pytest.raises(DimIndexError, match=f"Incompatible dim {dim}"):
            _td(3, 2).split(1, dim)


def test_split_size_errors() -> None:
    td = _td(3, 2)
    for bad in ("1", ["1", 2], 1.5):
        with pytest.raises(TypeError, match="must be int or list of ints"):
            td.split(bad, 0)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Insufficient number of elements in split_size"):
        td.split([], 0)
    with pytest.raises(BatchSizeError, match=r"sum exactly to 3, but got sum\(\[1, 1\]\) = 2"):
        td.split([1, 1], 0)
    for size in (0, -1):
        with pytest.raises(ValueError, match=f"split_size must be positive, got {size}\\."):
            td.split(size, -1)
    assert [p.batch_size[0] for p in td.split([1, 2], 0)] == [1, 2]


def test_transpose_out_of_range_says_dims_are_incompatible() -> None:
    with pytest.raises(ValueError, match="The provided dimensions are incompatible"):
        _td(2, 3).transpose(-3, 0)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_legacy_permute_of_a_lazy_stack_by_the_identity_is_the_stack() -> None:
    from tensordict import lazy_stack

    stack = lazy_stack([_td(3, 4), _td(3, 4)], 1)
    with set_lazy_legacy(True):
        assert stack.permute(0, 1, 2) is stack
        assert stack.permute(2, 0, 1).permute(1, 2, 0) is stack
    with pytest.raises(RuntimeError, match="repeated dim in permute"):
        stack.permute(0, 0, 1)


def test_dtype_view_with_a_batch_size_on_every_kind_of_tensordict() -> None:
    from tensordict import lazy_stack

    dense = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    stack = lazy_stack([dense, dense], 1)
    for td, bs in [(dense, [2]), (stack, [2, 2]), (stack, []), (dense[:, 1:], [])]:
        out = td.view(torch.uint8, batch_size=bs)
        assert out.batch_size == tuple(bs) and out["a"].dtype == torch.uint8
        assert out["a"].numel() == td["a"].numel() * 4
    with pytest.raises(TypeError, match="batch_size= goes with a dtype view"):
        dense.view(6, batch_size=[6])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_shape_ops_of_a_locked_lazy_view_stay_locked() -> None:
    td = _td(2, 3)
    with set_lazy_legacy(True):
        view = td.permute(1, 0)
    view.lock_()
    assert view.reshape(-1).is_locked and view.flip(0).is_locked
    assert not _td(2, 3).permute(1, 0).reshape(-1).is_locked


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_lazy_shape_view_refuses_a_batch_size_in_to() -> None:
    with set_lazy_legacy(True):
        view = _td(2, 3).permute(1, 0)
    with pytest.raises(TypeError, match="Cannot pass batch-size to "):
        view.to(torch.float64, batch_size=[])
    assert view.to(torch.float64)["x"].dtype == torch.float64
