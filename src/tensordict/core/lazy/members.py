"""The members of a lazy stack: adding them (``append``, ``insert``, ``extend``), their joint
batch size (``-1`` where members differ), and updates written member by member."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.entries import locked_message
from tensordict.core.lazy.shape import is_lazy
from tensordict.errors import (
    DeviceMismatchError,
    LockedError,
    NotATensorDictError,
    ShapeMismatchError,
)

__all__ = [
    "ADDING",
    "STACKING",
    "LazyMembersMixin",
    "as_member",
    "check_member_batch_size",
    "joint_batch_size",
]


class LazyMembersMixin:
    """What :class:`~tensordict.LazyStackedTensorDict` does with its members as a whole."""

    __slots__ = ()
    tensordicts: list[Any]
    stack_dim: int
    _member_batch_size: torch.Size
    _is_locked: bool | None
    batch_size: torch.Size
    if TYPE_CHECKING:

        @property
        def device(self) -> torch.device | None: ...

    @property
    def is_ragged(self) -> bool:
        """Whether the members have different batch sizes (``batch_size`` shows ``-1`` for the
        dims where they differ; only basic indexing reaches them).

        Examples:
            >>> from tensordict import TensorDict, lazy_stack
            >>> td = lazy_stack([TensorDict(batch_size=[3, 4]), TensorDict(batch_size=[3, 5])], 1)
            >>> td.is_ragged, td.batch_size, td[:, :, :2].batch_size
            (True, torch.Size([3, 2, -1]), torch.Size([3, 2, 2]))
        """
        return -1 in self._member_batch_size

    # ================================================================== members
    def append(self, tensordict: Any) -> None:
        """Add a member at the end of the stack (same batch size and device as the others).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, LazyStackedTensorDict
            >>> td = LazyStackedTensorDict(TensorDict(a=torch.zeros(2), batch_size=[2]))
            >>> td.append(TensorDict(a=torch.ones(2), batch_size=[2]))
            >>> td.batch_size
            torch.Size([2, 2])
        """
        self.insert(len(self.tensordicts), tensordict)

    def insert(self, index: int, tensordict: Any) -> None:
        """Insert a member before position ``index`` of the stack dim.

        Raises:
            NotATensorDictError: ``tensordict`` is not a tensordict.
            ShapeMismatchError: its batch size differs from the members'.
            DeviceMismatchError: its device differs from the members'.
            LockedError: the stack is locked.
        """
        member = as_member(tensordict, index)
        if self._is_locked:
            raise LockedError(locked_message("insert a member into the stack"))
        if self.tensordicts and member.device != self.device:
            raise DeviceMismatchError(
                f"cannot insert a member on device {member.device} into a lazy stack on "
                f"{self.device}: Devices differ. Move it with .to({self.device!r}) first."
            )
        if self.is_ragged:
            self._member_batch_size = joint_batch_size(  # type: ignore[misc]
                [self._member_batch_size, member.batch_size], self._member_batch_size
            )
        else:
            check_member_batch_size(self._member_batch_size, member, index, ADDING)
        self.tensordicts.insert(index, member)

    def extend(self, tensordicts: Sequence[Any]) -> None:
        """Append every tensordict of ``tensordicts`` (all checked before any is added)."""
        members = [as_member(td, i) for i, td in enumerate(tensordicts)]
        for i, m in enumerate(members):
            if not self.is_ragged:
                check_member_batch_size(self._member_batch_size, m, i, ADDING)
        for m in members:
            self.append(m)

    # ================================================================== member-wise updates
    def _same_stack(self, other: Any) -> bool:
        """Whether ``other`` is a lazy stack along the same dim with as many members."""
        return (
            is_lazy(other)
            and other.stack_dim == self.stack_dim
            and len(other.tensordicts) == len(self.tensordicts)
        )

    def update(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        inplace: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Like :meth:`TensorDict.update`; a lazy stack along the same dim is written member
        by member (members keep their own keys and shapes). Entries may also be given as
        keyword arguments."""
        if input_dict_or_td is None:
            input_dict_or_td = _entries_from(kwargs)
        if (
            kwargs.pop("update_batch_size", False)
            and input_dict_or_td.batch_size != self.batch_size
        ):
            return self._replace_members(input_dict_or_td)
        if self._same_stack(input_dict_or_td):
            if self._is_locked and not inplace:
                raise LockedError(locked_message("update the stack"))
            for member, other in zip(self.tensordicts, input_dict_or_td.tensordicts):
                member.update(other, clone=clone, inplace=inplace, **kwargs)
            return self
        return super().update(input_dict_or_td, clone, inplace, **kwargs)  # type: ignore[misc]

    def update_(self, input_dict_or_td: Any = None, clone: bool = False, **kwargs: Any) -> Any:
        """Like :meth:`TensorDict.update_`; member by member from a lazy stack like this one."""
        if input_dict_or_td is None:
            input_dict_or_td = _entries_from(kwargs)
        if self._same_stack(input_dict_or_td):
            for member, other in zip(self.tensordicts, input_dict_or_td.tensordicts):
                member.update_(other, clone=clone, **kwargs)
            return self
        return super().update_(input_dict_or_td, clone, **kwargs)  # type: ignore[misc]

    def _replace_members(self, other: Any) -> Any:
        """``update(other, update_batch_size=True)``: take ``other``'s batch size and entries."""
        if self._is_locked:
            raise LockedError(locked_message("change the batch size of the stack"))
        members = other.tensordicts if self._same_dim(other) else other.unbind(self.stack_dim)
        self.tensordicts = [m.copy() for m in members]  # type: ignore[misc]
        self._member_batch_size = joint_batch_size(  # type: ignore[misc]
            [m.batch_size for m in self.tensordicts], torch.Size([])
        )
        return self

    def _same_dim(self, other: Any) -> bool:
        return is_lazy(other) and other.stack_dim == self.stack_dim


