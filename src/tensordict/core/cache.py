"""Cache keys for memoised calls: tensors are keyed by identity, everything else by value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["make_cache_key"]


def _key_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return id(value)
    if isinstance(value, tuple):
        return tuple(_key_of(v) for v in value)
    if isinstance(value, list):
        return tuple(_key_of(v) for v in value)
    return value


def make_cache_key(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, Any]:
    """A hashable key for a call: ``(args, sorted keyword items)``, tensors replaced by their id.

    Examples:
        >>> make_cache_key((1, (2, 3)), {"b": "c", "a": 0})
        ((1, (2, 3)), (('a', 0), ('b', 'c')))
    """
    return (
        tuple(_key_of(a) for a in args),
        tuple((k, _key_of(kwargs[k])) for k in sorted(kwargs)),
    )
