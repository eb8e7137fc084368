"""The root of the tensordict class tree: the primitives every implementation provides.

:class:`TensorCollection` declares the handful of primitives (read/write one entry, list entries,
index, batch size, device, lock state) on which the behaviour in ``behaviour/`` is written once.
It exists as its own module so that those modules can refer to the tensordict type without
importing each other. :class:`OverSourceMixin` provides those primitives for the classes that
hold no entry of their own and read and write another tensordict's (typed tensordicts, lazy
views, ``TensorDictParams``).

The classes of the tree are shown under upstream's module paths (``tensordict._td.TensorDict``):
pickles and ``repr(type)`` name them so, and :func:`publish_as` sets that name.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["OverSourceMixin", "TensorCollection", "publish_as"]


class TensorCollection:
    """Primitives shared by :class:`~tensordict.TensorDict` and lazy stacks (abstract)."""

    __slots__ = ()

    # -- primitives ----------------------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        raise NotImplementedError

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        raise NotImplementedError

    @property
    def device(self) -> torch.device | None:
        raise NotImplementedError

    @property
    def names(self) -> list[str | None]:
        raise NotImplementedError

    @property
    def is_locked(self) -> bool:
        raise NotImplementedError

    def _own_keys(self) -> list[str]:
        """Keys of the entries directly in this tensordict."""
        raise NotImplementedError

    def _own_items(self) -> Iterator[tuple[str, Any]]:
        """``(key, raw value)`` pairs of the entries directly in this tensordict."""
        raise NotImplementedError

    def _own_key_items(self) -> Iterator[tuple[str, Any]]:
        """Like :meth:`_own_items`, for walking keys: a value may be a cheaper stand-in of the
        same kind (leaf or tensordict), e.g. a lazy stack does not stack its members' tensors."""
        return self._own_items()

    def _get_str(self, key: str, default: Any) -> Any:
        """The raw value under a direct key (``NonTensorData`` is not unwrapped)."""
        raise NotImplementedError

    def _set_str(self, key: str, value: Any, *, validated: bool) -> None:
        """Store a value under a direct key; ``validated`` values are stored as they are."""
        raise NotImplementedError

    def _del_str(self, key: str) -> None:
        raise NotImplementedError

    def _index(self, index: Any) -> Any:
        """Index the batch dimensions."""
        raise NotImplementedError

    def _apply_leaves(self, fn: Any, *others: Any, **kwargs: Any) -> Any:
        """Call ``fn`` on every tensor and rebuild the structure (see ``ops``)."""
        raise NotImplementedError

    def _names_or_none(self) -> list[str | None] | None:
        """The dimension names if any is set, else None (cheap to propagate)."""
        raise NotImplementedError

    def _new_dense(
        self,
        source: dict[str, Any],
        batch_size: torch.Size,
        names: list[str | None] | None = None,
    ) -> Any:
        """A dense tensordict holding already-validated ``source`` (no checks)."""
        raise NotImplementedError


class OverSourceMixin(TensorCollection):
    """The primitives of a tensordict that holds no entry of its own: they read and write
    another tensordict, ``self._inner_td``: a typed tensordict's or a lazy view's ``_source``,
    the parameters a ``TensorDictParams`` wraps.

    A wrapper lists it before :class:`~tensordict.TensorDictBase` among its bases and overrides
    what it shows differently (a lazy view reshapes the entries and the batch size;
    ``TensorDictParams`` keeps a lock flag of its own).
    """

    __slots__ = ()

    @property
    def _inner_td(self) -> Any:
        """The tensordict read and written: ``self._source`` unless a wrapper says otherwise
        (``TensorDictParams`` has no ``_source``, as upstream's: user code probing
        ``hasattr(td, "_source")`` for views must not take it for one)."""
        return self._source  # type: ignore[attr-defined]

    _context: list[tuple[str, bool] | None] | None

    # -- state: the source's -------------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return self._inner_td.batch_size  # type: ignore[no-any-return]

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        self._inner_td.batch_size = value

    @property
    def device(self) -> torch.device | None:
        return self._inner_td.device  # type: ignore[no-any-return]

    @property
    def names(self) -> list[str | None]:
        return self._inner_td.names  # type: ignore[no-any-return]

    @names.setter
    def names(self, value: Any) -> None:
        self._inner_td.names = value

    def _names_or_none(self) -> list[str | None] | None:
        return self._inner_td._names_or_none()  # type: ignore[no-any-return]

    @property
    def is_locked(self) -> bool:
        return self._inner_td.is_locked  # type: ignore[no-any-return]

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()  # type: ignore[attr-defined]
        else:
            self.unlock_()  # type: ignore[attr-defined]

    def _set_locked(self, value: bool, parent: Any = None) -> None:
        self._inner_td._set_locked(value, parent)  # locking the wrapper locks its source

    def _context_ops(self) -> list[tuple[str, bool] | None]:
        if self._context is None:
            self._context = []  # type: ignore[misc]  # (a slot of each subclass)
        return self._context

    def _set_device(self, device: torch.device | None) -> None:
        self._inner_td._set_device(device)

    def is_memmap(self) -> bool:
        return self._inner_td.is_memmap()  # type: ignore[no-any-return]

    @property
    def saved_path(self) -> str | None:
        return self._inner_td.saved_path  # type: ignore[no-any-return]

    # -- entries: the source's -----------------------------------------------------------------
    def _own_keys(self) -> list[str]:
        return self._inner_td._own_keys()  # type: ignore[no-any-return]

    def _own_items(self) -> Iterator[tuple[str, Any]]:
        return self._inner_td._own_items()  # type: ignore[no-any-return]

    def _own_key_items(self) -> Iterator[tuple[str, Any]]:
        return self._inner_td._own_key_items()  # type: ignore[no-any-return]

    def _get_str(self, key: str, default: Any) -> Any:
        return self._inner_td._get_str(key, default)

    def _del_str(self, key: str) -> None:
        self._inner_td._del_str(key)


def publish_as(module: str, *objects: Any) -> dict[str, Any]:
    """Name classes and functions by upstream's ``module`` (which re-exports them); return the
    methods of the classes whose docstrings hold examples, for the defining module's
    ``__test__``.

    Pickles and ``repr(type)`` then use upstream's path, so saved objects load with either
    package. doctest collects such a class's own docstring in ``module`` but skips its methods
    (their globals are another module's): the defining module lists them in ``__test__``. Methods
    defined in other modules (the forwarding table's rows) are left out: doctest collects them
    where they are defined. A function's examples stay collected where it is defined.

    Examples:
        >>> class A:
        ...     pass
        >>> def h():
        ...     pass
        >>> publish_as("somewhere.else", A, h)
        {}
        >>> A.__module__, h.__module__
        ('somewhere.else', 'somewhere.else')
    """
    found: dict[str, Any] = {}
    for obj in objects:
        home = sys.modules.get(obj.__module__)
        obj.__module__ = module
        if not isinstance(obj, type):
            continue
        home_globals = vars(home) if home is not None else None
        for name, attr in vars(obj).items():
            func = getattr(attr, "__func__", None) or getattr(attr, "fget", None) or attr
            if not callable(func) or ">>>" not in (getattr(func, "__doc__", None) or ""):
                continue
            if getattr(func, "__globals__", home_globals) is home_globals:
                found[f"{obj.__name__}.{name}"] = func
    return found


__test__ = publish_as("tensordict._tensorcollection", TensorCollection)  # upstream's path
