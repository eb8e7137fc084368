"""Shared memory and memory-mapped storage of a tensordict: thin methods that defer to
``tensordict.memmap`` (which builds on core), so that ``core`` never imports it at load time."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, TypeVar

import torch

from tensordict.core.behaviour.consolidate import run_early
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import NestedKey, leaf_or_non_tensor
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

    # ================================================================== storage and parallel map
    # These are implemented by the memmap and parallel packages, which build on core.
    def memmap_(self: T, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> T:
        """Write every leaf to memory-mapped files (see :func:`tensordict.memmap.io.memmap_`)."""
        from tensordict.memmap import io

        return io.memmap_(self, prefix, copy_existing=copy_existing, **kwargs)

    def memmap(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Any:
        """A memory-mapped copy; the source is unchanged (see ``tensordict.memmap.io.memmap``).

        ``return_early=True`` with ``num_threads > 0`` writes in a background thread and
        returns a :class:`~tensordict.utils.TensorDictFuture` (as upstream)."""
        from tensordict.memmap import io

        if kwargs.pop("return_early", False) and kwargs.get("num_threads", 0) > 0:
            return run_early(lambda: io.memmap(self, prefix, copy_existing=copy_existing, **kwargs))
        return io.memmap(self, prefix, copy_existing=copy_existing, **kwargs)

    def memmap_like(self, prefix: Any = None, **kwargs: Any) -> Any:
        """Zero-filled memory-mapped files of the same structure, nothing copied."""
        from tensordict.memmap import io

        return io.memmap_like(self, prefix, **kwargs)

    def save(self, prefix: Any = None, **kwargs: Any) -> Any:
        """Save to ``prefix`` in the memory-mapped format (same as :meth:`memmap`)."""
        return self.memmap(prefix, **kwargs)

    dumps = save

    def memmap_refresh_(self: T, *, allow_pickle: bool | None = None) -> T:
        """Reload the leaves from the files after another process rewrote the metadata
        (``allow_pickle`` as for :meth:`load_memmap`)."""
        from tensordict.memmap import io

        return io.memmap_refresh_(self, allow_pickle=allow_pickle)

    def make_memmap(self, key: NestedKey, shape: Sequence[int], *, dtype: Any = None) -> Any:
        """Create a new memory-mapped leaf (zero-filled) in a memory-mapped tensordict."""
        from tensordict.memmap import io

        return io.make_memmap(self, key, shape, dtype=dtype)

    def make_memmap_from_tensor(
        self, key: NestedKey, tensor: torch.Tensor, *, copy_data: bool = True
    ) -> Any:
        """Create a new memory-mapped leaf from a tensor in a memory-mapped tensordict."""
        from tensordict.memmap import io

        return io.make_memmap_from_tensor(self, key, tensor, copy_data=copy_data)

    def make_memmap_from_storage(
        self, key: NestedKey, storage: Any, shape: Sequence[int], *, dtype: Any = None
    ) -> Any:
        """Create a new memory-mapped leaf from an untyped storage in a memory-mapped
        tensordict: the storage's file when it is mapped from the entry's path, else a copy.

        Raises:
            MemmapStorageError: the storage is mapped from another file, or is too small.
            NotMemmappedError: this tensordict is not memory-mapped to a directory.

        Examples:
            >>> import tempfile
            >>> from tensordict import TensorDict
            >>> td = TensorDict().memmap_(tempfile.mkdtemp())
            >>> storage = torch.arange(4.0).untyped_storage()
            >>> t = td.make_memmap_from_storage(("x", "y"), storage, shape=[2], dtype=torch.float32)
            >>> t.tolist(), td["x"].saved_path is not None
            ([0.0, 1.0], True)
        """
        from tensordict.memmap import io

        return io.make_memmap_from_storage(self, key, storage, shape, dtype=dtype)

    def load_memmap_(
        self: T,
        prefix: Any,
        robust_key: bool | None = True,
        *,
        allow_pickle: bool | None = None,
        mode: str | None = None,
    ) -> T:
        """Load the tensordict saved at ``prefix`` into this one, in place; return ``self``.

        Leaves are replaced by the loaded tensors and entries that were not saved are removed
        (see ``tensordict.memmap.load.load_memmap_into``). ``robust_key`` is accepted for
        upstream compatibility (keys are always read in both encodings).
        """
        from tensordict.memmap.load import load_memmap_into

        return load_memmap_into(self, prefix, allow_pickle=allow_pickle, mode=mode)  # type: ignore[no-any-return]

    @classmethod
    def load_memmap(
        cls, prefix: Any, device: Any = None, *, allow_pickle: bool = False, **kwargs: Any
    ) -> Any:
        """Load a tensordict saved with :meth:`memmap_` or :meth:`save`."""
        from tensordict.memmap import io

        return io.load_memmap(prefix, device=device, allow_pickle=allow_pickle, **kwargs)

    load = load_memmap

    def is_memmap(self) -> bool:
        """Whether the leaves are memory-mapped (after memmap_ / load_memmap, and their views)."""
        raise NotImplementedError

    @property
    def saved_path(self) -> str | None:
        """The directory this tensordict was memory-mapped to, if any."""
        raise NotImplementedError
