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


@tensorclass
class Nested:
    x: torch.Tensor
    label: str
    inner: Nested = None


def _nested(value: float) -> Nested:
    inner = Nested(x=torch.full((2,), value), label=f"in{value}", batch_size=[2])
    return Nested(x=torch.full((2,), value), label=f"out{value}", inner=inner, batch_size=[2])


@pytest.mark.parametrize("source", ["instance", "dict", "tensordict"])
def test_update_reaches_nested_tensorclasses(source: str) -> None:
    target, new = _nested(0.0), _nested(1.0)
    given = {"instance": new, "dict": new.to_dict(), "tensordict": new.to_tensordict()}[source]
    target.update(given)
    assert (target.inner.x == 1).all() and target.inner.label == "in1.0"


def test_update_with_keywords_and_in_place() -> None:
    target = _nested(0.0)
    x = target.x
    target.update_(x=torch.ones(2))
    assert target.x is x and (x == 1).all()
    assert target.update() is target


def test_get_reads_attributes_nested_values_and_defaults() -> None:
    data = _nested(0.0)
    assert data.get("batch_size") == torch.Size([2])
    assert data.get(("inner", "label")) == "in0.0"
    assert data.get("missing", "default") == "default"


def test_lazy_stack_of_ragged_instances_keeps_the_class() -> None:
    from tensordict import LazyStackedTensorDict

    a = Nested(x=torch.zeros(2, 3), label="a", batch_size=[2])
    b = Nested(x=torch.zeros(2, 4), label="b", batch_size=[2])
    stacked = LazyStackedTensorDict.lazy_stack([a, b], 0)
    assert type(stacked) is Nested and stacked[1].x.shape == (2, 4)


def test_stack_with_a_tensor_member_is_a_dispatch_error() -> None:
    @tensorclass
    class Other:
        x: torch.Tensor
        label: str
        inner: torch.Tensor = None

    other = Other(x=torch.zeros(2), label="o", inner=torch.zeros(2), batch_size=[2])
    with pytest.raises(TypeError):
        torch.stack([_nested(0.0), other])


def test_setitem_with_a_mismatched_batch_uses_upstream_wording() -> None:
    data = _nested(0.0)
    with pytest.raises(RuntimeError, match="indexed destination TensorDict batch size is"):
        data[[0]] = _nested(1.0)


def test_batch_mismatch_names_the_offending_leaf() -> None:
    @tensorclass
    class Holder:
        td: TensorDict

    with pytest.raises(RuntimeError, match=r"the Tensor smth has shape torch.Size\(\[1\]\) which"):
        Holder(td=TensorDict(smth=torch.zeros(1)), batch_size=[3])


def test_gather_into_out_and_autograd_grad() -> None:
    data = _nested(1.0)
    out = data.gather(0, torch.tensor([1, 0]), out=data.clone().zero_())
    assert (out.x == 1).all()

    @tensorclass
    class Leaf:
        x: torch.Tensor

    a = Leaf(x=torch.randn(3, requires_grad=True))
    (grad,) = (torch.autograd.grad(a + 1, a, torch.ones_like(a)),)
    assert (grad.x == 1).all()


def test_a_complex_number_stays_a_python_object() -> None:
    @tensorclass
    class Value:
        v: Any

    assert Value(v=1 + 2j).v == 1 + 2j


def test_state_dict_round_trip_flat_and_nested() -> None:
    data = _nested(1.0)
    flat = data.state_dict()
    assert set(flat) == {"x", "inner.x"} and flat._metadata[""]["_non_tensor"]["label"] == "out1.0"
    target = _nested(0.0)
    target.load_state_dict(flat)
    assert (target.inner.x == 1).all() and target.inner.label == "in1.0"
    nested = data.state_dict(flatten=False)
    assert set(nested) == {"x", "inner"}
    other = _nested(0.0)
    other.load_state_dict(nested)
    assert (other.inner.x == 1).all()


def test_load_state_dict_refuses_unknown_keys() -> None:
    data = _nested(1.0)
    state = data.state_dict()
    state["bogus"] = torch.zeros(1)
    with pytest.raises(KeyError, match="Key 'bogus' wasn't expected"):
        data.load_state_dict(state)


def test_select_as_tensordict_and_is_non_tensor() -> None:
    data = _nested(1.0)
    assert type(data.select("x", as_tensordict=True)) is TensorDict
    assert data.select("x").label is None
    assert data.is_non_tensor("label") and not data.is_non_tensor("x")
