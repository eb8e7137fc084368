"""``TensorClass``: the base-class spelling of ``@tensorclass``, and the ``tensor_only`` option."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from tensordict import TensorClass, TensorDict, tensorclass
from tensordict.errors import (
    FieldTypeError,
    FrozenTensorclassError,
    TensorclassDefinitionError,
)


class Sample(TensorClass):
    obs: torch.Tensor
    label: str = "none"


class Counted(Sample, nocast=True):
    n: int = 0


class Frozen(TensorClass["frozen"]):
    x: torch.Tensor


class Dense(TensorClass["tensor_only"]):
    x: torch.Tensor
    y: torch.Tensor | None = None


def test_a_subclass_is_a_full_tensorclass(tmp_path) -> None:
    s = Sample(obs=torch.arange(6.0).reshape(3, 2), label="cat", batch_size=[3])
    assert isinstance(s, TensorClass) and type(s[1:]) is Sample and s[1:].label == "cat"
    assert type(torch.stack([s, s])) is Sample and torch.stack([s, s]).batch_size == (2, 3)
    assert torch.equal(pickle.loads(pickle.dumps(s)).obs, s.obs)
    s.memmap_(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path)
    assert type(loaded) is Sample and torch.equal(loaded.obs, s.obs)


def test_options_by_keyword_are_inherited_with_the_fields() -> None:
    c = Counted(obs=torch.zeros(2), n=3, batch_size=[2])
    assert c.n == 3 and isinstance(c.n, int) and c.label == "none"
    assert isinstance(Counted(obs=torch.zeros(2), n=1.5, batch_size=[2]).n, float)
    assert Sample._tensorclass_options == {} and Counted._tensorclass_options == {"nocast": True}


def test_options_by_subscript() -> None:
    f = Frozen(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(FrozenTensorclassError):
        f.x = torch.ones(2)
    assert f.is_locked


def test_unknown_or_contradictory_options_are_refused() -> None:
    with pytest.raises(TensorclassDefinitionError, match="'nope'"):
        TensorClass["nope"]
    with pytest.raises(TensorclassDefinitionError, match="exclusive"):

        class Both(TensorClass["autocast", "nocast"]):
            x: int


def test_tensor_only_converts_numbers_and_refuses_python_objects() -> None:
    d = Dense(x=3, y=np.ones(2), batch_size=[])
    assert torch.equal(d.x, torch.tensor(3))
    assert torch.equal(d.y, torch.ones(2, dtype=torch.float64))
    with pytest.raises(FieldTypeError, match="tensor_only"):
        Dense(x="three", batch_size=[])
    d.y = None  # unset stays allowed
    assert d.y is None
    with pytest.raises(FieldTypeError, match="tensor_only"):
        d.x = object()
    assert torch.equal(d.x, torch.tensor(3))


def test_tensor_only_through_the_decorator() -> None:
    @tensorclass(tensor_only=True)
    class Point:
        xy: torch.Tensor

    assert torch.equal(Point(xy=1.5, batch_size=[]).xy, torch.tensor(1.5))
    with pytest.raises(FieldTypeError):
        Point(xy="a", batch_size=[])
    with pytest.raises(TensorclassDefinitionError, match="tensor_only is exclusive with nocast"):
        tensorclass(nocast=True, tensor_only=True)(type("P", (), {"__annotations__": {"x": int}}))


def test_tensor_only_accepts_dicts_and_number_lists_and_explains_the_rest() -> None:
    class Nested(TensorClass["tensor_only"]):
        td: TensorDict
        v: torch.Tensor

    n = Nested(td={"a": torch.zeros(2)}, v=[1, 2], batch_size=[2])
    assert isinstance(n.td, TensorDict) and torch.equal(n.v, torch.tensor([1, 2]))
    with pytest.raises(FieldTypeError, match="does not convert"):
        Nested(td={}, v=np.array(["a", "b"]), batch_size=[])


def test_non_tensor_data_and_its_subclasses_count_as_tensorclasses() -> None:
    # as upstream, where NonTensorData is made by @tensorclass
    from tensordict import NonTensorData, NonTensorStack, is_tensor_collection, is_tensorclass
    from tensordict.utils import _is_tensorclass, is_non_tensor

    class Sub(NonTensorData): ...

    assert is_tensorclass(NonTensorData) and is_tensorclass(Sub) and _is_tensorclass(Sub)
    assert is_tensorclass(Sub(data=1, batch_size=[]))
    assert is_tensor_collection(Sub) and is_non_tensor(Sub(data=1, batch_size=[]))
    assert not is_tensorclass(NonTensorStack)


class _Wrapped(TensorClass["nocast"]):
    """Overrides tensorclass methods and reaches the generated ones with ``super()``
    (TorchRL's ``VideoClipRef.__getitem__`` does)."""

    x: torch.Tensor

    def __getitem__(self, index: object) -> object:
        return ("item", super().__getitem__(index))

    def to(self, *args: object, **kwargs: object) -> object:
        return ("to", super().to(*args, **kwargs))


def test_a_subclass_override_reaches_the_tensorclass_method_with_super() -> None:
    v = _Wrapped(x=torch.arange(4.0), batch_size=[4])
    tag, part = v[1:3]
    assert tag == "item" and type(part) is _Wrapped and part.x.tolist() == [1.0, 2.0]
    tag, moved = v.to("cpu")
    assert tag == "to" and type(moved) is _Wrapped
    assert "__getitem__" in vars(TensorClass) and "to" in vars(TensorClass)


class _Own(TensorClass):
    x: torch.Tensor

    def to_dict(self, **kwargs):  # a user's method: subclasses inherit it, not the forwarder
        return {"own": True}


class _OwnChild(_Own):
    y: torch.Tensor


def test_subclasses_share_the_api_of_their_base_and_keep_user_methods() -> None:
    # defining a subclass costs no new forwarders (TorchRL defines dozens at import, and every
    # spawned worker pays for them): the API comes from TensorClass itself
    assert "apply" not in vars(Sample) and "apply" not in vars(_OwnChild)
    assert _OwnChild.apply is TensorClass.apply
    child = _OwnChild(x=torch.zeros(3), y=torch.ones(3), batch_size=[3])
    assert child.to_dict() == {"own": True}
    doubled = child.apply(lambda t: t * 2)
    assert type(doubled) is _OwnChild and doubled.y.tolist() == [2.0, 2.0, 2.0]


def test_every_decorated_class_shows_tensordicts_signatures() -> None:
    # the forwarders' description is looked up once per name and reused by every later class
    import inspect

    first = tensorclass(type("First", (), {"__annotations__": {"x": torch.Tensor}}))
    second = tensorclass(type("Second", (), {"__annotations__": {"x": torch.Tensor}}))
    for cls in (first, second):
        assert "apply" in vars(cls)
        assert cls.apply.__qualname__ == f"{cls.__qualname__}.apply"
        assert inspect.signature(cls.apply) == inspect.signature(TensorDict.apply)
        assert cls.apply.__doc__ == TensorDict.apply.__doc__
