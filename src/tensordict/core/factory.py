"""Late binding: the one place where code low in core reaches what is built on top of it.

core is read in tiers (see ``tensordict.core``), and a module imports only its own tier and the
ones below. Yet the behaviour written once in ``TensorDictBase`` must sometimes build a
``TensorDict``, a lazy stack or a view, and some of its methods are implemented by the rooms
and packages above (serial, padding, memmap, parallel, nn, formats, store). Those two needs go
through this module, and only through it:

* **names**: ``from tensordict.core import factory``, then ``factory.TensorDict``,
  ``factory.LazyStackedTensorDict``, ``factory.stack_lazy(...)`` inside a function. The name is
  imported from its home (the table ``_HOMES``) on first use and kept as an attribute of this
  module, so later uses cost one attribute lookup. Importing a name from this module at module
  level (``from tensordict.core.factory import X``) would import its home too early: don't.
* **forwarded methods**: ``map_iter = forward(parallel.map_iter)`` in a class body, where
  ``parallel = home("tensordict.parallel.api")`` (a name for the module, not imported), makes
  the function the method (its signature and docstring, which ``help()`` shows); bound on first
  use, or for every class at once by :func:`bind_forwarded` (``import tensordict`` calls it).
  Type checkers see the real module instead (imported under ``TYPE_CHECKING``), and ``forward``
  as a descriptor generic over the function's parameters: ``td.map_iter(f, chunk_size=5)`` is a
  type error, as the function's own call would be. The older row form
  ``forward("tensordict.parallel.api", "map_iter")`` still works, typed ``Any``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    TypeVar,
    overload,
)

if TYPE_CHECKING:  # the names' types, for type checkers: at run time they bind on first use
    from tensordict.core.dense import TensorDict  # noqa: F401
    from tensordict.core.lazy.new_lazy import new_like_lazy  # noqa: F401
    from tensordict.core.lazy.shape import (  # noqa: F401
        cat_lazy,
        maybe_dense_stack,
        pad_lazy,
        stack_lazy,
    )
    from tensordict.core.lazy.stack import LazyStackedTensorDict  # noqa: F401
    from tensordict.core.lazy.views import _SubTensorDict, lazy_shape_view  # noqa: F401
    from tensordict.formats.persistent import PersistentTensorDict  # noqa: F401
    from tensordict.formats.tables import from_pandas  # noqa: F401
    from tensordict.memmap.io import rewrite_saved_non_tensor  # noqa: F401
    from tensordict.nn.functional_modules import from_module  # noqa: F401
    from tensordict.tensorclass.attrs import TensorAttrs  # noqa: F401
    from tensordict.tensorclass.forwarding import tensorclass_dispatch  # noqa: F401

__all__ = ["Forward", "Ref", "bind_forwarded", "forward", "home"]

# name -> the module it lives in (its home, higher up than the code that uses it)
_HOMES = {
    "TensorDict": "tensordict.core.dense",
    "LazyStackedTensorDict": "tensordict.core.lazy.stack",
    "_SubTensorDict": "tensordict.core.lazy.views",
    "lazy_shape_view": "tensordict.core.lazy.views",
    "stack_lazy": "tensordict.core.lazy.shape",
    "cat_lazy": "tensordict.core.lazy.shape",
    "maybe_dense_stack": "tensordict.core.lazy.shape",
    "pad_lazy": "tensordict.core.lazy.shape",
    "new_like_lazy": "tensordict.core.lazy.new_lazy",
    "from_module": "tensordict.nn.functional_modules",
    "TensorAttrs": "tensordict.tensorclass.attrs",
    "tensorclass_dispatch": "tensordict.tensorclass.forwarding",
    "rewrite_saved_non_tensor": "tensordict.memmap.io",
    "from_pandas": "tensordict.formats.tables",
    "PersistentTensorDict": "tensordict.formats.persistent",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later uses find it without coming here
    return value


_KINDS = ("method", "classmethod", "constructor")
_FORWARDED: list[tuple[type, str]] = []


class Ref:
    """The function ``name`` of module ``home``, named without importing it (see :func:`home`)."""

    __slots__ = ("home", "name")

    def __init__(self, home: str, name: str) -> None:
        self.home, self.name = home, name

    def __repr__(self) -> str:
        return f"{self.home}.{self.name}"


class home:
    """A module named for a forwarding table, not imported: ``home("a.b").f`` is ``Ref("a.b",
    "f")``. Type checkers are shown the module itself (imported under ``TYPE_CHECKING``).

    Examples:
        >>> home("posixpath").basename
        posixpath.basename
    """

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Ref:
        if name.startswith("__"):
            raise AttributeError(name)
        return Ref(self._module, name)


class Forward:
    """A method whose implementation is the function ``ref`` names (or ``name`` of ``home``).

    ``kind`` says how the function is bound: ``"method"`` (it takes the instance first),
    ``"classmethod"`` (it takes the class first) or ``"constructor"`` (a classmethod, as
    upstream's ``from_*`` are, whose function does not take the class). On first use
    the descriptor replaces itself in its class by the function, so that calls cost what a plain
    method costs, and ``help()`` shows the function's signature and docstring. Rows are written
    ``forward(...)``: the same class at run time, a typed descriptor for type checkers.

    Examples:
        >>> import posixpath
        >>> class Path(str):
        ...     base = forward(home("posixpath").basename)
        ...     dirname = forward("posixpath", "dirname")  # the older form: typed Any
        >>> Path("/tmp/a.txt").base()
        'a.txt'
        >>> Path.__dict__["base"] is posixpath.basename
        True
        >>> Path("/tmp/a.txt").dirname()
        '/tmp'
    """

    def __init__(self, home: str | Ref, name: str = "method", kind: str = "method") -> None:
        if isinstance(home, Ref):  # forward(ref, kind)
            module, name, kind = home.home, home.name, name
        else:
            module = home
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}.")
        self.home, self.name, self.kind = module, name, kind
        self.owner: type | None = None
        self.attrs: list[str] = []  # (``load = load_memmap`` in a class body: two names)

    def __set_name__(self, owner: type, attr: str) -> None:
        self.owner = owner
        self.attrs.append(attr)
        _FORWARDED.append((owner, attr))

    def __repr__(self) -> str:
        return f"forward({self.home}.{self.name}, {self.kind!r})"

    def bind(self) -> Any:
        """Replace this descriptor in its class by the function; return what was set."""
        func = getattr(importlib.import_module(self.home), self.name)
        bound: Any = func
        if self.kind == "classmethod":
            bound = classmethod(func)
        elif self.kind == "constructor":
            bound = classmethod(_ignoring_class(func))
        for attr in self.attrs:
            setattr(self.owner, attr, bound)
        return bound

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self.bind().__get__(instance, owner)


P = ParamSpec("P")
R = TypeVar("R", covariant=True)


class Method(Generic[P, R]):
    """What type checkers see of a forwarded method: the function without its first parameter
    (the instance) when read from an instance, the whole function when read from the class."""

    @overload
    def __get__(self, instance: None, owner: Any, /) -> Callable[Concatenate[Any, P], R]: ...
    @overload
    def __get__(self, instance: object, owner: Any = None, /) -> Callable[P, R]: ...
    def __get__(self, instance: Any, owner: Any = None, /) -> Any:
        raise NotImplementedError  # pragma: no cover - never instantiated


class Constructor(Generic[P, R]):
    """What type checkers see of a forwarded classmethod: the function without its first
    parameter (the class) for ``"classmethod"``, the whole function for ``"constructor"``."""

    def __get__(self, instance: Any, owner: Any = None, /) -> Callable[P, R]:
        raise NotImplementedError  # pragma: no cover - never instantiated


if TYPE_CHECKING:

    @overload
    def forward(
        home: Callable[Concatenate[Any, P], R], name: Literal["method"] = "method", /
    ) -> Method[P, R]: ...
    @overload
    def forward(
        home: Callable[Concatenate[Any, P], R], name: Literal["classmethod"], /
    ) -> Constructor[P, R]: ...
    @overload
    def forward(home: Callable[P, R], name: Literal["constructor"], /) -> Constructor[P, R]: ...
    @overload
    def forward(home: str, name: str, kind: str = "method", /) -> Any: ...
    def forward(home: Any, name: str = "method", kind: str = "method", /) -> Any: ...

else:
    forward = Forward


def _ignoring_class(func: Any) -> Any:
    """``func`` as the function of a classmethod: it takes the class first and drops it (its
    signature, shown by ``help()``, is ``func``'s with ``cls`` in front)."""

    @functools.wraps(func)
    def constructor(cls: type, *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    sig = inspect.signature(func)
    cls_param = inspect.Parameter("cls", inspect.Parameter.POSITIONAL_ONLY)
    constructor.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[cls_param, *sig.parameters.values()]
    )
    return constructor


def bind_forwarded() -> None:
    """Bind every forwarded method still unbound (``import tensordict`` calls this once every
    module is loaded, so that no descriptor is left for ``torch.compile`` to trace through)."""
    for owner, attr in _FORWARDED:
        value = owner.__dict__.get(attr)
        if isinstance(value, Forward):
            value.bind()
