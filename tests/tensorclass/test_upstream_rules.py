"""Tensorclass rules matched to upstream: shadowed keywords, post-init on rebuild, setitem
between classes, reflected logic operators, user __setattr__, tensor_only NonTensorData fields."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import NonTensorData, TensorClass, TensorDict, tensorclass
from tensordict.errors import TensorclassDefinitionError


def test_control_keyword_fields_need_shadow() -> None:
    with pytest.raises(TensorclassDefinitionError):

        @tensorclass
        class Bad:
            batch_size: Any


def test_shadowed_control_keywords_are_fields() -> None:
    @tensorclass(shadow=True)
    class Shadowed:
        batch_size: Any
        device: Any

    s = Shadowed(batch_size=0, device=1)
    assert s.batch_size == 0 and s.device == 1
    s.batch_size = 2
    assert s.batch_size == 2 and s._tensordict.batch_size == torch.Size([])


def test_post_init_runs_when_rebuilt_from_a_tensordict() -> None:
    @tensorclass
    class Positive:
        x: torch.Tensor

        def __post_init__(self) -> None:
            if (self.x <= 0).any():
                raise ValueError("x must be positive")

    Positive._from_tensordict(TensorDict(x=torch.ones(2), batch_size=[2]))
    with pytest.raises(ValueError, match="positive"):
        Positive._from_tensordict(TensorDict(x=-torch.ones(2), batch_size=[2]))


def test_expected_keys_lists_the_fields() -> None:
    @tensorclass
    class Two:
        a: torch.Tensor
        b: str

    assert Two.__expected_keys__ == {"a", "b"}


def test_setitem_from_a_class_with_other_fields_is_refused() -> None:
    @tensorclass
    class A:
        x: torch.Tensor

    @tensorclass
    class B:
        y: torch.Tensor

    @tensorclass
    class C:
        x: torch.Tensor

    a = A(x=torch.zeros(3), batch_size=[3])
    a[:1] = C(x=torch.ones(1), batch_size=[1])  # same members: fine
    assert a.x[0] == 1
    with pytest.raises(ValueError, match="same-class or compatible class"):
        a[:1] = B(y=torch.ones(1), batch_size=[1])


def test_reflected_logic_operators() -> None:
    @tensorclass
    class Flags:
        f: torch.Tensor

    f = Flags(f=torch.tensor([True, False]), batch_size=[2])
    assert (True ^ f).f.tolist() == [False, True]
    assert (False | f).f.tolist() == [True, False]
    assert (True & f).f.tolist() == [True, False]


def test_a_subclass_setattr_sees_the_constructor_and_can_call_super() -> None:
    seen: list[str] = []

    class Logged(TensorClass, nocast=True):
        a: int

        def __setattr__(self, name: str, value: Any) -> None:
            seen.append(name)
            super().__setattr__(name, value + 1)

    obj = Logged(a=1)
    assert seen == ["a"] and obj.a == 2
    obj.a = 5
    assert obj.a == 6 and not TensorClass._nocast


def test_tensor_only_non_tensor_data_field_keeps_the_wrapper() -> None:
    class Holder(TensorClass["tensor_only"]):
        data: NonTensorData

    value = {"k": "v"}
    h = Holder(data=value)
    assert isinstance(h.data, NonTensorData) and h.data.data is value


def test_setting_the_device_says_to_use_to() -> None:
    @tensorclass
    class D:
        x: torch.Tensor

    with pytest.raises(RuntimeError, match=r"device cannot be set using tensorclass\.device"):
        D(x=torch.zeros(1)).device = torch.device("cpu")
