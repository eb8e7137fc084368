"""Underscore methods that client code (upstream's test helpers, TorchRL) calls on tensordicts."""

from __future__ import annotations

import torch

from tensordict import TensorDict, lazy_stack


def test_has_names_is_true_only_when_a_dim_is_named() -> None:
    td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3])
    assert td._has_names() is False
    td.names = [None, "y"]
    assert td._has_names() is True
    td.names = [None, None]
    assert td._has_names() is False
    assert lazy_stack([TensorDict(), TensorDict()])._has_names() is False
