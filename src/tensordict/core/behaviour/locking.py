"""Locking of a tensordict's structure: ``lock_`` / ``unlock_`` (also as context managers),
and the lock graph, through which a nested tensordict stays locked while a locked tensordict
holds it."""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any, NamedTuple, TypeVar

import torch

from tensordict.core.collection import TensorCollection
from tensordict.errors import LockedError

__all__ = ["LockedSchema", "LockingMixin", "warn_lock_in_compile"]

T = TypeVar("T", bound="LockingMixin")


class LockedSchema(NamedTuple):
    """The keys of a locked tensordict, in order (what ``_locked_schema`` answers)."""

    keys: tuple[str, ...]


def warn_lock_in_compile() -> bool:
    """Warn (once per compilation: Dynamo runs this while tracing) that ``lock_`` ran in a
    compiled region; the message starts as upstream's."""
    warnings.warn(
        "Using lock_() inside a compiled graph: the lock graph (a nested tensordict cannot be "
        "unlocked while a locked tensordict holds it) is kept with weak references, which "
        "torch.compile does not trace, so it is not recorded for this lock. Lock the "
        "tensordict before entering the compiled region if you rely on it.",
        UserWarning,
        stacklevel=3,
    )
    return True


# torch.compile calls the function while tracing and keeps its result as a constant (instead of
# tracing warnings.warn, which breaks the graph). This is the mark
# torch.compiler.assume_constant_result sets; set directly because that function imports
# torch._dynamo (and sympy), which `import tensordict` must not (tests/compile pins the mark).
warn_lock_in_compile._dynamo_marked_constant = True  # type: ignore[attr-defined]


