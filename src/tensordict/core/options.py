"""Global switches, in one place: every module reads a switch from here.

Each boolean switch has a getter (``lazy_legacy()``) and a setter class used three ways, as
upstream tensordict offers them: a context manager (``with set_lazy_legacy(True): ...``), a
decorator (``@set_lazy_legacy(True)``) and a program-wide setting
(``set_lazy_legacy(True).set()``). A switch is also written to an environment variable, so that
worker processes started afterwards (``spawn``) see the same value; that variable sets the switch
at import.

============================  ==========================  ========  ===========================
switch                         environment variable         default   meaning
============================  ==========================  ========  ===========================
``lazy_legacy``                ``LAZY_LEGACY_OP``           False     shape ops return lazy views
``list_to_stack``              ``LIST_TO_STACK``            True      ``td[k] = [..]`` stacks
``capture_non_tensor_stack``   ``CAPTURE_NONTENSOR_STACK``  False     stacking equal non-tensor
                                                                      data keeps one value
``get_defaults_to_none``       ``TD_GET_DEFAULTS_TO_NONE``  True      ``get`` of a missing key
                                                                      returns None
============================  ==========================  ========  ===========================

The print options (:class:`set_printoptions` / :func:`get_printoptions`) live here too, the JSON
backend of :func:`json_dumps` (:func:`set_json_backend`, deprecated upstream), and the library's
logger (``tensordict.utils.logger``, ``logging.getLogger("tensordict")``), whose level
the ``TD_LOGGING_LEVEL`` environment variable sets (default ``INFO``).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import warnings
from types import ModuleType
from typing import Any

from torch.utils._contextlib import _DecoratorContextManager

from tensordict.core.collection import publish_as
from tensordict.errors import MissingDependencyError

__all__ = [
    "logger",
    "capture_non_tensor_stack",
    "get_defaults_to_none",
    "get_json_backend",
    "get_printoptions",
    "json_dumps",
    "lazy_legacy",
    "list_to_stack",
    "mark_legacy_lazy",
    "set_capture_non_tensor_stack",
    "set_get_defaults_to_none",
    "set_json_backend",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "strtobool",
]

_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")


def strtobool(val: str) -> bool:
    """Read a truth value the way environment variables spell it.

    Args:
        val: ``y/yes/t/true/on/1`` or ``n/no/f/false/off/0``, in any case.

    Raises:
        ValueError: for any other string.

    Examples:
        >>> strtobool("Yes"), strtobool("0")
        (True, False)
    """
    low = val.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(
        f"invalid truth value {val!r}: expected one of {', '.join(_TRUE + _FALSE)} (any case)."
    )


class _Switch:
    """A boolean switch: ``value`` is None while neither set nor given by the environment."""

    def __init__(self, env: str, default: bool) -> None:
        self.env = env
        self.default = default
        raw = os.environ.get(env)
        self.value: bool | None = None if raw is None else strtobool(raw)

    def get(self, allow_none: bool = False) -> bool | None:
        if self.value is None:
            return None if allow_none else self.default
        return self.value

    def write(self, value: bool | None) -> None:
        """Set the value and mirror it in the environment (removed when ``None``)."""
        self.value = value
        if value is None:
            os.environ.pop(self.env, None)
        else:
            os.environ[self.env] = str(value)


# ``get`` reads ``GET_DEFAULTS_TO_NONE.value`` directly (no call, no warning on the hot path).
_LAZY_LEGACY = _Switch("LAZY_LEGACY_OP", False)
_LIST_TO_STACK = _Switch("LIST_TO_STACK", True)
_CAPTURE_NON_TENSOR_STACK = _Switch("CAPTURE_NONTENSOR_STACK", False)
GET_DEFAULTS_TO_NONE = _Switch("TD_GET_DEFAULTS_TO_NONE", True)


class _SetSwitch(_DecoratorContextManager):
    """Base of the setter classes: a context manager, a decorator, or ``.set()`` for good."""

    _switch: _Switch
    _deprecated_mode: bool | None = None  # the mode that is deprecated upstream, if any
    _deprecation: str = ""

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)
        if self._deprecated_mode is not None and self.mode == self._deprecated_mode:
            warnings.warn(self._deprecation, DeprecationWarning, stacklevel=2)
        self._saved: list[bool | None] = []

    def clone(self) -> _SetSwitch:
        """A copy for one call of a decorated function (no second warning)."""
        new = type(self).__new__(type(self))
        new.mode = self.mode
        new._saved = []
        return new

    def __enter__(self) -> None:
        self._saved.append(self._switch.value)
        self._switch.write(self.mode)

    def __exit__(self, *exc: Any) -> None:
        self._switch.write(self._saved.pop())

    def set(self) -> None:
        """Apply the mode for the rest of the program."""
        self._switch.write(self.mode)


class set_lazy_legacy(_SetSwitch):
    """Turn the legacy lazy mode on or off (deprecated upstream when turned on).

    In the legacy lazy mode, shape operations return lazy views and ``torch.stack`` returns a
    lazy stack. Use :func:`~tensordict.lazy_stack` instead.

    Args:
        mode: ``True`` turns the legacy mode on (and warns with a ``DeprecationWarning``).

    Examples:
        >>> with set_lazy_legacy(False):
        ...     lazy_legacy()
        False
    """

    _switch = _LAZY_LEGACY
    _deprecated_mode = True
    _deprecation = (
        "the legacy lazy mode, turned on with set_lazy_legacy(True) or LAZY_LEGACY_OP=1, is "
        "deprecated (removed in tensordict 0.17): use lazy_stack to build a lazy stack."
    )


def lazy_legacy(allow_none: bool = False) -> bool | None:
    """Whether the legacy lazy mode is on (see :class:`set_lazy_legacy`).

    Args:
        allow_none: return ``None`` instead of the default (``False``) while never set.

    Examples:
        >>> lazy_legacy()
        False
    """
    return _LAZY_LEGACY.get(allow_none)


def mark_legacy_lazy(func: Any) -> Any:
    """Mark ``func`` (named ``_legacy_...``) as the legacy-lazy variant of a method: sets
    ``func.LEGACY = True`` and returns ``func`` itself (upstream's ``_legacy_lazy`` decorator).

    Raises:
        NameError: the name does not start with ``_legacy_``.

    Examples:
        >>> from tensordict.core.options import mark_legacy_lazy
        >>> def _legacy_permute(td):
        ...     return td
        >>> mark_legacy_lazy(_legacy_permute).LEGACY
        True
    """
    if not func.__name__.startswith("_legacy_"):
        raise NameError(
            f"a function marked as legacy lazy must be named _legacy_<method>, got "
            f"{func.__name__!r}. Rename it (e.g. _legacy_{func.__name__})."
        )
    func.LEGACY = True
    return func


class set_list_to_stack(_SetSwitch):
    """Whether assigning a list (``td["a"] = [x, y]``) stacks it over the batch dimension.

    ``set_list_to_stack(False)`` is deprecated upstream: use ``td.set_non_tensor(key, value)`` to
    store a list as one value.

    Examples:
        >>> with set_list_to_stack(True):
        ...     list_to_stack()
        True
    """

    _switch = _LIST_TO_STACK
    _deprecated_mode = False
    _deprecation = (
        "set_list_to_stack(False) is deprecated (removed in tensordict 0.17): use "
        "td.set_non_tensor(key, value) to store a list as one value instead."
    )


def list_to_stack(allow_none: bool = False) -> bool | None:
    """Whether a list assigned to a tensordict is stacked (default ``True``).

    Examples:
        >>> list_to_stack()
        True
    """
    return _LIST_TO_STACK.get(allow_none)


class set_capture_non_tensor_stack(_SetSwitch):
    """Whether stacking identical non-tensor data keeps one ``NonTensorData`` (deprecated upstream
    when turned on: read ``NonTensorStack.data`` instead).

    Examples:
        >>> with set_capture_non_tensor_stack(False):
        ...     capture_non_tensor_stack()
        False
    """

    _switch = _CAPTURE_NON_TENSOR_STACK
    _deprecated_mode = True
    _deprecation = (
        "set_capture_non_tensor_stack(True) is deprecated (removed in tensordict 0.17): use "
        "NonTensorStack.data to get the single value of a stack of identical values instead."
    )


def capture_non_tensor_stack(allow_none: bool = False) -> bool | None:
    """Whether stacking identical non-tensor data keeps one value (default ``False``).

    Examples:
        >>> capture_non_tensor_stack()
        False
    """
    return _CAPTURE_NON_TENSOR_STACK.get(allow_none)


_GET_DEFAULTS_DEPRECATION = (
    "{}() is deprecated (removed in tensordict 0.17): get() of a missing key returns None; use "
    "td[key] to raise a KeyError for a missing key instead."
)


def set_get_defaults_to_none(set_to_none: bool = True) -> None:
    """Set whether ``get(key)`` of a missing key returns ``None`` (``True``) or raises.

    Deprecated upstream (warns with a ``DeprecationWarning``).

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     set_get_defaults_to_none(True)
        ...     get_defaults_to_none()
        True
    """
    warnings.warn(
        _GET_DEFAULTS_DEPRECATION.format("set_get_defaults_to_none"),
        DeprecationWarning,
        stacklevel=2,
    )
    GET_DEFAULTS_TO_NONE.value = bool(set_to_none)


def get_defaults_to_none(set_to_none: bool = True) -> bool:
    """Whether ``get(key)`` of a missing key returns ``None`` (deprecated upstream).

    Args:
        set_to_none: ignored (kept for upstream's signature).
    """
    warnings.warn(
        _GET_DEFAULTS_DEPRECATION.format("get_defaults_to_none"),
        DeprecationWarning,
        stacklevel=2,
    )
    return bool(GET_DEFAULTS_TO_NONE.get())


# ---------------------------------------------------------------------------- print options
_PRINT_DEFAULTS: dict[str, Any] = {
    "show_batch_size": True,
    "show_device": True,
    "show_is_shared": True,
    "show_shape": True,
    "show_field_device": True,
    "show_dtype": True,
    "show_field_is_shared": True,
    "show_grad": False,
    "show_is_contiguous": False,
    "show_is_view": False,
    "show_storage_size": False,
    "plain": False,
    "sort_keys": "alphabetical",
    "compact": True,
    "html": True,
}
_PRINT_OPTIONS: dict[str, Any] = dict(_PRINT_DEFAULTS)
# options only the detailed (non-compact) repr shows: setting one turns the compact form off
_DETAILED_ONLY = frozenset(
    {
        "show_is_shared",
        "show_shape",
        "show_field_device",
        "show_field_is_shared",
        "show_grad",
        "show_is_contiguous",
        "show_is_view",
        "show_storage_size",
        "plain",
    }
)
_NOT_VERBOSE = ("show_device", "show_is_shared", "show_field_device", "show_dtype")
_NOT_VERBOSE_ALSO = ("show_field_is_shared",)


class set_printoptions(_DecoratorContextManager):
    """Set what the repr of a tensordict shows, for a block, a function, or (``.set()``) for good.

    Options not passed keep their current value. An option only the detailed form shows (e.g.
    ``show_grad``) also sets ``compact=False`` unless ``compact`` is passed.

    Args:
        verbose: ``False`` hides device, dtype and ``is_shared`` unless an option sets them.
        **kwargs: the options, named as the keys of :func:`get_printoptions`.

    Raises:
        TypeError: for an unknown option.

    Examples:
        >>> with set_printoptions(show_grad=True):
        ...     get_printoptions()["show_grad"], get_printoptions()["compact"]
        (True, False)
        >>> get_printoptions()["show_grad"]
        False
    """

    def __init__(self, *, verbose: bool = True, **kwargs: Any) -> None:
        super().__init__()
        unknown = set(kwargs) - set(_PRINT_DEFAULTS)
        if unknown:
            raise TypeError(
                f"Unknown printoptions: {unknown}. Valid options: {sorted(_PRINT_DEFAULTS)}"
            )
        if "compact" not in kwargs and not _DETAILED_ONLY.isdisjoint(kwargs):
            kwargs["compact"] = False
        if not verbose:
            kwargs = {**dict.fromkeys(_NOT_VERBOSE + _NOT_VERBOSE_ALSO, False), **kwargs}
        self._options = kwargs
        self._saved: list[dict[str, Any]] = []

    def clone(self) -> set_printoptions:
        """A copy for one call of a decorated function."""
        new = type(self).__new__(type(self))
        new._options = dict(self._options)
        new._saved = []
        return new

    def __enter__(self) -> None:
        self._saved.append(dict(_PRINT_OPTIONS))
        _PRINT_OPTIONS.update(self._options)

    def __exit__(self, *exc: Any) -> None:
        _PRINT_OPTIONS.update(self._saved.pop())

    def set(self) -> None:
        """Apply the options for the rest of the program (``__exit__`` restores the previous)."""
        self._saved.append(dict(_PRINT_OPTIONS))
        _PRINT_OPTIONS.update(self._options)


def get_printoptions() -> dict[str, Any]:
    """The current print options, as a new dict.

    Examples:
        >>> get_printoptions()["sort_keys"]
        'alphabetical'
    """
    return dict(_PRINT_OPTIONS)


# ---------------------------------------------------------------------------- JSON backend
_JSON_BACKENDS = ("json", "orjson")
_JSON_BACKEND = "json"  # the module json_dumps uses


def set_json_backend(backend: str) -> None:
    """Choose the module :func:`json_dumps` serializes with: ``"json"`` (default) or ``"orjson"``.

    Deprecated upstream (through ``tensordict.utils``). Saved metadata (``meta.json``) is always
    written with the standard ``json`` module, which keeps NaN and infinite floats.

    Args:
        backend: ``"json"`` or ``"orjson"``.

    Raises:
        ValueError: another name.
        MissingDependencyError: ``"orjson"`` is not installed.

    Examples:
        >>> set_json_backend("json")
        >>> get_json_backend().__name__
        'json'
    """
    global _JSON_BACKEND
    if backend not in _JSON_BACKENDS:
        raise ValueError(
            f"unknown JSON backend {backend!r}: expected one of {list(_JSON_BACKENDS)}. Pass "
            '"json" (the standard library) or "orjson" (installed separately).'
        )
    try:
        importlib.import_module(backend)
    except ImportError as err:
        raise MissingDependencyError(
            f"the JSON backend {backend!r} is not installed ({err}). Install it with "
            f'pip install {backend}, or keep the default with set_json_backend("json").'
        ) from err
    _JSON_BACKEND = backend


def get_json_backend() -> ModuleType:
    """The module :func:`json_dumps` serializes with (``json`` unless :func:`set_json_backend`
    chose ``orjson``).

    Examples:
        >>> get_json_backend().__name__
        'json'
    """
    return importlib.import_module(_JSON_BACKEND)


def json_dumps(data: Any, **kwargs: Any) -> str | bytes:
    """Serialize ``data`` with the chosen backend: a ``str`` from ``json``, ``bytes`` from
    ``orjson`` (which ignores ``separators``, and falls back to ``json`` for integers wider than
    64 bits).

    Args:
        data: what to serialize.
        **kwargs: passed to the backend's ``dumps``.

    Examples:
        >>> json_dumps({"a": [1, 2]}, separators=(",", ":"))
        '{"a":[1,2]}'
    """
    backend = get_json_backend()
    if backend is json:
        return json.dumps(data, **kwargs)
    kwargs.pop("separators", None)
    try:
        return backend.dumps(data, **kwargs)  # type: ignore[no-any-return]
    except TypeError as err:
        if "64-bit" not in str(err):
            raise
        return json.dumps(data, **kwargs)


logger = logging.getLogger("tensordict")
logger.setLevel(os.environ.get("TD_LOGGING_LEVEL", "INFO").upper())

# shown under upstream's path (tensordict.utils re-exports them; their examples run there)
__test__ = publish_as(
    "tensordict.utils",
    set_lazy_legacy,
    set_list_to_stack,
    set_capture_non_tensor_stack,
    set_printoptions,
    capture_non_tensor_stack,
    get_printoptions,
    lazy_legacy,
    list_to_stack,
    mark_legacy_lazy,
)
