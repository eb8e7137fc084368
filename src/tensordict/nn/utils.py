"""Small helpers of ``tensordict.nn``: positive mappings and the global switches modules read.

* Mappings from real numbers to positive numbers (scales of distributions): :func:`mappings`,
  :func:`biased_softplus`, :func:`expln`, :func:`inv_softplus`, :func:`add_custom_mapping`.
* Switches, each a process-wide mode that a ``with`` block (or a decorator) sets for its length:
  :class:`set_skip_existing` / :func:`skip_existing` (modules skip work whose outputs exist),
  :class:`set_composite_lp_aggregate` / :func:`composite_lp_aggregate` (composite distributions
  sum their log-probabilities into one tensor), ``_set_dispatch_td_nn_modules`` (whether
  ``@dispatch`` accepts keyword tensors).
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.compiler import is_compiling
from torch.nn.parameter import Buffer  # noqa: F401  (upstream's import path; TorchRL imports it)
from torch.utils._contextlib import _DecoratorContextManager

from tensordict.core.keys import NestedKey, unravel_key_list

__all__ = [
    "add_custom_mapping",
    "biased_softplus",
    "composite_lp_aggregate",
    "expln",
    "inv_softplus",
    "mappings",
    "set_composite_lp_aggregate",
    "set_skip_existing",
    "skip_existing",
]

_UNSET: Any = object()


def _env_flag(name: str, default: bool | None) -> bool | None:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on", "y", "t")


class _Mode:
    """A process-wide value that a thread may override for itself (``thread_local`` blocks)."""

    def __init__(self, default: Any) -> None:
        self.value = default
        self._local = threading.local()
        self._threaded = False

    def get(self) -> Any:
        if self._threaded:
            mine = getattr(self._local, "value", _UNSET)
            if mine is not _UNSET:
                return mine
        return self.value

    def set(self, value: Any) -> None:
        if self._threaded and getattr(self._local, "value", _UNSET) is not _UNSET:
            self._local.value = value
        else:
            self.value = value

    def get_thread(self) -> Any:
        return getattr(self._local, "value", _UNSET)

    def set_thread(self, value: Any) -> None:
        self._threaded = True
        self._local.value = value


_SKIP_EXISTING = _Mode(False)
_DISPATCH = _Mode(_env_flag("DISPATCH_TDNN_MODULES", True))
_COMPOSITE_LP_AGGREGATE = _Mode(_env_flag("COMPOSITE_LP_AGGREGATE", None))


# ====================================================================== positive mappings
def inv_softplus(bias: float | torch.Tensor) -> float | torch.Tensor:
    """The input for which ``softplus`` returns ``bias``: ``log(exp(bias) - 1)``.

    ``exp(bias) - 1`` is clamped to at least ``1e-6`` so that ``bias <= 0`` gives a finite value.

    Examples:
        >>> import torch
        >>> round(inv_softplus(1.0), 4)
        0.5413
        >>> torch.nn.functional.softplus(inv_softplus(torch.tensor([2.0])))
        tensor([2.])
    """
    tensor = bias if isinstance(bias, torch.Tensor) else torch.tensor(bias)
    out = tensor.expm1().clamp_min(1e-6).log()
    if not isinstance(bias, torch.Tensor) and out.numel() == 1:
        return out.item()
    return out


class biased_softplus(nn.Module):
    """``softplus(x + inv_softplus(bias - min_val)) + min_val``: ``bias`` at 0, above ``min_val``.

    Args:
        bias: the value for a zero input.
        min_val: the lower bound. Defaults to ``0.01``.

    Examples:
        >>> import torch
        >>> biased_softplus(2.0)(torch.zeros(2)).round(decimals=4)
        tensor([2., 2.])
    """

    def __init__(self, bias: float, min_val: float = 0.01) -> None:
        super().__init__()
        self.bias = inv_softplus(bias - min_val)
        self.min_val = min_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x + self.bias) + self.min_val


def expln(x: torch.Tensor) -> torch.Tensor:
    """``exp(x)`` for ``x <= 0``, ``log1p(x) + 1`` above: positive, smooth, logarithmic growth.

    Examples:
        >>> import torch
        >>> expln(torch.tensor([-1.0, 0.0, 1.0]))
        tensor([0.3679, 1.0000, 1.6931])
    """
    return torch.where(x <= 0, x.clamp_max(0).exp(), x.clamp_min(0).log1p() + 1)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


_MAPPINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softplus": torch.nn.functional.softplus,
    "exp": torch.exp,
    "relu": torch.relu,
    "biased_softplus": biased_softplus(1.0),
    "none": _identity,
    "expln": expln,
}


def mappings(key: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The elementwise function named ``key`` (mostly maps to positive numbers, for scales).

    Known names: ``"softplus"``, ``"exp"``, ``"relu"``, ``"expln"``, ``"biased_softplus"``
    (bias 1), ``"biased_softplus_{bias}"``, ``"biased_softplus_{bias}_{min_val}"``, ``"none"``
    (identity), and names added with :func:`add_custom_mapping`.

    Raises:
        NotImplementedError: an unknown name.
        ValueError: a ``biased_softplus_...`` name with the wrong number of parts.

    Examples:
        >>> import torch
        >>> mappings("exp")(torch.zeros(1))
        tensor([1.])
        >>> mappings("biased_softplus_2.0_0.1")(torch.zeros(1))
        tensor([2.])
    """
    if key in _MAPPINGS:
        return _MAPPINGS[key]
    if key.startswith("biased_softplus"):
        parts = key.split("_")[2:]
        if len(parts) == 1:
            return biased_softplus(float(parts[0]))
        if len(parts) == 2:
            return biased_softplus(float(parts[0]), min_val=float(parts[1]))
        raise ValueError(
            f"Invalid number of args in {key!r}: expected 'biased_softplus_<bias>' or "
            "'biased_softplus_<bias>_<min_val>'."
        )
    raise NotImplementedError(
        f"Unknown mapping {key}. Known mappings: {sorted(_MAPPINGS)}, or "
        "'biased_softplus_<bias>[_<min_val>]'; register others with add_custom_mapping."
    )


