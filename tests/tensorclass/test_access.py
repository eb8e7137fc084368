"""Reading and writing fields: attributes, str keys, get/set, frozen instances, user members."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tensordict.errors import (
    FrozenTensorclassError,
    LockedError,
    TensorDictKeyError,
    UndeclaredFieldError,
)
from tests.tensorclass.classes import Frozen, Pair, Sample, WithMethods


def sample() -> Sample:
    return Sample(obs=torch.arange(6.0).reshape(3, 2), label="cat", batch_size=[3])


def test_attribute_returns_the_stored_tensor() -> None:
    s = sample()
    assert s.obs is s._tensordict.get("obs")


def test_str_key_reads_a_field_like_the_attribute() -> None:
    s = sample()
    assert s["obs"] is s.obs and s["label"] == "cat"


def test_str_key_reads_an_unset_field_as_none() -> None:
    assert sample()["reward"] is None


def test_str_key_of_an_unknown_entry_raises_key_error() -> None:
    with pytest.raises(TensorDictKeyError):
        sample()["nope"]


def test_nested_key_reads_inside_a_tensorclass_field() -> None:
    p = Pair(left=sample(), right=torch.zeros(3), batch_size=[3])
    assert p["left", "obs"] is p.left.obs


def test_get_reads_a_field_like_the_attribute() -> None:
    assert sample().get("label") == "cat"


def test_get_of_an_unset_field_returns_the_default() -> None:
    assert sample().get("reward", "default") == "default"


def test_get_of_a_nested_key_reads_the_entry() -> None:
    p = Pair(left=sample(), right=torch.zeros(3), batch_size=[3])
    assert torch.equal(p.get(("left", "obs")), p.left.obs)


def test_set_writes_a_field_and_returns_the_instance() -> None:
    s = sample()
    assert s.set("reward", torch.ones(3)) is s and torch.equal(s.reward, torch.ones(3))


def test_str_key_assignment_writes_a_field() -> None:
    s = sample()
    s["label"] = "dog"
    assert s.label == "dog"


def test_set_of_a_nested_key_writes_inside_a_field() -> None:
    p = Pair(left=sample(), right=torch.zeros(3), batch_size=[3])
    p.set(("left", "obs"), torch.ones(3, 2))
    assert torch.equal(p.left.obs, torch.ones(3, 2))


def test_set_inplace_writes_into_the_existing_tensor() -> None:
    s = sample()
    obs = s.obs
    s.set("obs", torch.ones(3, 2), inplace=True)
    assert s.obs is obs and torch.equal(obs, torch.ones(3, 2))


def test_set_of_an_undeclared_key_is_refused() -> None:
    with pytest.raises(UndeclaredFieldError, match="Cannot set the attribute 'other'"):
        sample().set("other", torch.zeros(3))


def test_setting_an_undeclared_attribute_is_refused() -> None:
    s = sample()
    fields = r"Declared fields: \['obs', 'reward', 'label'\]"
    with pytest.raises(UndeclaredFieldError, match=fields):
        s.observation = torch.zeros(3)


def test_undeclared_attribute_error_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        sample().foo = 1


def test_failed_undeclared_assignment_adds_nothing() -> None:
    s = sample()
    with pytest.raises(UndeclaredFieldError):
        s.foo = 1
    assert "foo" not in s.__dict__ and s._tensordict.get("foo") is None


def test_frozen_instance_refuses_assignment() -> None:
    f = Frozen(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(FrozenTensorclassError, match="Frozen is frozen"):
        f.x = torch.ones(2)


def test_frozen_error_is_a_dataclasses_frozen_instance_error() -> None:
    f = Frozen(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.x = torch.ones(2)


def test_frozen_instance_is_unchanged_after_a_refused_assignment() -> None:
    f = Frozen(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(FrozenTensorclassError):
        f.x = torch.ones(2)
    assert torch.equal(f.x, torch.zeros(2))


def test_frozen_instance_refuses_set() -> None:
    with pytest.raises(LockedError):
        Frozen(x=torch.zeros(2), batch_size=[2]).set("x", torch.ones(2))


def test_frozen_instance_allows_in_place_writes() -> None:
    f = Frozen(x=torch.zeros(2), batch_size=[2])
    f.set_("x", torch.ones(2))
    assert torch.equal(f.x, torch.ones(2))


def test_batch_size_is_settable() -> None:
    s = sample()
    s.batch_size = []
    assert s.batch_size == torch.Size([]) and s._tensordict.batch_size == torch.Size([])


def test_user_property_is_not_shadowed() -> None:
    w = WithMethods(x=torch.ones(2), batch_size=[2])
    assert torch.equal(w.doubled, torch.full((2,), 2.0))


def test_user_property_setter_is_used_for_assignment() -> None:
    w = WithMethods(x=torch.ones(2), batch_size=[2])
    w.half = torch.ones(2)
    assert torch.equal(w.x, torch.full((2,), 2.0))


def test_user_method_named_like_a_tensordict_method_is_not_replaced() -> None:
    assert WithMethods(x=torch.ones(2), batch_size=[2]).reshape(2) == "user reshape"


def test_method_from_a_user_base_class_is_not_replaced() -> None:
    assert WithMethods(x=torch.ones(2), batch_size=[2]).clone() == "user clone"


def test_user_method_works_on_indexed_results() -> None:
    w = WithMethods(x=torch.ones(4), batch_size=[4])
    assert w[:2].total().item() == 2.0


def test_private_tensordict_attributes_are_reachable() -> None:
    s = sample()
    assert dict(s._own_items())["obs"] is s.obs


def test_unknown_attribute_error_lists_the_fields() -> None:
    with pytest.raises(AttributeError, match=r"'nope'.*fields: \['obs', 'reward', 'label'\]"):
        sample().nope  # noqa: B018


def test_deleting_a_field_is_refused_with_a_hint() -> None:
    s = sample()
    with pytest.raises(AttributeError, match="assign None"):
        del s.obs
