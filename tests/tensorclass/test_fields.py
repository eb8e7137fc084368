"""How values given for fields are stored: default rules, nocast, autocast; and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorDict, tensorclass
from tensordict.errors import BatchSizeError, FieldTypeError, LockedError
from tests.tensorclass.classes import AutoCast, NoCast, Sample, WithTensorDict

# ---------------------------------------------------------------------- default rules


def test_none_field_lives_outside_the_tensordict() -> None:
    s = Sample(obs=torch.zeros(2), batch_size=[2])
    assert s._non_tensordict == {"reward": None} and s._tensordict.get("reward") is None


def test_python_object_is_stored_as_non_tensor_data() -> None:
    s = Sample(obs=torch.zeros(2), label="cat", batch_size=[2])
    assert isinstance(s._tensordict.get("label"), NonTensorData)


def test_python_object_reads_back_unwrapped() -> None:
    assert Sample(obs=torch.zeros(2), label="cat", batch_size=[2]).label == "cat"


def test_number_becomes_a_tensor_by_default() -> None:
    s = Sample(obs=3.0)
    assert isinstance(s.obs, torch.Tensor) and s.obs.item() == 3.0


def test_dict_stays_a_python_object_by_default() -> None:
    value = {"a": torch.zeros(2)}
    w = WithTensorDict(td=value, x=torch.zeros(2), batch_size=[2])
    assert w.td is value  # as upstream: only from_dict (or autocast) builds a tensordict


def test_from_dict_builds_nested_tensordicts() -> None:
    w = WithTensorDict.from_dict({"td": {"a": torch.zeros(2)}, "x": torch.zeros(2)}, [2])
    assert isinstance(w.td, TensorDict) and w.td.batch_size == torch.Size([2])


def test_autocast_leaves_an_optional_field_to_the_default_rules() -> None:
    @tensorclass(autocast=True)
    class Opt:
        td: TensorDict | None = None

    value = {"a": 1}
    assert Opt(td=value).td is value


def test_setting_none_moves_a_field_out_of_the_tensordict() -> None:
    s = Sample(obs=torch.zeros(2), reward=torch.ones(2), batch_size=[2])
    s.reward = None
    assert s.reward is None and s._tensordict.get("reward") is None


def test_setting_a_tensor_moves_a_field_into_the_tensordict() -> None:
    s = Sample(obs=torch.zeros(2), batch_size=[2])
    s.reward = torch.ones(2)
    assert "reward" not in s._non_tensordict and torch.equal(s.reward, torch.ones(2))


def test_failed_assignment_leaves_the_instance_unchanged() -> None:
    s = Sample(obs=torch.zeros(2), batch_size=[2])
    before = s.obs
    with pytest.raises(BatchSizeError):
        s.obs = torch.zeros(3)
    assert s.obs is before


def test_failed_assignment_of_an_unset_field_keeps_it_unset() -> None:
    s = Sample(obs=torch.zeros(2), batch_size=[2])
    with pytest.raises(BatchSizeError):
        s.reward = torch.zeros(5)
    assert s._non_tensordict == {"reward": None}


def test_assigning_a_locked_instance_is_refused() -> None:
    s = Sample(obs=torch.zeros(2), batch_size=[2]).lock_()
    with pytest.raises(LockedError, match="set_"):
        s.obs = torch.ones(2)


# ---------------------------------------------------------------------- nocast


def test_nocast_keeps_an_int_as_a_python_int() -> None:
    n = NoCast(count=3, x=torch.zeros(2), batch_size=[2])
    assert n.count == 3 and type(n.count) is int


def test_nocast_does_not_check_the_annotation() -> None:
    # as upstream: nocast only turns off conversion, it does not validate
    assert NoCast(count="three", x=torch.zeros(2)).count == "three"


def test_nocast_keeps_a_numpy_array() -> None:
    assert isinstance(NoCast(count=np.zeros(2), x=torch.zeros(1)).count, np.ndarray)


def test_nocast_accepts_an_int_for_a_float_field() -> None:
    assert NoCast(count=1, x=torch.zeros(1), ratio=2).ratio == 2


def test_nocast_accepts_none_for_any_field() -> None:
    assert NoCast(count=None, x=torch.zeros(1)).count is None


def test_nocast_accepts_anything_for_an_any_field() -> None:
    assert NoCast(count=1, x=torch.zeros(1), anything=("a", 2)).anything == ("a", 2)


def test_nocast_stacks_a_list_as_upstream() -> None:
    # a list is not a number: the default (list-to-stack) rule makes it a tensor, as upstream
    assert torch.equal(
        NoCast(count=1, x=torch.zeros(1), anything=[1, 2]).anything, torch.tensor([1, 2])
    )


def test_nocast_accepts_a_member_of_an_optional() -> None:
    assert NoCast(count=1, x=torch.zeros(1), name="n").name == "n"


def test_failed_assignment_leaves_the_field_unchanged() -> None:
    a = AutoCast(count=1, x=torch.zeros(1))
    with pytest.raises(FieldTypeError):
        a.count = "two"
    assert a.count == 1


# ---------------------------------------------------------------------- autocast


def test_autocast_casts_a_tensor_to_an_int_field() -> None:
    a = AutoCast(count=torch.tensor(1.0), x=torch.zeros(1))
    assert a.count == 1 and type(a.count) is int


def test_autocast_casts_an_int_to_a_float_field() -> None:
    # regression: the int was kept because PEP 484 lets an int stand for a float
    a = AutoCast(count=1, x=torch.zeros(1), rate=1)
    assert type(a.rate) is float and a.rate == 1.0


def test_autocast_casts_a_float_to_an_int_field() -> None:
    a = AutoCast(count=2.7, x=torch.zeros(1))
    assert type(a.count) is int and a.count == 2


def test_autocast_casts_a_list_to_a_tensor_field() -> None:
    a = AutoCast(count=1, x=[1.0, 2.0])
    assert torch.equal(a.x, torch.tensor([1.0, 2.0]))


def test_autocast_casts_a_list_to_an_ndarray_field() -> None:
    a = AutoCast(count=1, x=torch.zeros(1), array=[1, 2])
    assert isinstance(a.array, np.ndarray)


def test_autocast_builds_a_nested_tensorclass_from_a_dict() -> None:
    a = AutoCast(count=1, x=torch.zeros(2), nested={"obs": torch.zeros(2)}, batch_size=[2])
    assert isinstance(a.nested, Sample) and a.nested.batch_size == torch.Size([2])


def test_autocast_any_field_stores_a_number_as_a_tensor() -> None:
    assert isinstance(AutoCast(count=1, x=torch.zeros(1), anything=3).anything, torch.Tensor)


def test_autocast_refuses_a_value_the_annotation_cannot_cast() -> None:
    with pytest.raises(FieldTypeError, match=r"AutoCast\.count is declared as int"):
        AutoCast(count="many", x=torch.zeros(1))
