"""Renaming the batch dimensions of any tensordict: ``refine_names``, ``rename_`` and ``rename``.

Written against the ``names`` property and its setter, so every class that can name its dims
(dense, lazy stacks, HDF5 / Zarr backed ones) gets them; lazy views refuse in their setter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tensordict.errors import BatchSizeError, DimNamesError

__all__ = ["DimNamesMixin", "checked_names"]

T = TypeVar("T", bound="DimNamesMixin")


def checked_names(value: Sequence[str | None], batch_size: Sequence[int]) -> list[str | None]:
    """``value`` as a list of dim names for ``batch_size``: one per dim, no name twice.

    Examples:
        >>> checked_names(("x", None), [2, 3])
        ['x', None]
    """
    value = list(value)
    if len(value) != len(batch_size):
        raise BatchSizeError(
            "the length of the dimension names must equate the tensordict batch_dims: got "
            f"{len(value)} names {value} for batch_size={list(batch_size)}. Give one "
            "name (or None) per batch dimension."
        )
    named = [v for v in value if v is not None]
    if len(set(named)) != len(named):
        raise ValueError(f"dimension names must be unique, got {value}.")
    return value


class DimNamesMixin:
    """``refine_names``, ``rename_`` and ``rename`` over ``self.names``."""

    __slots__ = ()
    names: Any

    if TYPE_CHECKING:

        def clone(self: T, recurse: bool = True, **kwargs: Any) -> T: ...

    def refine_names(self: T, *names: Any) -> T:
        """Name the batch dimensions in place, as ``torch.Tensor.refine_names``.

        ``None`` and ``...`` keep the current names of the dimensions they cover; a named
        dimension cannot be renamed (use ``td.names = [...]``).

        Raises:
            DimNamesError: a name differs from the current name of its dimension.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(batch_size=[2, 3, 4]).refine_names("a", ..., "c")
            >>> td.refine_names(None, "b", None).names
            ['a', 'b', 'c']
        """
        current = self.names
        requested = list(names)
        if Ellipsis in requested:
            i = requested.index(Ellipsis)
            fill = len(current) - (len(requested) - 1)
            requested[i : i + 1] = [None] * fill
        if len(requested) != len(current):
            self.names = requested  # raises: one name per batch dimension
        new: list[str | None] = []
        for cur, req in zip(current, requested):
            if req is not None and cur is not None and cur != req:
                raise DimNamesError(
                    f"refine_names: cannot coerce TensorDict names {current} with {list(names)}: "
                    "a named dimension cannot be renamed by refine_names. Set td.names = [...] "
                    "to rename it."
                )
            new.append(cur if req is None else req)
        self.names = new
        return self

    def _renamed(self, names: tuple[str | None, ...], rename_map: dict[str, str]) -> list[Any]:
        """The names after ``rename(*names, **rename_map)``."""
        if names and rename_map:
            raise ValueError("rename takes the new names positionally or as old=new, not both.")
        if names:
            return list(names)
        current = list(self.names)
        for old, new in rename_map.items():
            if old not in current:
                raise ValueError(f"rename: no batch dimension is named {old!r} (names: {current}).")
            current[current.index(old)] = new
        return current

    def rename_(self: T, *names: str | None, **rename_map: str) -> T:
        """Rename the batch dimensions in place: all of them (``*names``) or some by their
        current name (``old="new"``), as ``torch.Tensor.rename``.

        Raises:
            ValueError: a name of ``rename_map`` names no dimension, or a name repeats.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(batch_size=[2, 3], names=["a", None])
            >>> td.rename_(a="x").names
            ['x', None]
            >>> td.rename_("p", "q").names
            ['p', 'q']
        """
        self.names = self._renamed(names, rename_map)
        return self

    def rename(self: T, *names: str | None, **rename_map: str) -> T:
        """A shallow copy with renamed batch dimensions (see :meth:`rename_`); ``self`` keeps
        its names.

        Examples:
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict(batch_size=[3], names=["t"])] * 2)
            >>> s.rename(t="time").names, s.names
            ([None, 'time'], [None, 't'])
        """
        new_names = self._renamed(names, rename_map)
        out = self.clone(False)
        out.names = new_names
        return out
