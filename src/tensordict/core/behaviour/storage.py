"""Where a tensordict's tensors live: shared memory (``share_memory_``, ``is_shared``) and the
memory-mapped state (``is_memmap``, ``saved_path``). Writing and loading memory-mapped files is
``tensordict.memmap``'s, bound as methods by the forwarding table of ``forwards``."""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import is_non_tensor

__all__ = ["StorageMixin"]

T = TypeVar("T", bound="StorageMixin")


class StorageMixin(TensorCollection):
    """``share_memory_``, ``memmap*``, ``save`` / ``load_memmap`` and ``is_memmap``."""

    __slots__ = ()

    # ================================================================== shared memory
    def share_memory_(self: T) -> T:
        """Move every tensor to shared memory (in place) and lock the tensordict."""
        td: Any = self
        for value in td._tensor_leaves():
            value.share_memory_()
        for key in td.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
            entry = td._get_path(key if isinstance(key, tuple) else (key,), None)
            if is_non_tensor(entry):
                entry.share_memory_()  # marks it shared and locks it, as upstream
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

    def is_shared(self) -> bool:
        """Whether the tensors live in shared memory (False when there are none)."""
        tensors = self._tensor_leaves()  # type: ignore[attr-defined]
        return bool(tensors) and all(t.is_shared() for t in tensors)

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
