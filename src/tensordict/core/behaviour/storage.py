"""Where a tensordict's tensors live: shared memory (``share_memory_``, ``is_shared``) and the
memory-mapped state (``is_memmap``, ``saved_path``). Writing and loading memory-mapped files is
``tensordict.memmap``'s, bound as methods by the forwarding table of ``forwards``."""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

from tensordict.core.collection import TensorCollection
from tensordict.core.nontensor.data import is_non_tensor

__all__ = ["StorageMixin", "in_shared_memory", "keep_storage_flags"]

T = TypeVar("T", bound="StorageMixin")


def _share_entries(node: Any) -> None:
    """Share the non-tensor entries under ``node`` (which marks them shared and locks them, as
    upstream) and mark its nested tensordicts shared. A lazy stack is walked member by member:
    its members may hold leaves of different shapes, which a read of the stacked leaf refuses."""
    members = getattr(node, "tensordicts", None)
    if members is not None and not is_non_tensor(node):
        for member in members:
            if isinstance(member, StorageMixin):
                member._is_shared = True
            _share_entries(member)
        return
    for _, value in node._own_items():
        if is_non_tensor(value):
            value.share_memory_()
            continue
        if isinstance(value, StorageMixin):
            value._is_shared = True
        inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
        if isinstance(inner, TensorCollection):
            _share_entries(inner)


class StorageMixin(TensorCollection):
    """``share_memory_``, ``memmap*``, ``save`` / ``load_memmap`` and ``is_memmap``."""

    __slots__ = ()

    # ================================================================== shared memory
    def share_memory_(self: T) -> T:
        """Move every tensor to shared memory (in place), mark this tensordict and its nested
        ones as shared (:meth:`is_shared`) and lock them."""
        td: Any = self
        for value in td._tensor_leaves():
            value.share_memory_()
        _share_entries(td)
        self._is_shared = True
        return td.lock_()  # type: ignore[no-any-return]

    @property
    def _is_shared(self) -> bool:
        """Whether ``share_memory_`` was called (or every tensor is in shared memory)."""
        return bool(getattr(self, "_shared", False)) or self.is_shared()

    @_is_shared.setter
    def _is_shared(self, value: bool) -> None:
        # (classes without the flag, lazy stacks, read their tensors instead)
        with contextlib.suppress(AttributeError):
            object.__setattr__(self, "_shared", bool(value))

    def _drop_storage_flags(self) -> None:
        """Unlocked: no longer reported as shared or memory-mapped (as upstream; the files of a
        memory-mapped tensordict stay where they are, and ``memmap_()`` writes there again)."""
        for flag in ("_shared", "_is_memmap"):
            if isinstance(getattr(self, flag, None), bool):
                with contextlib.suppress(AttributeError):  # (a read-only property)
                    object.__setattr__(self, flag, False)

    def is_shared(self) -> bool:
        """Whether the tensors live in shared memory (False when there are none).

        A :class:`~tensordict.TensorDict` answers with a flag, as upstream: set by
        :meth:`~tensordict.TensorDict.share_memory_`, kept by indexing and by the shape
        operations that view (``view``, ``permute``, ``unsqueeze``, ...), dropped by key
        operations (``select``, ``exclude``, ...), copies and ``unlock_()``.
        """
        return in_shared_memory(self)

    # (memmap_, memmap, save, load_memmap and the make_memmap* methods: the forwarding table of
    # ``forwards``, implemented by ``tensordict.memmap``)
    def is_memmap(self) -> bool:
        """Whether the leaves are memory-mapped (after ``memmap_`` / ``load_memmap``, and their
        views)."""
        raise NotImplementedError

    @property
    def saved_path(self) -> str | None:
        """The directory this tensordict was memory-mapped to, if any."""
        raise NotImplementedError


def in_shared_memory(td: Any) -> bool:
    """Whether every tensor of ``td`` lives in shared memory (False when there are none),
    whatever :meth:`~StorageMixin.is_shared` answers.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2).share_memory_())
        >>> in_shared_memory(td), td.is_shared()
        (True, False)
    """
    tensors = td._tensor_leaves()
    return bool(tensors) and all(t.is_shared() for t in tensors)


def keep_storage_flags(source: Any, result: Any) -> Any:
    """Give ``result`` (a view of ``source``: same leaves' storages) and its nested tensordicts
    the shared / memory-mapped flags of ``source`` and its nested ones; return ``result``."""
    if result is source or not isinstance(getattr(source, "_shared", None), bool):
        return result  # (a lazy stack or a view: its flags follow its members or source)
    for flag in ("_shared", "_is_memmap"):
        value = getattr(source, flag, None)
        if isinstance(value, bool):
            with contextlib.suppress(AttributeError):
                object.__setattr__(result, flag, value)
    for key, value in source._own_items():
        if isinstance(value, StorageMixin):
            child = result._get_str(key, None)
            if isinstance(child, StorageMixin):
                keep_storage_flags(value, child)
    return result