class LockingMixin(TensorCollection):
    """``lock_`` / ``unlock_``, the lock graph and the ``with`` protocol of tensordicts."""

    __slots__ = ()
    #: weak references to the locked tensordicts holding this one (a slot of TensorDictBase)
    _lock_parents: list[weakref.ref[Any]] | None

    # ================================================================== locking
    def lock_(self: T) -> T:
        """Lock the structure (recursively): keys can no longer be added, removed or replaced.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2]).lock_()
            >>> with td.unlock_():
            ...     td["b"] = torch.ones(2)
            >>> td.is_locked
            True
        """
        was_locked = self.is_locked
        if torch.compiler.is_compiling() and not was_locked:
            warn_lock_in_compile()
        self._set_locked(True)
        self._last_op = ("lock_", was_locked)
        return self

    def unlock_(self: T) -> T:
        """Unlock the structure (recursively); as a context manager, re-lock on exit.

        A nested tensordict stays locked while a locked tensordict holds it: unlocking it alone
        raises :class:`~tensordict.errors.LockedError` (unlock the root instead), and so does
        unlocking one of two locked tensordicts that hold the same nested one (as upstream).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"n": {"a": torch.zeros(2)}}, [2]).lock_()
            >>> td["n"].unlock_()
            Traceback (most recent call last):
            ...
            tensordict.errors.LockedError: Cannot unlock a tensordict that is part of a locked...
            >>> td.unlock_()["n"].is_locked
            False
        """
        was_locked = self.is_locked
        self._check_unlockable()
        locked = [node for node in self._lock_subtree() if node.is_locked]
        self._set_locked(False)
        for node in locked:  # (as upstream: unlocked, it is no longer shared / memory-mapped)
            if not node.is_locked:
                node._drop_storage_flags()
        if getattr(self, "_consolidated", None) is not None:
            self._consolidated = None  # (as upstream: writes may now break the single storage)
        self._last_op = ("unlock_", was_locked)
        return self

    @property
    def _locked_schema(self) -> LockedSchema | None:
        """The own keys of a locked tensordict, in order; None when it is unlocked (upstream's
        private attribute, which its compile tests read: a locked tensordict cannot gain or
        lose keys, so the tuple stays valid until it is unlocked).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": torch.ones(2)}, [2])
            >>> td._locked_schema is None
            True
            >>> td.lock_()._locked_schema.keys
            ('a', 'b')
        """
        if not self.is_locked:
            return None
        return LockedSchema(tuple(self._own_keys()))

    def _set_locked(self, value: bool, parent: Any = None) -> None:
        """Lock (recording ``parent`` as a holder) or unlock, recursively."""
        raise NotImplementedError

    # The lock graph: a nested tensordict remembers (weakly) the locked tensordicts that locked
    # it, so that it cannot be unlocked under them, and stays locked while one of them is.
    def _add_lock_parent(self, parent: Any) -> None:
        if torch.compiler.is_compiling():  # weak references are not traced: not recorded
            warn_lock_in_compile()
            return
        if any(p is parent for p in self._locked_parents()):  # (also drops dead holders)
            return
        refs = getattr(self, "_lock_parents", None)
        if refs is None:
            refs = self._lock_parents = []  # type: ignore[misc]
        refs.append(weakref.ref(parent))

    def _lock_members(self) -> list[Any]:
        """The tensordicts whose holders hold this one too (a lazy stack's members)."""
        return []

    def _lock_children(self) -> list[Any]:
        """The tensordicts this one locks with itself (nested ones, a lazy stack's members)."""
        return self._lock_members()

    @property
    def _lock_parents_weakrefs(self) -> list[weakref.ref[Any]]:
        """Weak references to every locked tensordict holding this one, directly or through
        others, or holding one of its members if it is a lazy stack (upstream's private
        accessor, which its tests and TorchRL read)."""
        seen: dict[int, TensorCollection] = {}
        todo = list(self._locked_parents())
        for member in self._lock_members():
            todo.extend(p for p in (r() for r in member._lock_parents_weakrefs) if p is not None)
        while todo:
            parent = todo.pop()
            if id(parent) not in seen:
                seen[id(parent)] = parent
                todo.extend(parent._locked_parents())
        seen.pop(id(self), None)
        return [weakref.ref(p) for p in seen.values()]

    def _locked_parents(self) -> list[Any]:
        """The locked tensordicts holding this one; holders gone or unlocked are forgotten."""
        refs = getattr(self, "_lock_parents", None)
        if not refs:
            return []
        refs[:] = [r for r in refs if (p := r()) is not None and p.is_locked]
        return [p for p in (r() for r in refs) if p is not None]

    def _lock_subtree(self) -> list[Any]:
        """This tensordict and the ones its lock reaches (nested, members), each once."""
        seen: dict[int, Any] = {id(self): self}
        todo = [self]
        while todo:
            for child in todo.pop()._lock_children():
                if id(child) not in seen:
                    seen[id(child)] = child
                    todo.append(child)
        return list(seen.values())

    def _release_lock(self, parent: Any) -> None:
        """``parent`` was unlocked: unlock too, unless another locked parent still holds us."""
        refs = getattr(self, "_lock_parents", None)
        if refs:
            refs[:] = [r for r in refs if r() is not parent]
        if not self._locked_parents():
            self._set_locked(False)

    def _held_from_outside(self) -> tuple[Any, Any] | None:
        """A locked tensordict outside this one that holds it or one of the tensordicts it
        would unlock with itself, as ``(held, holder)``; None if there is none."""
        inside = {id(node): node for node in self._lock_subtree()}
        for node in inside.values():
            for parent in node._locked_parents():
                if id(parent) not in inside:
                    return node, parent
        return None

    def _check_unlockable(self) -> None:
        found = self._held_from_outside()
        if found is not None:
            # a holder only kept alive by a reference cycle does not count (as upstream)
            del found
            gc.collect()
            found = self._held_from_outside()
        if found is not None:
            held, holder = found
            what = "it is" if held is self else "a tensordict it holds is"
            raise LockedError(
                f"Cannot unlock a tensordict that is part of a locked graph: {what} held by a "
                f"locked tensordict (batch_size={list(holder.batch_size)}) that unlocking it "
                "would not unlock: unlock the root tensordict instead (with root.unlock_(): ... "
                "to re-lock it afterwards), or work on a copy (td.clone())."
            )

    def __enter__(self: T) -> T:
        self._context_ops().append(self._last_op)
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leaving ``with td.lock_():`` / ``with td.unlock_():`` restores the state before it."""
        last = self._context_ops().pop()
        if last is None:
            return
        if last[0] == "restore":  # to_module's swap: put the replaced tensors back
            restore: Any = last[1]
            restore()
            return
        was_locked = last[1]
        if was_locked and not self.is_locked:
            self._set_locked(True)
        elif not was_locked and self.is_locked and not self._locked_parents():
            # (a locked parent that took hold of us inside the block keeps us locked: raising
            # here would hide the block's own exception)
            self._set_locked(False)

    def _context_ops(self) -> list[tuple[str, bool] | None]:
        raise NotImplementedError

    def clear_refs_for_compile_(self: T) -> T:
        """Forget the last operation recorded for the ``with`` form, here and in every nested
        tensordict, and return ``self``.

        A shape operation (``view``, ``transpose``, ...) or ``lock_`` records what leaving a
        ``with`` block on its result must undo; that record can hold a callable that
        ``torch.compile`` does not return from a compiled function. Calling this method on a
        tensordict before returning it from a compiled function drops the record (the result
        can then no longer be used as a context manager to undo that operation).

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(4), "n": {"b": torch.zeros(4)}}, [4])
            >>> view = td.view(2, 2)
            >>> view.clear_refs_for_compile_() is view
            True
            >>> view._last_op is None
            True
        """
        todo = [self]
        while todo:
            node = todo.pop()
            node._last_op = None
            todo.extend(node._lock_children())
        return self

    _last_op: tuple[str, bool] | None
