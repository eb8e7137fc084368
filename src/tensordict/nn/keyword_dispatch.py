"""``@dispatch``: call a tensordict module with tensors instead of a tensordict.

A method ``forward(self, tensordict, ...)`` decorated with ``@dispatch`` still accepts a
tensordict; it also accepts the entries named by the module's ``in_keys`` as positional or
keyword arguments (nested keys joined with ``separator``: ``("a", "b")`` is ``a_b``), builds the
tensordict from them, and returns the values of ``out_keys`` instead of the tensordict (one value
alone, several as a tuple).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tensordict.core.behaviour.base import is_tensor_collection
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey
from tensordict.nn.utils import _dispatch_td_nn_modules

__all__ = ["dispatch"]


def _flat_name(key: NestedKey, separator: str) -> str:
    return key if isinstance(key, str) else separator.join(_key_tuple(key))


def _key_tuple(key: Any) -> tuple[str, ...]:
    if isinstance(key, str):
        return (key,)
    out: tuple[str, ...] = ()
    for part in key:
        out += _key_tuple(part)
    return out


class dispatch:
    """Let a ``forward(self, tensordict, ...)`` method take tensors as arguments.

    Usable bare (``@dispatch``) or with arguments (``@dispatch(separator="_")``).

    Args:
        separator: joins the parts of a nested key into a keyword name. Defaults to ``"_"``.
        source: the input keys, or the name of the module attribute holding them.
            Defaults to ``"in_keys"``.
        dest: the output keys returned, or the name of the attribute holding them.
            Defaults to ``"out_keys"``.
        auto_batch_size: give the built tensordict the batch size its tensors share
            (else no batch dimension). Defaults to True.

    Raises:
        RuntimeError: the first argument after ``self`` is not named ``tensordict``; or an
            entry given both positionally and by keyword.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> class Add(nn.Module):
        ...     in_keys = ["x", ("y", "z")]
        ...     out_keys = ["sum"]
        ...     @dispatch
        ...     def forward(self, tensordict):
        ...         tensordict["sum"] = tensordict["x"] + tensordict["y", "z"]
        ...         return tensordict
        >>> Add()(x=torch.ones(2), y_z=torch.ones(2))
        tensor([2., 2.])
    """

    DEFAULT_SEPARATOR = "_"
    DEFAULT_SOURCE = "in_keys"
    DEFAULT_DEST = "out_keys"

    def __new__(
        cls,
        separator: Any = DEFAULT_SEPARATOR,
        source: str | Sequence[NestedKey] = DEFAULT_SOURCE,
        dest: str | Sequence[NestedKey] = DEFAULT_DEST,
        auto_batch_size: bool = True,
    ) -> Any:
        if callable(separator):  # used bare: @dispatch
            self = super().__new__(cls)
            self.__init__()  # type: ignore[misc]
            return self(separator)
        return super().__new__(cls)

    def __init__(
        self,
        separator: str = DEFAULT_SEPARATOR,
        source: str | Sequence[NestedKey] = DEFAULT_SOURCE,
        dest: str | Sequence[NestedKey] = DEFAULT_DEST,
        auto_batch_size: bool = True,
    ) -> None:
        self.separator = separator
        self.source = source
        self.dest = dest
        self.auto_batch_size = auto_batch_size

    def _keys(self, spec: Any, owner: Any, what: str) -> list[NestedKey]:
        if not isinstance(spec, str):
            return list(spec)
        if owner is None:
            raise RuntimeError(
                f"dispatch on a plain function needs the {what} keys as a list "
                f"(@dispatch({what}=[...])), not the attribute name {spec!r}."
            )
        return list(getattr(owner, spec))

    def _build(self, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The tensordict made from tensors given as arguments, and the remaining arguments."""
        values: dict[Any, Any] = {}
        for key in self._keys(self.source, owner, "source"):
            name = _flat_name(key, self.separator)
            if args:
                if name in kwargs:
                    raise RuntimeError(
                        f"Duplicated argument in args and kwargs: {name!r} was given both "
                        "positionally and by keyword."
                    )
                values[key], args = args[0], args[1:]
            elif name in kwargs:
                values[key] = kwargs.pop(name)
        td = TensorDict()
        for key, value in values.items():
            td.set(key, value)
        if self.auto_batch_size:
            td.auto_batch_size_()
        return td, args, kwargs

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        bound = getattr(func, "__self__", None) if inspect.ismethod(func) else None
        params = list(inspect.signature(func).parameters)
        is_method = bound is None and bool(params) and params[0] == "self"
        first = params[1] if is_method and len(params) > 1 else (params[0] if params else None)
        if first is not None and first != "tensordict":
            raise RuntimeError(
                "the first argument of the wrapped function must be named 'tensordict'. "
                f"Got {first} instead."
            )
        if not _dispatch_td_nn_modules():
            return func

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            owner = args[0] if is_method else bound
            rest = args[1:] if is_method else args
            if (rest and is_tensor_collection(rest[0])) or not _dispatch_td_nn_modules():
                return func(*args, **kwargs)
            if not rest and is_tensor_collection(kwargs.get("tensordict")):
                return func(*args, **kwargs)
            td, rest, kwargs = self._build(owner, rest, dict(kwargs))
            out = func(owner, td, *rest, **kwargs) if is_method else func(td, *rest, **kwargs)
            values = tuple(out[k] for k in self._keys(self.dest, owner, "dest") if k != "_")
            return values[0] if len(values) == 1 else values

        wrapper.__signature__ = _loose_signature(func)  # type: ignore[attr-defined]
        return wrapper


def _loose_signature(func: Callable[..., Any]) -> inspect.Signature:
    """The signature with required positional parameters made optional (tensors may replace
    the tensordict), so that ``inspect`` based tools accept both calling styles."""
    out = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD) and (
            param.default is inspect.Parameter.empty
        ):
            param = param.replace(kind=param.POSITIONAL_OR_KEYWORD, default=None)
        out.append(param)
    return inspect.Signature(out)
