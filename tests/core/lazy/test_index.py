"""Indexing a lazy stack follows torch's rules (advanced indices paired, n-d index tensors)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import IndexingError


def stack(stack_dim: int) -> LazyStackedTensorDict:
    members = [
        TensorDict(
            {"a": torch.arange(12.0).view(3, 4) + 100 * i, ("n", "b"): torch.randn(3, 4, 2)},
            [3, 4],
        )
        for i in range(2)
    ]
    return LazyStackedTensorDict(*members, stack_dim=stack_dim)


INDICES: dict[str, Any] = {
    "int": 1,
    "negative int": -1,
    "slice": slice(0, 2),
    "list": [1, 0],
    "paired lists and int": ([0, 1], [0, 1], 1),
    "paired lists": ([1, 0], [2, 0]),
    "tensor": torch.tensor([1, 0, 1]),
    "negative tensor": torch.tensor([-1, 0]),
    "2-d tensor": torch.tensor([[1, 0], [0, 0], [1, 1]]),
    "int and tensor": (0, torch.tensor([0, 1])),
    "slice and tensor": (slice(None), torch.tensor([1, 0])),
    "slice and two tensors": (slice(None), torch.tensor([1, 0]), torch.tensor([1, 1])),
    "separated tensors": (torch.tensor([1, 0]), slice(None), torch.tensor([1, 1])),
    "tensor slice int": (torch.tensor([1, 0]), slice(None), 0),
    "slice int tensor": (slice(None), 0, torch.tensor([1, 0])),
    "int slice tensor": (1, slice(None), torch.tensor([1, 0])),
    "int slice 2-d tensor": (1, slice(None), torch.tensor([[1, 0], [0, 0], [1, 1]])),
    "tensor int tensor": (torch.tensor([1, 0]), 0, torch.tensor([1, 1])),
    "2-d tensors paired": (torch.tensor([[0], [1]]), torch.tensor([[0, 1, 2]])),
    "mask": torch.tensor([True, False]),
    "2-d mask": torch.tensor([[True, False, True], [False, True, False]]),
    "3-d mask": torch.rand(2, 3, 4) > 0.5,
    "mask after a slice": (slice(None), torch.tensor([True, False, True])),
    "None and tensor": (None, torch.tensor([1, 0])),
    "ellipsis": (..., 0),
    "slice and None": (slice(1, None), None),
    "range": range(0, 2),
}


def reference(td: LazyStackedTensorDict) -> TensorDict:
    dense: TensorDict = td.to_tensordict()
    return dense


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
@pytest.mark.parametrize("name", list(INDICES))
def test_lazy_index_matches_the_dense_result(name: str, stack_dim: int) -> None:
    td = stack(stack_dim)
    dense = reference(td)
    index = INDICES[name]
    try:
        expected = dense[index]
    except IndexError:
        with pytest.raises(IndexError):
            td[index]
        return
    result = td[index]
    assert result.batch_size == expected.batch_size
    assert (result["a"] == expected["a"]).all()
    assert (result["n", "b"] == expected["n", "b"]).all()


def test_paired_lists_give_torch_batch_size() -> None:
    td = stack(0)
    assert td[[0, 1], [0, 1], 1].batch_size == torch.Size([2])
    assert isinstance(td[[0, 1], [0, 1], 1], LazyStackedTensorDict)


def test_2d_index_tensor_along_the_stack_dim_gives_nested_lazy_stacks() -> None:
    td = stack(0)
    out = td[torch.tensor([[1, 0], [0, 0], [1, 1]])]
    assert out.batch_size == torch.Size([3, 2, 3, 4])
    assert isinstance(out, LazyStackedTensorDict)
    assert all(isinstance(m, LazyStackedTensorDict) for m in out.tensordicts)


def test_index_tensor_along_the_stack_dim_shares_the_members() -> None:
    td = stack(0)
    out = td[torch.tensor([1, 0])]
    assert out.tensordicts[0] is td.tensordicts[1]


def test_index_along_other_dims_keeps_a_lazy_stack() -> None:
    td = stack(0)
    out = td[:, torch.tensor([2, 0])]
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 0


def test_int_on_the_stack_dim_with_a_tensor_gives_the_member_result() -> None:
    td = stack(0)
    out = td[0, torch.tensor([0, 2])]
    assert type(out) is TensorDict and out.batch_size == torch.Size([2, 4])


def test_empty_selection_keeps_the_shared_keys() -> None:
    td = stack(0)
    out = td[torch.tensor([], dtype=torch.long)]
    assert out.batch_size == torch.Size([0, 3, 4]) and out["a"].shape == torch.Size([0, 3, 4])


def test_out_of_range_index_tensor_on_the_stack_dim_raises() -> None:
    with pytest.raises(IndexingError):
        stack(0)[torch.tensor([0, 2])]
