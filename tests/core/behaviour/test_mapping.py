"""A tensordict is a ``collections.abc.MutableMapping`` of its keys, as upstream."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, tensorclass
from tensordict.errors import ZeroDimIterationError


@tensorclass
class _Pair:
    x: torch.Tensor


def test_tensordicts_are_mutable_mappings_tensorclasses_are_not() -> None:
    td = TensorDict(a=torch.zeros(3), batch_size=[3])
    assert isinstance(td, MutableMapping) and isinstance(td, Mapping)
    assert isinstance(LazyStackedTensorDict(td, td), MutableMapping)
    assert not isinstance(_Pair(x=torch.zeros(2), batch_size=[2]), Mapping)  # (as upstream)


def test_module_load_state_dict_accepts_a_flat_tensordict() -> None:
    torch.manual_seed(0)
    src, dst = torch.nn.Linear(3, 4), torch.nn.Linear(3, 4)
    params = TensorDict.from_module(src)
    result = dst.load_state_dict(params.flatten_keys("."))
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(dst.weight, src.weight) and torch.equal(dst.bias, src.bias)


def test_iterating_a_zero_dim_tensordict_raises_a_type_error() -> None:
    td = TensorDict(a=torch.zeros(3))
    with pytest.raises(ZeroDimIterationError, match="keys"):
        iter(td)
    with pytest.raises(TypeError):
        list(td)  # (the loop itself must raise, not end empty)
