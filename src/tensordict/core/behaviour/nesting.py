"""How deep tensordicts nest, and a clear error where Python's recursion limit would strike.

Pickling, ``repr``, ``clone`` and most operations walk nested tensordicts recursively: past a few
hundred levels they would hit Python's recursion limit (a bare ``RecursionError``, pickle first,
at about 200). Storing a tensordict nested deeper than :data:`MAX_NESTING` levels is refused
(:func:`check_nesting`, called where entries are converted), pickling one is refused, and
:func:`recursion_guard` turns a ``RecursionError`` of a tree grown deeper level by level into
:class:`~tensordict.errors.NestingDepthError` at the outermost call, once the stack has unwound.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import torch

from tensordict.core.collection import TensorCollection
from tensordict.errors import NestingDepthError

__all__ = ["MAX_NESTING", "check_nesting", "nesting_depth", "recursion_guard", "refuse_deep"]

#: the most levels of tensordicts below a tensordict (memory-mapped directories allow as many)
MAX_NESTING = 128

_active = threading.local()


def _collection(value: Any) -> Any:
    if getattr(type(value), "_is_tensorclass", False):
        return value._tensordict
    return value if isinstance(value, TensorCollection) else None


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """The levels of tensordicts ``value`` holds (itself included: 1 when nothing is nested in
    it, 0 for a leaf), counted up to ``limit + 1`` (the walk stops there). No data is read.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> nesting_depth(TensorDict(a={"b": {"c": torch.zeros(1)}}))
        3
    """
    root = _collection(value)
    if root is None:
        return 0
    deepest = 0
    todo = [(root, 1)]
    while todo and deepest <= limit:
        node, level = todo.pop()
        if level > deepest:
            deepest = level
        store = getattr(node, "_tensordict", None)  # a TensorDict's own dict: the fast path
        children = store.values() if type(store) is dict else _key_values(node)
        for child in children:
            if child.__class__ is not torch.Tensor:
                inner = _collection(child)
                if inner is not None:
                    todo.append((inner, level + 1))
    return deepest


def _key_values(node: Any) -> Iterator[Any]:
    # stand-ins (a lazy stack does not stack, a file-backed tensordict reads nothing)
    for _, child in node._own_key_items():
        yield child


def check_nesting(key: Any, value: Any) -> None:
    """Raise if storing ``value`` at ``key`` (a nested key adds its levels) nests tensordicts
    deeper than :data:`MAX_NESTING` below the tensordict it is stored in."""
    depth = nesting_depth(value)
    if not depth:
        return
    above = len(key) - 1 if isinstance(key, tuple) else 0
    if above + depth > MAX_NESTING:
        raise NestingDepthError(
            f"cannot store {key!r}: it would nest tensordicts {above + depth}+ levels deep, more "
            f"than the {MAX_NESTING} a tensordict allows (deeper trees break pickling, repr and "
            "every recursive operation). Flatten the structure (flatten_keys()), or store the "
            "deep part as data."
        )


def refuse_deep(td: Any, what: str) -> None:
    """Raise if ``td`` nests deeper than :data:`MAX_NESTING` levels (before ``what`` would
    recurse into it: pickling, which recurses in C, where no guard can catch it)."""
    if nesting_depth(td, MAX_NESTING + 1) > MAX_NESTING + 1:  # itself and 128 levels below
        raise NestingDepthError(
            f"cannot {what} this tensordict: it nests tensordicts more than {MAX_NESTING} levels "
            "deep (it was grown level by level), which would exceed Python's recursion limit. "
            "Flatten the structure (flatten_keys())."
        )


class recursion_guard:
    """Turn a ``RecursionError`` raised anywhere inside the outermost guarded call of this thread
    into :class:`~tensordict.errors.NestingDepthError` naming ``what``."""

    __slots__ = ("outermost", "what")

    def __init__(self, what: str) -> None:
        self.what = what
        self.outermost = False

    def __enter__(self) -> None:
        if not getattr(_active, "on", False):
            _active.on = self.outermost = True

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        if not self.outermost:
            return
        _active.on = False
        deep = kind is not None and issubclass(kind, RecursionError)
        if deep and not issubclass(kind, NestingDepthError):
            raise NestingDepthError(
                f"{self.what} hit Python's recursion limit: the tensordict is nested too deeply "
                f"(it was grown level by level past the {MAX_NESTING} levels that can be stored "
                "at once). Flatten the structure (flatten_keys())."
            ) from None
