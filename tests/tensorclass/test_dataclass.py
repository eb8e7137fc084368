"""from_dataclass, and the names upstream uses for the forwarded API."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

from tensordict.tensorclass import from_dataclass, is_tensorclass, tensorclass

tc_module = sys.modules["tensordict.tensorclass"]  # (the package attribute is the decorator)


@dataclasses.dataclass
class Plain:
    a: int
    b: torch.Tensor
    c: str


@dataclasses.dataclass
class WithDefaults:
    x: torch.Tensor
    tag: str = "t"
    things: dict = dataclasses.field(default_factory=dict)


def test_a_type_gives_a_new_tensorclass() -> None:
    made = from_dataclass(Plain)
    assert is_tensorclass(made) and made is not Plain and made.__name__ == "Plain_tc"
    assert not is_tensorclass(Plain)


def test_flags_apply_to_the_made_class() -> None:
    auto = from_dataclass(Plain, autocast=True)(a=0, b=0, c=0)
    assert type(auto.a) is int and isinstance(auto.b, torch.Tensor) and auto.c == "0"
    raw = from_dataclass(Plain, nocast=True)(a=0, b=0, c=0)
    assert (type(raw.a), type(raw.b), type(raw.c)) == (int, int, int)
    default = from_dataclass(Plain)(a=0, b=0, c=0)
    assert all(isinstance(v, torch.Tensor) for v in (default.a, default.b, default.c))


def test_defaults_and_factories_are_kept() -> None:
    made = from_dataclass(WithDefaults)
    one, two = made(x=torch.zeros(1)), made(x=torch.zeros(1))
    assert one.tag == "t" and one.things == {} and one.things is not two.things


def test_inplace_turns_the_type_itself_into_a_tensorclass() -> None:
    @dataclasses.dataclass
    class Local:
        x: torch.Tensor

    assert from_dataclass(Local, inplace=True) is Local and is_tensorclass(Local)


def test_a_tensorclass_type_is_returned_as_is() -> None:
    @tensorclass
    class Already:
        x: torch.Tensor

    assert from_dataclass(Already) is Already


def test_an_instance_gives_an_instance_with_its_values() -> None:
    out = from_dataclass(WithDefaults(torch.zeros(4, 2), "u"), auto_batch_size=True, batch_dims=1)
    assert is_tensorclass(out) and out.batch_size == torch.Size([4]) and out.tag == "u"


def test_dest_cls_is_used_for_an_instance() -> None:
    made = from_dataclass(WithDefaults)
    assert type(from_dataclass(WithDefaults(torch.zeros(1)), dest_cls=made)) is made


def test_not_a_dataclass_is_refused() -> None:
    with pytest.raises(TypeError, match="dataclass"):
        from_dataclass(object())


def test_auto_batch_size_with_batch_size_is_refused() -> None:
    with pytest.raises(TypeError, match="exclusive"):
        from_dataclass(WithDefaults(torch.zeros(2)), auto_batch_size=True, batch_size=[2])


def test_forwarded_api_lists_are_sorted_unique_and_disjoint() -> None:
    lists = [
        tc_module._FALLBACK_METHOD_FROM_TD,
        tc_module._FALLBACK_METHOD_FROM_TD_FORCE,
        tc_module._FALLBACK_METHOD_FROM_TD_NOWRAP,
        tc_module._METHOD_FROM_TD,
    ]
    for names in lists:
        assert names == sorted(set(names))
    for i, first in enumerate(lists):
        for second in lists[i + 1 :]:
            assert not set(first) & set(second)


def test_every_listed_method_exists_on_tensorclasses() -> None:
    @tensorclass
    class Probe:
        x: torch.Tensor

    for name in tc_module._FALLBACK_METHOD_FROM_TD + tc_module._METHOD_FROM_TD:
        assert hasattr(Probe, name), name