def add_custom_mapping(name: str, mapping: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Register ``mapping`` under ``name`` for :func:`mappings` (replacing any previous one).

    Examples:
        >>> import torch
        >>> add_custom_mapping("double", lambda x: 2 * x)
        >>> mappings("double")(torch.ones(1))
        tensor([2.])
    """
    _MAPPINGS[name] = mapping


# ====================================================================== skip_existing
def skip_existing() -> bool | list[NestedKey]:
    """The mode of :class:`set_skip_existing`: False (default), True or a list of keys.

    Examples:
        >>> with set_skip_existing(["a"]):
        ...     skip_existing()
        ['a']
        >>> skip_existing()
        False
    """
    return _SKIP_EXISTING.get()  # type: ignore[no-any-return]


def _should_skip(mode: Any, module: Any, tensordict: Any, in_attr: str, out_attr: str) -> bool:
    if not mode:
        return False
    out_keys = getattr(module, out_attr)
    in_keys = getattr(module, in_attr)
    if mode is not True and not all(k in mode for k in out_keys):
        return False
    present = tensordict.keys(include_nested=True)
    return all(k in present for k in out_keys) and not any(k in out_keys for k in in_keys)


def _check_tensordict_first(func: Callable[..., Any]) -> None:
    names = list(inspect.signature(func).parameters)
    if len(names) > 1 and names[1] != "tensordict":
        raise RuntimeError(
            "the first argument of the wrapped function must be named 'tensordict', got "
            f"{names[1]!r}."
        )


class set_skip_existing(_DecoratorContextManager):
    """Modules skip their work when all their ``out_keys`` are already in the input.

    As a context manager it sets :func:`skip_existing` for the block; as a decorator of a
    ``forward(self, tensordict, ...)`` method it checks the module's keys first (with
    ``mode=None`` the enclosing block decides). A module whose outputs are among its inputs always
    runs.

    Args:
        mode: True, False, a list of keys (only modules whose outputs are all listed may skip), or
            None (decorators only). Defaults to True.
        in_key_attr: the module attribute holding its input keys.
        out_key_attr: the module attribute holding its output keys.
        thread_local: the mode applies to the calling thread only.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        >>> td = TensorDict(x=torch.zeros(()), y=torch.zeros(()))
        >>> with set_skip_existing():
        ...     module(td)["y"]
        tensor(0.)
        >>> module(td)["y"]
        tensor(1.)
    """

    def __init__(
        self,
        mode: bool | list[NestedKey] | None = True,
        in_key_attr: str = "in_keys",
        out_key_attr: str = "out_keys",
        *,
        thread_local: bool = False,
    ) -> None:
        self.mode = unravel_key_list(mode) if isinstance(mode, list) else mode
        self.in_key_attr = in_key_attr
        self.out_key_attr = out_key_attr
        self.thread_local = thread_local
        self._called = False
        self._prev: list[Any] = []

    def clone(self) -> set_skip_existing:
        out = type(self)(
            self.mode, self.in_key_attr, self.out_key_attr, thread_local=self.thread_local
        )
        out._called = self._called
        return out

    def __call__(self, func: Callable[..., Any]) -> Any:
        self._called = True
        _check_tensordict_first(func)
        in_attr, out_attr = self.in_key_attr, self.out_key_attr

        @functools.wraps(func)
        def wrapper(_self: Any, tensordict: Any, *args: Any, **kwargs: Any) -> Any:
            if _should_skip(skip_existing(), _self, tensordict, in_attr, out_attr):
                return tensordict
            return func(_self, tensordict, *args, **kwargs)

        return super().__call__(wrapper)

    def __enter__(self) -> None:
        if self.mode and is_compiling():
            raise RuntimeError("skip_existing is not compatible with TorchDynamo.")
        if self.mode is None and not self._called:
            raise RuntimeError(
                f"It seems you are using {type(self).__name__} as a context manager with ``None`` "
                "input: None is only valid as a decorator. Give True, False or a list of keys."
            )
        self._prev.append(
            _SKIP_EXISTING.get_thread() if self.thread_local else _SKIP_EXISTING.get()
        )
        if self.mode is not None:
            if self.thread_local:
                _SKIP_EXISTING.set_thread(self.mode)
            else:
                _SKIP_EXISTING.set(self.mode)

    def __exit__(self, *exc: Any) -> None:
        prev = self._prev.pop()
        if self.thread_local:
            _SKIP_EXISTING.set_thread(prev)
        else:
            _SKIP_EXISTING.set(prev)


class _set_skip_existing_None(set_skip_existing):
    """Decorator of ``forward``: skip when the enclosing ``set_skip_existing`` block says so.

    Unlike ``set_skip_existing(None)`` it takes no argument and costs one read when the mode is
    off (the common case), which keeps ``torch.compile`` graphs free of it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(None)

    def clone(self) -> _set_skip_existing_None:
        return type(self)()

    def __call__(self, func: Callable[..., Any]) -> Any:
        _check_tensordict_first(func)

        @functools.wraps(func)
        def wrapper(_self: Any, tensordict: Any, *args: Any, **kwargs: Any) -> Any:
            mode = _SKIP_EXISTING.get()
            if mode:
                if is_compiling():
                    raise RuntimeError("skip_existing is not compatible with torch.compile.")
                if _should_skip(mode, _self, tensordict, "in_keys", "out_keys"):
                    return tensordict
            return func(_self, tensordict, *args, **kwargs)

        return wrapper


