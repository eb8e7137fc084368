"""Global switches (minimal: ``capture_non_tensor_stack``; the full module comes with [compat-1]).

``capture_non_tensor_stack``: whether stacking non-tensor entries that hold equal values gives
one :class:`~tensordict.NonTensorData` (True) instead of a :class:`~tensordict.NonTensorStack`
(False, the default, as upstream 0.15). Also read from ``CAPTURE_NONTENSOR_STACK``.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from torch.utils._contextlib import _DecoratorContextManager

__all__ = ["capture_non_tensor_stack", "set_capture_non_tensor_stack"]

_ENV = "CAPTURE_NONTENSOR_STACK"
_TRUE = ("y", "yes", "t", "true", "on", "1")


def _from_env() -> bool | None:
    raw = os.environ.get(_ENV)
    return None if raw is None else raw.lower() in _TRUE


_STATE: list[bool | None] = [_from_env()]


class set_capture_non_tensor_stack(_DecoratorContextManager):
    """Set the switch: as a context manager, a decorator, or for good with ``.set()``.

    Examples:
        >>> from tensordict.core.options import capture_non_tensor_stack
        >>> with set_capture_non_tensor_stack(False):
        ...     capture_non_tensor_stack()
        False
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)
        if self.mode:
            warnings.warn(
                "set_capture_non_tensor_stack(True) is deprecated upstream (to be removed in "
                "0.17): read NonTensorStack.data to get the single value of a stack instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        self._saved: list[bool | None] = []

    def clone(self) -> set_capture_non_tensor_stack:
        new = type(self).__new__(type(self))
        new.mode, new._saved = self.mode, []
        return new

    def set(self) -> None:
        _STATE[0] = self.mode
        os.environ[_ENV] = str(self.mode)

    def __enter__(self) -> None:
        self._saved.append(_STATE[0])
        self.set()

    def __exit__(self, *exc: Any) -> None:
        _STATE[0] = self._saved.pop()
        if _STATE[0] is None:
            os.environ.pop(_ENV, None)
        else:
            os.environ[_ENV] = str(_STATE[0])


def capture_non_tensor_stack(allow_none: bool = False) -> bool | None:
    """The current value of the switch (``None`` if never set and ``allow_none``)."""
    value = _STATE[0]
    if value is None:
        return None if allow_none else False
    return value
