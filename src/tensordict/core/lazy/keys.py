"""Removing keys from a lazy stack whose members hold different keys.

A key that only some members hold (or that the members hold with different shapes, so that
it cannot be read stacked) is removed from the members that hold it, as upstream:
``del_``/``exclude(inplace=True)`` act member by member.
"""

from __future__ import annotations

from typing import Any, TypeVar

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.entries import locked_message
from tensordict.core.keys import key_path, unravel_key
from tensordict.errors import LockedError, TensorDictKeyError

__all__ = ["LazyStackKeysMixin"]

T = TypeVar("T", bound="LazyStackKeysMixin")


class LazyStackKeysMixin(TensorDictBase):
    """``del_`` and in-place ``exclude`` of a lazy stack, member by member."""

    __slots__ = ()
    tensordicts: list[Any]

    def del_(self: T, key: Any) -> T:
        """Remove ``key`` from every member that holds it.

        Raises:
            TensorDictKeyError: no member holds ``key`` (a ``KeyError``).
            LockedError: the stack, or a member holding ``key``, is locked.

        Examples:
            >>> import torch
            >>> from tensordict import LazyStackedTensorDict, TensorDict
            >>> one, two = TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3))
            >>> s = LazyStackedTensorDict(one, two)
            >>> list(s.del_("a").tensordicts[1].keys())
            []
        """
        path = key_path(key)
        if self.is_locked:
            raise LockedError(locked_message(f"delete {unravel_key(path)!r}"))
        found = False
        for member in self.tensordicts:
            try:
                member.del_(path)
            except TensorDictKeyError:
                continue
            found = True
        if not found:
            raise TensorDictKeyError(
                f"Key {unravel_key(path)!r} not found in any of the stacked tensordicts: "
                "check the spelling, or read the members' keys (td.tensordicts[i].keys())."
            )
        return self

    def _exclude_path(self, path: tuple[str, ...]) -> None:
        for member in self.tensordicts:
            member._exclude_path(path)