# ====================================================================== dispatch switch
def _dispatch_td_nn_modules() -> bool:
    """Whether ``@dispatch`` turns keyword tensors into a tensordict (False is faster)."""
    return bool(_DISPATCH.get())


class _set_dispatch_td_nn_modules(_DecoratorContextManager):
    """Turn ``@dispatch`` on or off for the length of a block (or a decorated function)."""

    def __init__(self, mode: bool) -> None:
        self.mode = mode
        self._prev: list[Any] = []

    def clone(self) -> _set_dispatch_td_nn_modules:
        return type(self)(self.mode)

    def __enter__(self) -> None:
        self._prev.append(_DISPATCH.get())
        _DISPATCH.set(self.mode)

    def __exit__(self, *exc: Any) -> None:
        _DISPATCH.set(self._prev.pop())


# ====================================================================== composite_lp_aggregate
def composite_lp_aggregate(nowarn: bool = False) -> bool:
    """Whether composite distributions sum their log-probabilities (and entropies) into one tensor.

    False unless :class:`set_composite_lp_aggregate` or the ``COMPOSITE_LP_AGGREGATE``
    environment variable says True. ``nowarn`` is accepted for compatibility.

    Examples:
        >>> with set_composite_lp_aggregate(True):
        ...     composite_lp_aggregate()
        True
    """
    return bool(_COMPOSITE_LP_AGGREGATE.get())


class set_composite_lp_aggregate(_DecoratorContextManager):
    """Set :func:`composite_lp_aggregate` for a block, a decorated function, or until ``unset``.

    Args:
        mode: the value inside the block. Defaults to True.
        thread_local: the value applies to the calling thread only.

    Examples:
        >>> with set_composite_lp_aggregate(False):
        ...     composite_lp_aggregate()
        False
    """

    def __init__(self, mode: bool | None = True, *, thread_local: bool = False) -> None:
        super().__init__()
        self.mode = mode
        self.thread_local = thread_local
        self._prev: list[Any] = []

    def clone(self) -> set_composite_lp_aggregate:
        return type(self)(self.mode, thread_local=self.thread_local)

    def __enter__(self) -> None:
        if self.thread_local:
            self._prev.append(_COMPOSITE_LP_AGGREGATE.get_thread())
            _COMPOSITE_LP_AGGREGATE.set_thread(self.mode)
        else:
            self._prev.append(_COMPOSITE_LP_AGGREGATE.get())
            _COMPOSITE_LP_AGGREGATE.set(self.mode)

    def __exit__(self, *exc: Any) -> None:
        prev = self._prev.pop()
        if self.thread_local:
            _COMPOSITE_LP_AGGREGATE.set_thread(prev)
        else:
            _COMPOSITE_LP_AGGREGATE.set(prev)

    def set(self) -> None:
        """Set the mode without a block (until :meth:`unset`)."""
        self.__enter__()

    def unset(self) -> None:
        """Undo :meth:`set`."""
        self.__exit__(None, None, None)
