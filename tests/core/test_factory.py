"""core.factory: late-bound names and forwarded methods."""

from __future__ import annotations

import importlib
import inspect

import pytest

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict.core import factory
from tensordict.core.behaviour.forwards import ForwardsMixin
from tensordict.core.factory import forward


def test_a_late_name_is_the_object_of_its_home_and_is_kept() -> None:
    assert factory.LazyStackedTensorDict is LazyStackedTensorDict
    assert factory.TensorDict is TensorDict
    assert vars(factory)["TensorDict"] is TensorDict  # later uses read the module attribute


def test_every_late_name_resolves_in_its_home() -> None:
    for name, home in factory._HOMES.items():
        assert getattr(factory, name) is getattr(importlib.import_module(home), name)


def test_an_unknown_late_name_raises_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        factory.nothing_here  # noqa: B018


def test_forward_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        forward("os.path", "join", "static")


def test_a_forwarded_method_binds_once_and_replaces_itself() -> None:
    class Path(str):
        base = forward("posixpath", "basename")
        join = forward("posixpath", "join", "constructor")

    assert isinstance(Path.__dict__["base"], forward)
    assert Path("/a/b.txt").base() == "b.txt"
    assert not isinstance(Path.__dict__["base"], forward)
    assert Path.join("a", "b") == "a/b"  # a constructor: called on the class, which it drops
    assert list(inspect.signature(Path.join).parameters)[:2] == ["a", "p"]


def test_aliases_of_one_row_bind_to_the_same_function() -> None:
    class Two:
        first = second = forward("posixpath", "basename")

    assert Two.first is Two.second


def test_import_tensordict_leaves_no_forwarding_row_unbound() -> None:
    unbound = [n for n, v in vars(ForwardsMixin).items() if isinstance(v, forward)]
    assert unbound == []


def test_no_class_shadows_a_forwarded_method() -> None:
    rows = {n for n in vars(ForwardsMixin) if not n.startswith("__") or n == "__repr__"}
    rows.discard("__slots__")
    for cls in TensorDictBase.__mro__:
        if cls in (ForwardsMixin, object):
            continue
        assert not rows & set(vars(cls)), (cls, rows & set(vars(cls)))


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("map_iter", "tensordict.parallel.api"),
        ("map", "tensordict.parallel.api"),
        ("memmap_", "tensordict.memmap.io"),
        ("state_dict", "tensordict.core.serial.state_dict"),
    ],
)
def test_a_forwarded_method_is_its_function_so_help_shows_every_argument(
    name: str, home: str
) -> None:
    function = getattr(importlib.import_module(home), name)
    assert getattr(TensorDict, name) is function
    assert getattr(LazyStackedTensorDict, name) is function
    assert "Examples:" in (function.__doc__ or "")


def test_a_constructor_row_shows_its_functions_arguments_without_the_class() -> None:
    from tensordict.formats.persistent import open_h5

    assert inspect.signature(TensorDict.from_h5) == inspect.signature(open_h5)
    assert inspect.ismethod(TensorDict.from_h5)  # a classmethod, as upstream's
