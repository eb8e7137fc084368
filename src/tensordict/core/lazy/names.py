"""Dimension names of a lazy stack: its members' names, with the stack dimension's own name.

The stack dimension's name lives on the stack (``_stack_name``); the other names are the
members' (setting them renames every member). Nested stacks read from a stack, and stacks indexed
out of it where the stack dimension survives, carry the stack dimension's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.names import checked_names
from tensordict.core.indexing import plan_index
from tensordict.errors import DimNamesError, ShapeMismatchError

__all__ = ["LazyStackNamesMixin"]


class LazyStackNamesMixin:
    """``names`` (read and set) of :class:`~tensordict.LazyStackedTensorDict`."""

    __slots__ = ()
    tensordicts: list[Any]
    stack_dim: int
    _stack_name: str | None
    batch_size: torch.Size

    def _stack_names(self) -> list[str | None]:
        """The names, read from the first member (unchecked: for internal use)."""
        if not self.tensordicts:
            return [None] * len(self.batch_size)
        names = list(self.tensordicts[0].names)
        names.insert(self.stack_dim, getattr(self, "_stack_name", None))
        return names

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions: the members' names, with the stack dimension's own.

        Examples:
            >>> from tensordict import LazyStackedTensorDict, TensorDict
            >>> s = LazyStackedTensorDict(TensorDict(batch_size=[3]), TensorDict(batch_size=[3]))
            >>> s.names = ["n", "t"]
            >>> s.names, s.tensordicts[0].names
            (['n', 't'], ['t'])
        """
        first = list(self.tensordicts[0].names) if self.tensordicts else None
        for member in self.tensordicts[1:]:
            if list(member.names) != first:  # (as upstream: no single answer)
                raise DimNamesError(
                    f"Not all dim names match, got {first} and {list(member.names)}: the members "
                    "of this lazy stack name their dims differently. Set stack.names = [...] to "
                    "rename them all."
                )
        return self._stack_names()

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        if value is None:
            value = [None] * len(self.batch_size)
        value = checked_names(value, self.batch_size)
        member_names = value[: self.stack_dim] + value[self.stack_dim + 1 :]
        self._check_nested_names(value, len(member_names))
        for member in self.tensordicts:
            member.names = member_names
        self._stack_name = value[self.stack_dim]  # type: ignore[misc]  # (a slot of the stack)

    def _check_nested_names(self, value: list[str | None], member_dims: int) -> None:
        """Raise before renaming if a nested tensordict would name two dims alike (its own extra
        dims keep their names), as upstream."""
        for member in self.tensordicts:
            for key in member._own_keys():
                try:
                    nested = member._get_str(key, None)
                except ShapeMismatchError:  # a ragged leaf of a lazy member: not a tensordict
                    continue
                if not isinstance(nested, TensorDictBase):
                    continue
                full = value + list(nested.names[member_dims:])
                named = [n for n in full if n is not None]
                if len(set(named)) != len(named):
                    raise ValueError(
                        f"dimension names must be unique: naming the dims {value} would name "
                        f"the dims of a nested tensordict {full}. Pick names its own extra dims "
                        "do not use."
                    )

    def _names_or_none(self) -> list[str | None] | None:
        names = self._stack_names()
        return names if any(n is not None for n in names) else None

    def _carry_stack_name(self, index: Any, out: Any) -> None:
        """Give ``out`` (``self[index]``) the stack dimension's name if that dimension survives
        as ``out``'s stack dimension."""
        if not isinstance(out, LazyStackNamesMixin):
            return
        dim_map = plan_index(index, self.batch_size).dim_map
        survives = dim_map is not None and out.stack_dim < len(dim_map)
        if survives and dim_map[out.stack_dim] == self.stack_dim:  # type: ignore[index]
            out._stack_name = self._stack_name  # type: ignore[misc]
