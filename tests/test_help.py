"""``help()`` shows the real API: every forwarded method, on every tensordict class and every
tensorclass, has the signature and docstring of the function that implements it."""

from __future__ import annotations

import importlib
import inspect
import pydoc

import pytest
import torch

import tensordict  # noqa: F401  (binds every forwarding row)
from tensordict import (
    LazyStackedTensorDict,
    PersistentTensorDict,
    TensorClass,
    TensorDict,
    TensorDictBase,
    tensorclass,
)
from tensordict.core import factory
from tensordict.core.behaviour.forwards import ForwardsMixin
from tensordict.nn import TensorDictParams
from tensordict.parallel import api
from tensordict.store import TensorDictStore


@tensorclass
class Decorated:
    x: torch.Tensor


class Subclassed(TensorClass):
    x: torch.Tensor


def rows() -> dict[str, tuple[object, str]]:
    """Every row of the forwarding table: name -> (its function, its kind)."""
    out = {}
    for owner, attr in factory._FORWARDED:
        if owner is ForwardsMixin and attr != "__repr__":
            function = getattr(TensorDict, attr)
            kind = "method" if inspect.isfunction(function) else "constructor"
            out[attr] = (getattr(function, "__func__", function), kind)
    return out


def test_the_table_has_the_methods_the_issue_names() -> None:
    assert {"map_iter", "map", "memmap_", "memmap", "load_memmap", "from_h5"} <= set(rows())


CLASSES = [
    TensorDict,
    LazyStackedTensorDict,
    PersistentTensorDict,
    TensorDictStore,
    TensorDictParams,
    Decorated,
    Subclassed,
]


#: tensorclasses: plain classes with fields, the TensorDict API forwarded to their tensordict
TENSORCLASSES = (Decorated, Subclassed)
#: TensorDict constructors that a tensorclass does not have (they build plain tensordicts)
TENSORDICT_ONLY = {"from_modules"}
#: the modules that generate a tensorclass's forwarders
GENERATORS = ("tensordict.tensorclass.forwarding", "tensordict.tensorclass.builder")


def own_override(cls: type, name: str) -> bool:
    """Whether ``cls`` (or a base other than the table) implements ``name`` itself, on purpose:
    a method written for that class, not a forwarder generated for a tensorclass (made by
    ``tensorclass.forwarding`` or ``tensorclass.builder``)."""
    for klass in cls.__mro__:
        if klass is ForwardsMixin:
            return False
        value = klass.__dict__.get(name)
        if value is not None:
            func = getattr(value, "__func__", value)
            return getattr(func, "__module__", None) not in GENERATORS
    return False


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_forwarded_method_shows_its_function_signature_and_docstring(cls: type) -> None:
    checked = 0
    for name, (function, kind) in rows().items():
        if own_override(cls, name) or (name in TENSORDICT_ONLY and cls in TENSORCLASSES):
            continue
        method = getattr(cls, name)
        expected = inspect.signature(function)
        if kind == "constructor":  # a classmethod: read from the class, without the class
            expected = expected.replace(parameters=list(expected.parameters.values())[1:])
        assert inspect.signature(method) == expected, (cls, name)
        assert inspect.getdoc(method) == inspect.getdoc(function), (cls, name)
        checked += 1
    assert checked >= 25


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_map_iter_map_and_memmap_have_their_full_parameter_lists(cls: type) -> None:
    for name, function in (("map_iter", api.map_iter), ("map", api.map)):
        params = list(inspect.signature(getattr(cls, name)).parameters)
        assert params == list(inspect.signature(function).parameters)
        assert "chunksize" in params and "kwargs" not in params
    memmap_ = importlib.import_module("tensordict.memmap.io").memmap_
    if not own_override(cls, "memmap_"):
        assert inspect.signature(cls.memmap_) == inspect.signature(memmap_)


def test_help_of_map_iter_lists_every_option() -> None:
    for cls in (TensorDict, Decorated):
        text = pydoc.render_doc(cls.map_iter, renderer=pydoc.plaintext)
        for option in ("chunksize", "num_chunks", "shuffle", "generator", "mp_start_method"):
            assert option in text, (cls, option)
        assert "Examples:" in text and "**kwargs" not in text


def test_a_bound_method_of_an_instance_drops_only_the_instance() -> None:
    td = TensorDict({"x": torch.zeros(2)}, [2])
    inst = Decorated(x=torch.zeros(2), batch_size=[2])
    for obj in (td, inst):
        params = list(inspect.signature(obj.map_iter).parameters)
        assert params[:2] == ["fn", "dim"]


def test_the_tensorclass_api_keeps_its_own_written_methods() -> None:
    """A tensorclass's own implementations (``load_memmap`` checks the class) keep their docs."""
    assert "holds something else" in inspect.getdoc(Decorated.load_memmap)
    assert issubclass(TensorDict, TensorDictBase)