_UPDATE_OPTIONS = {
    "keys_to_update",
    "non_blocking",
    "is_leaf",
    "update_batch_size",
    "ignore_lock",
}


def _entries_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``update(a=..., b=...)``: the keyword arguments that are entries (moved out of kwargs)."""
    entries = {k: kwargs.pop(k) for k in list(kwargs) if k not in _UPDATE_OPTIONS}
    return entries


def as_member(td: Any, position: int) -> Any:
    if getattr(type(td), "_is_tensorclass", False):
        return td._tensordict
    if not isinstance(td, TensorDictBase):
        raise NotATensorDictError(
            f"Expected new value to be TensorDictBase instance but got {type(td)} instead "
            f"(member {position} of a lazy stack). Wrap the data in a TensorDict first."
        )
    return td


def joint_batch_size(sizes: Sequence[torch.Size], empty: torch.Size) -> torch.Size:
    """The batch size members of ``sizes`` share, ``-1`` where they differ (``empty`` if none).

    Raises:
        ShapeMismatchError: the sizes have different numbers of dims.

    Examples:
        >>> joint_batch_size([torch.Size([3, 4]), torch.Size([3, 5])], torch.Size([]))
        torch.Size([3, -1])
    """
    if not sizes:
        return empty
    ndims = {len(s) for s in sizes}
    if len(ndims) > 1:
        raise ShapeMismatchError(
            f"{STACKING}: the members have different numbers of batch dims "
            f"({[list(s) for s in sizes]}). Give every member as many batch dims."
        )
    return torch.Size(
        [dims[0] if len(set(dims)) == 1 else -1 for dims in zip(*sizes)] if sizes[0] else []
    )


def check_member_batch_size(ref: torch.Size, member: Any, position: int, what: str) -> None:
    if member.batch_size != ref:
        raise ShapeMismatchError(
            f"{what}: batch_size={list(ref)} in the stack, batch_size={list(member.batch_size)} "
            f"for member {position}. Index or reshape the member first."
        )


STACKING = "stacking tensordicts requires one batch size: the batch sizes in tensordicts differs"
ADDING = "Batch sizes in tensordicts differs"
