"""TensorDictBase: the tensordict behaviour, written once on the primitives of ``collection``.

Entry access (get/set/update/pop/select/...), structure (keys, flatten), copies (clone, empty, to),
locking and conversion live here. Elementwise maths comes from ``ops``, shape operations from
``shape``, stack/cat/split from ``combine``; storage (memmap) and the parallel map are reached
through thin methods that defer to ``tensordict.memmap`` and ``tensordict.parallel``, which build
on core.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from tensordict.core.combine import CombineMixin
from tensordict.core.keys import (
    ItemsView,
    KeysView,
    NestedKey,
    ValuesView,
    key_path,
    unravel_key,
)
from tensordict.core.non_tensor import NonTensorData, NonTensorStack, is_non_tensor
from tensordict.core.ops import CastMixin, OpsMixin
from tensordict.core.shape import ShapeMixin
from tensordict.errors import (
    BatchSizeError,
    LockedError,
    ShapeMismatchError,
    TensorDictKeyError,
)

__all__ = ["TensorDictBase", "is_tensor_collection"]

T = TypeVar("T", bound="TensorDictBase")
_MISSING: Any = object()


def is_tensor_collection(value: Any) -> bool:
    """Whether ``value`` is a tensordict, a tensorclass instance or stored non-tensor data."""
    return (
        isinstance(value, TensorDictBase)
        or is_non_tensor(value)
        or getattr(type(value), "_is_tensorclass", False)
    )


def as_size(batch_size: Any) -> torch.Size:
    """Turn an int, a sequence of ints or None into a ``torch.Size``."""
    if batch_size is None:
        return torch.Size([])
    if isinstance(batch_size, torch.Size):
        return batch_size
    if isinstance(batch_size, int) and batch_size >= 0:
        return torch.Size([batch_size])
    try:
        size = torch.Size([int(b) for b in batch_size])
    except (TypeError, ValueError):
        size = None
    if size is None or (size and min(size) < 0):
        raise BatchSizeError(
            f"batch_size must be a sequence of non-negative ints (e.g. [32] or "
            f"torch.Size([4, 5])), got {batch_size!r}."
        )
    return size


def locked_message(what: str) -> str:
    return (
        f"cannot {what}: the tensordict is locked. In-place writes (set_, update_, td[idx] = ...) "
        "are allowed; to change its structure, unlock it with td.unlock_() (or work on "
        "td.clone())."
    )


class TensorDictBase(OpsMixin, ShapeMixin, CombineMixin, CastMixin):
    """The behaviour shared by every tensordict class.

    Not instantiated directly: use :class:`~tensordict.TensorDict` or
    :class:`~tensordict.LazyStackedTensorDict`.
    """

    __slots__ = ()

    # ================================================================== size, device, names
    @property
    def shape(self) -> torch.Size:
        """Alias of :attr:`batch_size`."""
        return self.batch_size

    @property
    def batch_dims(self) -> int:
        """The number of batch dimensions."""
        return len(self.batch_size)

    @property
    def ndim(self) -> int:
        """Alias of :attr:`batch_dims`."""
        return len(self.batch_size)

    def ndimension(self) -> int:
        return len(self.batch_size)

    def dim(self) -> int:
        return len(self.batch_size)

    def numel(self) -> int:
        """The number of elements in the batch (the product of the batch size)."""
        return self.batch_size.numel()

    def size(self, dim: int | None = None) -> torch.Size | int:
        """The batch size, or its size along ``dim``."""
        return self.batch_size if dim is None else self.batch_size[dim]

    def __len__(self) -> int:
        bs = self.batch_size
        return bs[0] if bs else 0

    def __iter__(self) -> Iterator[Any]:
        if not self.batch_size:
            raise StopIteration(
                "iteration over a tensordict with no batch dimension. Iterate over keys() instead."
            )
        return iter(self.unbind(0))

    def __contains__(self, key: object) -> bool:
        raise NotImplementedError(
            "`key in td` is ambiguous for a tensordict. Use `key in td.keys()` "
            "(or `td.keys(include_nested=True)` for nested keys)."
        )

    def __bool__(self) -> bool:
        raise RuntimeError(
            "the truth value of a tensordict is ambiguous. Use td.all() or td.any() "
            "(or td.is_empty() to test for entries)."
        )

    __hash__ = object.__hash__

    def is_empty(self) -> bool:
        """Whether the tensordict holds no leaf (nested empty tensordicts count as empty)."""
        return not any(True for _ in self.keys(include_nested=True, leaves_only=True))

    def auto_batch_size_(self: T, batch_dims: int | None = None) -> T:
        """Set the batch size to the longest shape prefix shared by every leaf.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4, 5), "b": torch.zeros(3, 4)})
            >>> td.auto_batch_size_().batch_size
            torch.Size([3, 4])
        """
        prefix: list[int] | None = None
        for _, value in self._own_items():
            if isinstance(value, TensorDictBase):
                value.auto_batch_size_()
                shape = list(value.batch_size)
            elif is_non_tensor(value):
                continue
            else:
                shape = list(value.shape)
            if prefix is None:
                prefix = shape
            else:
                n = 0
                while n < min(len(prefix), len(shape)) and prefix[n] == shape[n]:
                    n += 1
                prefix = prefix[:n]
        new = prefix or []
        if batch_dims is not None:
            new = new[:batch_dims]
        self.batch_size = torch.Size(new)
        return self

    # ================================================================== keys
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
    ) -> KeysView:
        """A view of the keys (nested keys as tuples when ``include_nested``)."""
        return KeysView(self, include_nested, leaves_only, is_leaf)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
    ) -> ValuesView:
        """A view of the values, in key order."""
        return ValuesView(self, include_nested, leaves_only, is_leaf)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
    ) -> ItemsView:
        """A view of ``(key, value)`` pairs, in key order."""
        return ItemsView(self, include_nested, leaves_only, is_leaf)

    def sorted_keys(self) -> list[str]:
        return sorted(self._own_keys())

    def _get_path(self, path: tuple[str, ...], default: Any) -> Any:
        node: Any = self
        for part in path[:-1]:
            node = node._get_str(part, None) if isinstance(node, TensorDictBase) else None
            if node is None:
                return default
            if getattr(type(node), "_is_tensorclass", False):
                node = node._tensordict
        if not isinstance(node, TensorDictBase):
            return default
        return node._get_str(path[-1], default)

    def _missing_key(self, key: Any) -> TensorDictKeyError:
        avail = list(self._own_keys())
        shown = ", ".join(repr(k) for k in avail[:8]) + (", ..." if len(avail) > 8 else "")
        return TensorDictKeyError(
            f"key {key!r} not found in {type(self).__name__} with keys [{shown}]. "
            "Check the spelling, or use td.get(key, default) for optional entries."
        )

    def get(self, key: NestedKey, default: Any = None) -> Any:
        """The value under ``key`` (``NonTensorData`` is returned as is), or ``default``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": {"b": torch.ones(2)}}, [2])
            >>> td.get(("a", "b"))
            tensor([1., 1.])
            >>> td.get("missing") is None
            True
        """
        if key.__class__ is str:
            return self._get_str(key, default)
        return self._get_path(key_path(key), default)

    def _getitem_key(self, key: Any) -> Any:
        value = (
            self._get_str(key, _MISSING)
            if key.__class__ is str
            else self._get_path(key_path(key), _MISSING)
        )
        if value is _MISSING:
            raise self._missing_key(unravel_key(key))
        if value.__class__ is NonTensorData:
            return value.data
        if value.__class__ is NonTensorStack:
            return value.tolist()
        return value

    def __getitem__(self, index: Any) -> Any:
        if index.__class__ is str or (
            index.__class__ is tuple and index and index[0].__class__ is str
        ):
            return self._getitem_key(index)
        return self._index(index)

    def get_at(self, key: NestedKey, index: Any, default: Any = _MISSING) -> Any:
        """Read ``td[key][index]`` without materialising the whole entry."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            if default is not _MISSING:
                return default
            raise self._missing_key(key)
        return value[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        if index.__class__ is str or (
            index.__class__ is tuple and index and index[0].__class__ is str
        ):
            self.set(index, value)
            return
        from tensordict.core.setitem import setitem_index

        setitem_index(self, index, value)

    # ================================================================== writing entries
    def _check_batch(self, key: Any, value: Any, batch_size: torch.Size) -> None:
        n = len(batch_size)
        shape = value.shape if hasattr(value, "shape") else None
        if shape is None or (n and tuple(shape[:n]) != tuple(batch_size)):
            got = list(shape) if shape is not None else type(value).__name__
            raise BatchSizeError(
                f"cannot set {key!r}: its shape {got} does not start with the batch size "
                f"{list(batch_size)}. Every entry's leading dimensions must equal the batch size; "
                "reshape the value or change td.batch_size."
            )

    def _convert(self, key: Any, value: Any, batch_size: torch.Size) -> Any:
        """Turn a user value into a stored value for a tensordict of ``batch_size`` (or raise)."""
        device = self.device
        if isinstance(value, torch.Tensor):
            self._check_batch(key, value, batch_size)
            if device is not None and value.device != device:
                value = value.to(device)
            return value
        if isinstance(value, TensorDictBase):
            self._check_batch(key, value, batch_size)
            if device is not None and value.device != device:
                value = value.to(device)
            return value
        if getattr(type(value), "_is_tensorclass", False):
            self._check_batch(key, value, batch_size)
            return value
        if isinstance(value, NonTensorData):
            if len(value.batch_size) <= len(batch_size):
                if value.batch_size and value.batch_size != batch_size[: value.batch_dims]:
                    self._check_batch(key, value, batch_size)
                return value._with_batch_size(batch_size)
            self._check_batch(key, value, batch_size)
            return value
        if isinstance(value, NonTensorStack):
            self._check_batch(key, value, batch_size)
            return value
        if isinstance(value, Mapping):
            return self._new_nested(value, batch_size)
        if isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
            t = torch.tensor(value, device=device)
            self._check_batch(key, t, batch_size)
            return t
        if isinstance(value, np.ndarray) and value.dtype != object:
            t = torch.as_tensor(value, device=device)
            self._check_batch(key, t, batch_size)
            return t
        return NonTensorData._new(value, batch_size, device)

    def _new_nested(self, mapping: Mapping[str, Any], batch_size: torch.Size) -> TensorDictBase:
        from tensordict.core.dense import TensorDict

        return TensorDict(dict(mapping), batch_size=batch_size, device=self.device)

    def _parent_for_write(self, path: tuple[str, ...], create: bool) -> TensorDictBase:
        """The tensordict that holds the last part of ``path``, created if asked and allowed."""
        node: TensorDictBase = self
        for i, part in enumerate(path[:-1]):
            child = node._get_str(part, None)
            if child is None:
                if not create:
                    raise self._missing_key(path[: i + 1])
                if node.is_locked:
                    raise LockedError(locked_message(f"create the nested key {path[: i + 1]!r}"))
                child = node._new_dense({}, node.batch_size)
                node._set_str(part, child, validated=True)
            elif getattr(type(child), "_is_tensorclass", False):
                child = child._tensordict
            elif not isinstance(child, TensorDictBase):
                raise TensorDictKeyError(
                    f"cannot reach {path!r}: {path[: i + 1]!r} is a {type(child).__name__}, not a "
                    "tensordict. Use a different key, or delete the leaf first."
                )
            node = child
        return node

    def _target_batch_size(self, path: tuple[str, ...]) -> torch.Size:
        node: Any = self
        for part in path[:-1]:
            child = node._get_str(part, None)
            if getattr(type(child), "_is_tensorclass", False):
                child = child._tensordict
            if not isinstance(child, TensorDictBase):
                # missing (created with this batch size) or a leaf (_parent_for_write raises)
                return node.batch_size
            node = child
        return node.batch_size

    def set(
        self: T,
        key: NestedKey,
        item: Any,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        **kwargs: Any,
    ) -> T:
        """Write ``item`` under ``key`` (nested keys create the intermediate tensordicts).

        With ``inplace=True`` an existing entry is overwritten in place (allowed when locked).

        Raises:
            LockedError: the tensordict is locked and ``inplace`` is False.
            BatchSizeError: the value's leading dimensions differ from the batch size.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(batch_size=[3])
            >>> td.set(("x", "y"), torch.zeros(3, 2))["x", "y"].shape
            torch.Size([3, 2])
        """
        path = (key,) if key.__class__ is str else key_path(key)
        if inplace:
            existing = self._get_path(path, None)
            if existing is not None:
                self._write_inplace(path, existing, item)
                return self
        if self.is_locked:
            raise LockedError(locked_message(f"set {unravel_key(path)!r}"))
        value = self._convert(unravel_key(path), item, self._target_batch_size(path))
        parent = self._parent_for_write(path, create=True)
        if parent.is_locked:
            raise LockedError(locked_message(f"set {unravel_key(path)!r}"))
        parent._set_str(path[-1], value, validated=True)
        return self

    def _write_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        if isinstance(existing, torch.Tensor):
            if not isinstance(item, torch.Tensor):
                item = torch.as_tensor(item, device=existing.device)
            try:
                target_shape = torch.broadcast_shapes(item.shape, existing.shape)
            except RuntimeError:
                target_shape = None
            if target_shape != existing.shape:
                raise ShapeMismatchError(
                    f"cannot write a value of shape {list(item.shape)} in place into "
                    f"{unravel_key(path)!r} of shape {list(existing.shape)}. Give a value of "
                    "that shape (or one that broadcasts to it)."
                )
            existing.copy_(item)
        elif isinstance(existing, TensorDictBase) or getattr(
            type(existing), "_is_tensorclass", False
        ):
            existing.update_(item)
        else:
            parent = self._parent_for_write(path, create=False)
            parent._set_str(
                path[-1],
                self._convert(unravel_key(path), item, parent.batch_size),
                validated=True,
            )

    def set_(self: T, key: NestedKey, item: Any) -> T:
        """Overwrite an existing entry in place (works on locked tensordicts).

        Raises:
            TensorDictKeyError: the key does not exist.
        """
        path = (key,) if key.__class__ is str else key_path(key)
        existing = self._get_path(path, None)
        if existing is None:
            raise self._missing_key(unravel_key(path))
        self._write_inplace(path, existing, item)
        return self

    def set_at_(self: T, key: NestedKey, value: Any, index: Any) -> T:
        """Write ``value`` into ``td[key][index]`` in place."""
        existing = self.get(key, None)
        if existing is None:
            raise self._missing_key(key)
        existing[index] = value
        return self

    def setdefault(self, key: NestedKey, default: Any, inplace: bool = False) -> Any:
        """Return ``td[key]``, setting it to ``default`` first if it is missing."""
        if self.get(key, _MISSING) is _MISSING:
            self.set(key, default, inplace=inplace)
        return self._getitem_key(key)

    def _flat_updates(
        self, other: Any, prefix: tuple[str, ...], keys: builtins.set[NestedKey] | None
    ) -> list[tuple[tuple[str, ...], Any]]:
        items: Iterable[tuple[str, Any]]
        if isinstance(other, TensorDictBase):
            items = other._own_items()
        elif getattr(type(other), "_is_tensorclass", False):
            items = other._tensordict._own_items()
        else:
            items = other.items()
        out: list[tuple[tuple[str, ...], Any]] = []
        for key, value in items:
            path = prefix + key_path(key)
            nested = isinstance(value, (Mapping, TensorDictBase))
            current = self._get_path(path, None) if nested else None
            if nested and isinstance(current, TensorDictBase):
                out.extend(self._flat_updates(value, path, keys))
            elif keys is None or unravel_key(path) in keys or path[0] in keys:
                out.append((path, value))
        return out

    def update(
        self: T,
        input_dict_or_td: Mapping[str, Any] | TensorDictBase,
        clone: bool = False,
        inplace: bool = False,
        *,
        keys_to_update: Sequence[NestedKey] | None = None,
        non_blocking: bool = False,
        **kwargs: Any,
    ) -> T:
        """Write every entry of a dict or tensordict (nested tensordicts are merged).

        All values are validated before anything is written: a failed update leaves the
        tensordict as it was.
        """
        keys = {unravel_key(k) for k in keys_to_update} if keys_to_update is not None else None
        updates = self._flat_updates(input_dict_or_td, (), keys)
        staged = []
        for path, value in updates:
            if clone and hasattr(value, "clone"):
                value = value.clone()
            existing = self._get_path(path, None) if inplace else None
            if existing is not None:
                staged.append((path, None, value, existing))
                continue
            if self.is_locked:
                raise LockedError(locked_message(f"update {unravel_key(path)!r}"))
            converted = self._convert(unravel_key(path), value, self._target_batch_size(path))
            staged.append((path, converted, value, None))
        for path, converted, value, existing in staged:
            if existing is not None:
                self._write_inplace(path, existing, value)
            else:
                self._parent_for_write(path, create=True)._set_str(
                    path[-1], converted, validated=True
                )
        return self

    def update_(
        self: T,
        input_dict_or_td: Mapping[str, Any] | TensorDictBase,
        clone: bool = False,
        *,
        keys_to_update: Sequence[NestedKey] | None = None,
        **kwargs: Any,
    ) -> T:
        """Write every entry in place; every key must exist. Validated before writing."""
        keys = {unravel_key(k) for k in keys_to_update} if keys_to_update is not None else None
        updates = self._flat_updates(input_dict_or_td, (), keys)
        staged = []
        for path, value in updates:
            existing = self._get_path(path, None)
            if existing is None:
                raise self._missing_key(unravel_key(path))
            if isinstance(existing, torch.Tensor):
                v = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
                try:
                    ok = torch.broadcast_shapes(v.shape, existing.shape) == existing.shape
                except RuntimeError:
                    ok = False
                if not ok:
                    raise ShapeMismatchError(
                        f"update_: {unravel_key(path)!r} has shape {list(existing.shape)} but "
                        f"the new value has shape {list(v.shape)}. Shapes must match."
                    )
            staged.append((path, existing, value))
        for path, existing, value in staged:
            self._write_inplace(path, existing, value.clone() if clone else value)
        return self

    def copy_(self: T, src: TensorDictBase, non_blocking: bool = False) -> T:
        """Copy every entry of ``src`` in place (same as :meth:`update_`)."""
        return self.update_(src)

    def __delitem__(self, key: NestedKey) -> None:
        self.del_(key)

    def del_(self: T, key: NestedKey) -> T:
        """Remove an entry. Raises if missing or if the tensordict is locked."""
        path = key_path(key)
        if self.is_locked:
            raise LockedError(locked_message(f"delete {unravel_key(path)!r}"))
        parent = self._parent_for_write(path, create=False)
        if parent._get_str(path[-1], None) is None:
            raise self._missing_key(unravel_key(path))
        if parent.is_locked:
            raise LockedError(locked_message(f"delete {unravel_key(path)!r}"))
        parent._del_str(path[-1])
        return self

    def pop(self, key: NestedKey, default: Any = _MISSING) -> Any:
        """Remove an entry and return it (or ``default`` when missing)."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            if default is not _MISSING:
                return default
            raise self._missing_key(unravel_key(key))
        self.del_(key)
        return value

    def rename_key_(self: T, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> T:
        """Move an entry to a new key. With ``safe=True`` an existing ``new_key`` raises."""
        if self.is_locked:
            raise LockedError(locked_message(f"rename {unravel_key(old_key)!r}"))
        value = self.get(old_key, _MISSING)
        if value is _MISSING:
            raise self._missing_key(unravel_key(old_key))
        if safe and self.get(new_key, None) is not None:
            raise TensorDictKeyError(
                f"cannot rename {unravel_key(old_key)!r} to {unravel_key(new_key)!r}: that key "
                "exists. Pass safe=False to overwrite it."
            )
        old_path, new_path = key_path(old_key), key_path(new_key)
        if old_path == new_path:
            return self
        if new_path[: len(old_path)] == old_path:  # moved inside itself: make room first
            self.del_(old_key)
            self.set(new_key, value)
            return self
        self.set(new_key, value)  # write first: a new key that cannot be set loses nothing
        self.del_(old_key)
        return self

    def select(self: T, *keys: NestedKey, inplace: bool = False, strict: bool = True) -> T:
        """A tensordict with only the given keys (sharing the same tensors).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2)}}, [2])
            >>> list(td.select(("b", "c")).keys(include_nested=True))
            ['b', ('b', 'c')]
        """
        paths = [key_path(k) for k in keys]
        out = self.empty()
        for path in paths:
            value = self._get_path(path, _MISSING)
            if value is _MISSING:
                if strict:
                    raise self._missing_key(unravel_key(path))
                continue
            parent = out._parent_for_write(path, create=True)
            if parent._get_str(path[-1], None) is None:
                parent._set_str(path[-1], value, validated=True)
        if inplace:
            return self._replace_contents(out)
        return self._lock_like_storage(out)  # type: ignore[no-any-return]

    def exclude(self: T, *keys: NestedKey, inplace: bool = False) -> T:
        """A tensordict without the given keys (sharing the same tensors)."""
        excluded = {key_path(k) for k in keys}
        out = self._copy_structure(excluded, ())
        if inplace:
            return self._replace_contents(out)
        return self._lock_like_storage(out)  # type: ignore[no-any-return]

    def _lock_like_storage(self, out: Any) -> Any:
        """Lock ``out`` if self is a locked memory-mapped or shared tensordict (as upstream).

        A plain locked tensordict gives an unlocked result from select/exclude.
        """
        if self.is_locked and (self.is_memmap() or self.is_shared()):
            out.lock_()
        return out

    def _copy_structure(
        self, excluded: builtins.set[tuple[str, ...]], prefix: tuple[str, ...]
    ) -> Any:
        source = {}
        for key, value in self._own_items():
            path = prefix + (key,)
            if path in excluded:
                continue
            if isinstance(value, TensorDictBase):
                value = value._copy_structure(excluded, path)
            source[key] = value
        return self._new_dense(source, self.batch_size, self._names_or_none())

    def _replace_contents(self: T, other: TensorDictBase) -> T:
        if self.is_locked:
            raise LockedError(locked_message("select or exclude keys in place"))
        for key in list(self._own_keys()):
            self._del_str(key)
        for key, value in other._own_items():
            self._set_str(key, value, validated=True)
        return self

    @classmethod
    def fromkeys(cls, keys: Iterable[NestedKey], value: Any = 0) -> Any:
        """A tensordict with every key set to ``value`` (no batch dimension)."""
        from tensordict.core.dense import TensorDict

        td = TensorDict()
        for key in keys:
            td.set(key, value)
        return td

    def flatten_keys(self: T, separator: str = ".", inplace: bool = False) -> T:
        """Turn nested keys into flat keys joined with ``separator``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": {"b": torch.zeros(1)}}, [1])
            >>> list(td.flatten_keys().keys())
            ['a.b']
        """
        source: dict[str, Any] = {}
        for key, value in self.items(include_nested=True, leaves_only=True):
            flat = key if isinstance(key, str) else separator.join(key)
            if flat in source:
                raise TensorDictKeyError(
                    f"flattening with separator {separator!r} makes two entries named {flat!r}. "
                    "Choose a separator that no key contains."
                )
            source[flat] = value
        out = self._new_dense(source, self.batch_size, self._names_or_none())
        return self._replace_contents(out) if inplace else out

    def unflatten_keys(self: T, separator: str = ".", inplace: bool = False) -> T:
        """Split flat keys on ``separator`` into nested tensordicts (inverse of flatten_keys)."""
        out = self.empty()
        for key, value in self._own_items():
            parts = tuple(key.split(separator))
            if isinstance(value, TensorDictBase):
                value = value.unflatten_keys(separator)
            parent = out._parent_for_write(parts, create=True)
            parent._set_str(parts[-1], value, validated=True)
        return self._replace_contents(out) if inplace else out

    # ================================================================== copies and conversion
    def empty(
        self: T,
        recurse: bool = False,
        *,
        batch_size: Sequence[int] | None = None,
        device: Any = _MISSING,
        names: Sequence[str] | None = None,
    ) -> T:
        """A tensordict of the same batch size and device with no entries (unlocked).

        With ``recurse=True`` the nested tensordicts are kept (empty).
        """
        source: dict[str, Any] = {}
        if recurse:
            for key, value in self._own_items():
                if isinstance(value, TensorDictBase):
                    source[key] = value.empty(recurse=True)
        bs = self.batch_size if batch_size is None else as_size(batch_size)
        out = self._new_dense(source, bs, self._names_or_none() if batch_size is None else None)
        if device is not _MISSING:
            out._device = torch.device(device) if device is not None else None
        return out  # type: ignore[no-any-return]

    def clone(self: T, recurse: bool = True, **kwargs: Any) -> T:
        """A copy (unlocked). ``recurse=False`` copies the structure but shares the tensors."""
        if not recurse:
            return self._copy_structure(set(), ())  # type: ignore[no-any-return]
        return self._apply_leaves(lambda t: t.clone(), keep_non_tensor_copy=True)  # type: ignore[no-any-return]

    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        """A regular :class:`~tensordict.TensorDict` holding copies of the data in memory."""
        return self.clone()

    def contiguous(self: T) -> T:
        """A tensordict whose leaves are contiguous in memory (copies where needed)."""
        return self._apply_leaves(lambda t: t.contiguous())  # type: ignore[no-any-return]

    def detach(self: T) -> T:
        return self._apply_leaves(lambda t: t.detach())  # type: ignore[no-any-return]

    def detach_(self: T) -> T:
        for value in self._tensor_leaves():
            value.detach_()
        return self

    def zero_(self: T) -> T:
        """Fill every tensor with zeros, in place."""
        for value in self._tensor_leaves():
            value.zero_()
        return self

    def copy(self: T) -> T:
        """A shallow copy (same as ``clone(recurse=False)``)."""
        return self.clone(recurse=False)

    def to_dict(self, *, retain_none: bool = True, convert_tensors: bool = False) -> dict[str, Any]:
        """A nested ``dict`` of the entries (non-tensor data as the stored objects)."""
        out: dict[str, Any] = {}
        for key, value in self._own_items():
            if isinstance(value, TensorDictBase):
                out[key] = value.to_dict(convert_tensors=convert_tensors)
            elif isinstance(value, NonTensorData):
                out[key] = value.data
            elif isinstance(value, NonTensorStack):
                out[key] = value.tolist()
            elif getattr(type(value), "_is_tensorclass", False):
                out[key] = value.to_dict()
            else:
                out[key] = value.tolist() if convert_tensors else value
        return out

    @classmethod
    def from_dict(
        cls,
        input_dict: Mapping[str, Any],
        batch_size: Sequence[int] | None = None,
        device: Any = None,
        batch_dims: int | None = None,
        *,
        auto_batch_size: bool | None = None,
        names: Sequence[str] | None = None,
    ) -> Any:
        """Build a tensordict from a nested dict.

        Without ``batch_size``, ``auto_batch_size=True`` (or ``batch_dims``) infers it from the
        leaves; otherwise the batch size is empty.
        """
        from tensordict.core.dense import TensorDict

        if batch_size is not None and batch_dims is not None:
            raise ValueError("give batch_size or batch_dims, not both.")
        td = TensorDict(dict(input_dict), batch_size=batch_size, device=device)
        if batch_size is None and (auto_batch_size or batch_dims is not None):
            td.auto_batch_size_(batch_dims)
        if names is not None:
            td.names = names
        return td

    # ================================================================== device and dtype
    def to(self: T, *args: Any, **kwargs: Any) -> T:
        """Move to a device and/or cast floating point leaves to a dtype (like ``Tensor.to``).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.to(torch.float64)["a"].dtype
            torch.float64
            >>> td.to("cpu").device
            device(type='cpu')
        """
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        non_blocking = kwargs.pop("non_blocking", False)
        batch_size = kwargs.pop("batch_size", None)
        for arg in args:
            if isinstance(arg, torch.dtype):
                dtype = arg
            elif isinstance(arg, (str, torch.device, int)):
                device = torch.device(arg)
            elif isinstance(arg, torch.Tensor):
                device, dtype = arg.device, arg.dtype
            elif isinstance(arg, TensorDictBase):
                device = arg.device
            else:
                raise TypeError(f"to() got an unsupported argument {arg!r}")
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        out: Any = self
        if dtype is not None:
            out = out._apply_leaves(lambda t: t.to(dtype))
        if device is not None:
            device = torch.device(device)
            out = out._apply_leaves(
                lambda t: t.to(device, non_blocking=non_blocking), device=device
            )
        if batch_size is not None:
            out = out.clone(recurse=False) if out is self else out
            out.batch_size = batch_size
        return out  # type: ignore[no-any-return]

    def cpu(self: T) -> T:
        return self.to("cpu")

    def cuda(self: T, device: int | None = None) -> T:
        return self.to(torch.device("cuda" if device is None else f"cuda:{device}"))

    def clear_device_(self: T) -> T:
        """Forget the device (leaves stay where they are)."""
        self._set_device(None)
        return self

    def _set_device(self, device: torch.device | None) -> None:
        raise NotImplementedError

    # ================================================================== locking
    def lock_(self: T) -> T:
        """Lock the structure (recursively): keys can no longer be added, removed or replaced.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2]).lock_()
            >>> with td.unlock_():
            ...     td["b"] = torch.ones(2)
            >>> td.is_locked
            True
        """
        self._set_locked(True)
        self._last_op = "lock_"
        return self

    def unlock_(self: T) -> T:
        """Unlock the structure (recursively); as a context manager, re-lock on exit."""
        self._set_locked(False)
        self._last_op = "unlock_"
        return self

    def _set_locked(self, value: bool) -> None:
        raise NotImplementedError

    def __enter__(self: T) -> T:
        self._context_ops().append(self._last_op)
        return self

    def __exit__(self, *exc: Any) -> None:
        last = self._context_ops().pop()
        if last == "unlock_":
            self._set_locked(True)
        elif last == "lock_":
            self._set_locked(False)

    def _context_ops(self) -> list[str | None]:
        raise NotImplementedError

    _last_op: str | None

    # ================================================================== shared memory
    def share_memory_(self: T) -> T:
        """Move every tensor to shared memory (in place) and lock the tensordict."""
        for value in self._tensor_leaves():
            value.share_memory_()
        return self.lock_()

    def is_shared(self) -> bool:
        """Whether the tensors live in shared memory (False when there are none)."""
        tensors = self._tensor_leaves()
        return bool(tensors) and all(t.is_shared() for t in tensors)

    # ================================================================== misc
    def filter_non_tensor_data(self: T) -> T:
        """A tensordict without the non-tensor entries (recursively)."""
        source = {}
        for key, value in self._own_items():
            if is_non_tensor(value):
                continue
            if isinstance(value, TensorDictBase):
                value = value.filter_non_tensor_data()
            source[key] = value
        return self._new_dense(source, self.batch_size, self._names_or_none())  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        from tensordict.core.printing import td_repr

        return td_repr(self)

    # ================================================================== storage and parallel map
    # These are implemented by the memmap and parallel packages, which build on core.
    def memmap_(self: T, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> T:
        """Write every leaf to memory-mapped files (see :func:`tensordict.memmap.io.memmap_`)."""
        from tensordict.memmap import io

        return io.memmap_(self, prefix, copy_existing=copy_existing, **kwargs)

    def memmap(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Any:
        """A memory-mapped copy; the source is unchanged (see ``tensordict.memmap.io.memmap``)."""
        from tensordict.memmap import io

        return io.memmap(self, prefix, copy_existing=copy_existing, **kwargs)

    def memmap_like(self, prefix: Any = None, **kwargs: Any) -> Any:
        """Zero-filled memory-mapped files of the same structure, nothing copied."""
        from tensordict.memmap import io

        return io.memmap_like(self, prefix, **kwargs)

    def save(self, prefix: Any = None, **kwargs: Any) -> Any:
        """Save to ``prefix`` in the memory-mapped format (same as :meth:`memmap`)."""
        return self.memmap(prefix, **kwargs)

    dumps = save

    def memmap_refresh_(self: T) -> T:
        """Reload the leaves from the files after another process rewrote the metadata."""
        from tensordict.memmap import io

        return io.memmap_refresh_(self)

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

    def map_iter(
        self, fn: Callable[..., Any], dim: int = 0, num_workers: int | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Apply ``fn`` to chunks in worker processes and yield results (see the parallel API)."""
        from tensordict.parallel.api import map_iter

        return map_iter(self, fn, dim, num_workers, **kwargs)

    def map(
        self, fn: Callable[..., Any], dim: int = 0, num_workers: int | None = None, **kwargs: Any
    ) -> Any:
        """Apply ``fn`` to chunks in worker processes and reassemble (see the parallel API)."""
        from tensordict.parallel.api import map as _map

        return _map(self, fn, dim, num_workers, **kwargs)
