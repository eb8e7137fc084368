"""A list stored in a tensordict under list_to_stack() (upstream 0.15's default)."""

from __future__ import annotations

import pytest
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.errors import BatchSizeError


def test_strings_become_a_stack_shaped_like_the_list() -> None:
    td = TensorDict(a=[["a", "b"], ["c", "d"]], batch_size=[2])
    assert isinstance(td.get("a"), NonTensorStack) and td.get("a").batch_size == (2, 2)


def test_tensors_are_stacked_and_numbers_make_a_tensor() -> None:
    td = TensorDict(a=[torch.zeros(3), torch.ones(3)], b=[1, 2], batch_size=[2])
    assert td["a"].shape == (2, 3) and torch.equal(td["b"], torch.tensor([1, 2]))


def test_a_list_not_matching_the_batch_size_is_refused() -> None:
    with pytest.raises(BatchSizeError, match="batch dimension mismatch"):
        TensorDict(a=["x", "y"], batch_size=[3])


def test_a_tuple_stays_one_python_object() -> None:
    assert isinstance(TensorDict(a=("x", "y"), batch_size=[2]).get("a"), NonTensorData)
