"""Declaring a tensorclass and calling its constructor."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
import torch

from tensordict import TensorDict, is_tensor_collection, tensorclass
from tensordict.errors import (
    BatchSizeError,
    TensorclassArgumentError,
    TensorclassDefinitionError,
)
from tensordict.tensorclass import is_tensorclass
from tests.tensorclass.classes import Frozen, Pair, Sample, WithTensorDict


def test_fields_are_stored_in_the_inner_tensordict() -> None:
    s = Sample(obs=torch.zeros(4, 3), reward=torch.ones(4), batch_size=[4])
    assert isinstance(s._tensordict, TensorDict)
    assert set(s._tensordict.keys()) == {"obs", "reward", "label"}


def test_defaults_fill_missing_fields() -> None:
    s = Sample(obs=torch.zeros(2), batch_size=[2])
    assert s.reward is None and s.label == "none"


def test_fields_can_be_given_positionally() -> None:
    s = Sample(torch.zeros(2), torch.ones(2), "cat", batch_size=[2])
    assert s.label == "cat" and torch.equal(s.reward, torch.ones(2))


def test_batch_size_defaults_to_empty() -> None:
    assert Sample(obs=torch.zeros(2)).batch_size == torch.Size([])


def test_device_moves_the_tensors() -> None:
    s = Sample(obs=torch.zeros(2), batch_size=[2], device="cpu")
    assert s.device == torch.device("cpu") and s.obs.device == torch.device("cpu")


def test_names_name_the_batch_dimensions() -> None:
    s = Sample(obs=torch.zeros(2, 3), batch_size=[2, 3], names=["time", "env"])
    assert s.names == ["time", "env"]


def test_lock_keyword_locks_the_instance() -> None:
    assert Sample(obs=torch.zeros(2), batch_size=[2], lock=True).is_locked


def test_unknown_keyword_is_refused_with_the_field_list() -> None:
    with pytest.raises(TensorclassArgumentError, match=r"'obz'.*\['label', 'obs', 'reward'\]"):
        Sample(obz=torch.zeros(2))


def test_unknown_keyword_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Sample(obs=torch.zeros(2), colour="red")


def test_missing_required_field_is_refused() -> None:
    with pytest.raises(
        TensorclassArgumentError, match=r"missing 1 required positional argument: 'obs'"
    ):
        Sample()


def test_too_many_positional_arguments_are_refused() -> None:
    with pytest.raises(
        TensorclassArgumentError, match="takes 4 positional arguments but 5 were given"
    ):
        Sample(torch.zeros(2), None, "a", "extra")


def test_field_given_twice_is_refused() -> None:
    with pytest.raises(TensorclassArgumentError, match="multiple values for field 'obs'"):
        Sample(torch.zeros(2), obs=torch.zeros(2))


def test_leading_dims_contradicting_batch_size_are_refused() -> None:
    with pytest.raises(BatchSizeError, match=r"Sample\.obs: .*shape \[3, 2\].*batch size \[4\]"):
        Sample(obs=torch.zeros(3, 2), batch_size=[4])


def test_signature_lists_fields_then_control_keywords() -> None:
    params = list(inspect.signature(Sample).parameters)
    assert params == ["obs", "reward", "label", "batch_size", "device", "names"]


def test_dataclasses_fields_lists_the_fields() -> None:
    assert [f.name for f in dataclasses.fields(Sample)] == ["obs", "reward", "label"]


def test_is_tensorclass_recognises_classes_and_instances() -> None:
    assert is_tensorclass(Sample) and is_tensorclass(Sample(obs=torch.zeros(1)))
    assert not is_tensorclass(TensorDict()) and not is_tensorclass(int)


def test_nested_tensorclass_field_is_stored_as_an_instance() -> None:
    p = Pair(left=Sample(obs=torch.zeros(3), batch_size=[3]), right=torch.ones(3), batch_size=[3])
    assert isinstance(p.left, Sample) and torch.equal(p.right, torch.ones(3))


def test_tensordict_field_is_stored_as_given() -> None:
    inner = TensorDict({"a": torch.zeros(2)}, [2])
    assert WithTensorDict(td=inner, x=torch.zeros(2), batch_size=[2]).td is inner


def test_instances_are_tensor_collections() -> None:
    assert is_tensor_collection(Sample(obs=torch.zeros(1)))


def test_default_factory_gives_each_instance_its_own_value() -> None:
    @tensorclass
    class WithFactory:
        x: torch.Tensor = dataclasses.field(default_factory=lambda: torch.zeros(2))

    a, b = WithFactory(batch_size=[2]), WithFactory(batch_size=[2])
    assert a.x is not b.x


def test_kw_only_field_is_keyword_only_in_the_signature() -> None:
    @tensorclass
    class KwOnly:
        x: torch.Tensor
        y: torch.Tensor = dataclasses.field(kw_only=True)

    kind = inspect.signature(KwOnly).parameters["y"].kind
    assert kind is inspect.Parameter.KEYWORD_ONLY


def test_post_init_runs_after_the_fields_are_set() -> None:
    @tensorclass
    class Checked:
        x: torch.Tensor

        def __post_init__(self) -> None:
            self.x = self.x + 1

    assert torch.equal(Checked(x=torch.zeros(2)).x, torch.ones(2))


def test_user_init_receives_its_arguments_and_control_keywords_are_handled() -> None:
    @tensorclass
    class Custom:
        x: torch.Tensor

        def __init__(self, value: torch.Tensor) -> None:
            self.x = value * 2

    c = Custom(torch.ones(3), batch_size=[3])
    assert c.batch_size == torch.Size([3]) and torch.equal(c.x, torch.full((3,), 2.0))


def test_frozen_user_init_may_assign_fields() -> None:
    @tensorclass(frozen=True)
    class FrozenCustom:
        x: torch.Tensor

        def __init__(self, value: torch.Tensor) -> None:
            self.x = value

    assert torch.equal(FrozenCustom(torch.ones(2)).x, torch.ones(2))


def test_frozen_instances_are_locked_after_init() -> None:
    assert Frozen(x=torch.zeros(2), batch_size=[2]).is_locked


def test_subclass_adds_fields_after_the_inherited_ones() -> None:
    @tensorclass
    class Extended(Sample):
        extra: Any = None

    assert [f.name for f in dataclasses.fields(Extended)] == ["obs", "reward", "label", "extra"]


def test_subclass_redeclaring_a_field_keeps_its_default() -> None:
    @tensorclass
    class Redeclared(Sample):
        label: str

    assert Redeclared(obs=torch.zeros(1)).label == "none"


def test_autocast_with_nocast_is_refused() -> None:
    with pytest.raises(TensorclassDefinitionError, match="exclusive"):

        @tensorclass(autocast=True, nocast=True)
        class Both:
            x: torch.Tensor


def test_reserved_field_name_is_refused() -> None:
    with pytest.raises(TensorclassDefinitionError, match="'batch_size' cannot be a field name"):

        @tensorclass
        class Reserved:
            batch_size: torch.Tensor


def test_field_hiding_a_tensordict_method_is_refused() -> None:
    with pytest.raises(TensorclassDefinitionError, match="shadow=True"):

        @tensorclass
        class Hiding:
            values: torch.Tensor


def test_field_hiding_a_method_error_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):

        @tensorclass
        class Hiding:
            reshape: torch.Tensor


def test_shadow_lets_the_field_win() -> None:
    @tensorclass(shadow=True)
    class Shadowing:
        values: torch.Tensor

    assert torch.equal(Shadowing(values=torch.ones(2)).values, torch.ones(2))


def test_field_without_default_after_one_with_default_is_refused() -> None:
    with pytest.raises(TensorclassDefinitionError, match="'b' has no default but follows 'a'"):

        @tensorclass
        class Misordered:
            a: torch.Tensor = None  # type: ignore[assignment]
            b: torch.Tensor  # type: ignore[misc]


def test_decorator_is_a_dataclass_transform() -> None:
    assert hasattr(tensorclass, "__dataclass_transform__")
