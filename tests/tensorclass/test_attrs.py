"""TensorAttrs: device, dtype and shape of a tensor as a tensorclass."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorAttrs, is_tensorclass


def test_from_tensor_records_the_three_attributes() -> None:
    a = TensorAttrs.from_tensor(torch.zeros(2, 3, dtype=torch.int8))
    assert (a.tgt_device, a.tgt_dtype, a.tgt_shape) == (
        torch.device("cpu"),
        torch.int8,
        torch.Size([2, 3]),
    )
    assert is_tensorclass(a) and a.batch_size == torch.Size([])


def test_fields_not_asked_for_stay_none() -> None:
    a = TensorAttrs.from_tensor(torch.zeros(2), fields=("dtype",))
    assert a.tgt_dtype == torch.float32 and a.tgt_shape is None and a.tgt_device is None


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        TensorAttrs.from_tensor(torch.zeros(2), fields=("layout",))
