"""Stand-ins for names of upstream's API that are being built: importable, failing on use.

Code written for upstream imports many names at module level (``from tensordict.nn import
TensorDictModule``). While a feature is being built, its name still has to be importable so that
such modules load; using the stand-in raises :class:`~tensordict.errors.NotYetAvailableError`
naming the feature and its issue. A stand-in class can be subclassed, used in ``isinstance`` and
subscripted (``TypedTensorDict["shadow"]``); creating an instance, calling it or reading a public
attribute raises.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NoReturn

from tensordict.errors import NotYetAvailableError

__all__ = ["coming_class", "coming_function", "coming_value"]


def _message(qualname: str, feature: str, issue: int) -> str:
    return (
        f"{qualname} is not available yet in this tensordict: it comes with {feature} "
        f"(issue {issue}). Until then, use upstream tensordict for code that needs it."
    )


def _raiser(qualname: str, feature: str, issue: int) -> Callable[..., NoReturn]:
    def fail(*args: Any, **kwargs: Any) -> NoReturn:
        raise NotYetAvailableError(_message(qualname, feature, issue))

    return fail


class _ComingMeta(type):
    """Metaclass of stand-in classes: public class attributes raise instead of being missing."""

    _coming: tuple[str, str, int]

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        qualname, feature, issue = cls._coming
        raise NotYetAvailableError(_message(f"{qualname}.{name}", feature, issue))

    def __getitem__(cls, item: Any) -> Any:
        return cls


def coming_class(name: str, module: str, feature: str, issue: int) -> type:
    """A class that stands for upstream's class ``module.name`` until ``feature`` lands.

    Args:
        name: the class name, as upstream spells it.
        module: the import path the class is served from.
        feature: what brings the real class (e.g. ``"tensordict.nn"``).
        issue: the number of the issue that tracks the feature.

    Returns:
        A class that imports, subclasses and answers ``isinstance`` (always ``False`` for
        objects that are not instances of a subclass), and raises
        :class:`~tensordict.errors.NotYetAvailableError` when instantiated.

    Examples:
        >>> Later = coming_class("Later", "tensordict.example", "a later release", 1)
        >>> isinstance(3, Later)
        False
        >>> Later()
        Traceback (most recent call last):
        ...
        tensordict.errors.NotYetAvailableError: tensordict.example.Later is not available yet ...
    """
    qualname = f"{module}.{name}"
    fail = _raiser(qualname, feature, issue)

    def __new__(cls: type, *args: Any, **kwargs: Any) -> NoReturn:
        fail()

    namespace = {
        "__new__": __new__,
        "__module__": module,
        "__doc__": f"Not available yet: comes with {feature} (issue {issue}).",
        "_coming": (qualname, feature, issue),
    }
    return _ComingMeta(name, (), namespace)


def coming_function(name: str, module: str, feature: str, issue: int) -> Callable[..., Any]:
    """A function that stands for upstream's ``module.name`` until ``feature`` lands.

    Calling it raises :class:`~tensordict.errors.NotYetAvailableError`.

    Examples:
        >>> later = coming_function("later", "tensordict.example", "a later release", 1)
        >>> later(1)
        Traceback (most recent call last):
        ...
        tensordict.errors.NotYetAvailableError: tensordict.example.later is not available yet ...
    """
    fail = _raiser(f"{module}.{name}", feature, issue)

    @functools.wraps(fail)
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        fail()

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__module__ = module
    stand_in.__doc__ = f"Not available yet: comes with {feature} (issue {issue})."
    return stand_in


def coming_value(name: str, module: str, feature: str, issue: int) -> Any:
    """An object standing for a constant or instance upstream exports (e.g. an enum member).

    Any public attribute access or call raises :class:`~tensordict.errors.NotYetAvailableError`.
    """
    cls = coming_class(name, module, feature, issue)
    value = object.__new__(_ComingValue)
    value._coming = (f"{module}.{name}", feature, issue)
    value._cls = cls
    return value


class _ComingValue:
    _coming: tuple[str, str, int]
    _cls: type

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        qualname, feature, issue = self._coming
        raise NotYetAvailableError(_message(f"{qualname}.{name}", feature, issue))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        qualname, feature, issue = self._coming
        raise NotYetAvailableError(_message(qualname, feature, issue))

    def __repr__(self) -> str:
        return f"<not yet available: {self._coming[0]}>"
