"""Reading and writing entries: get / set / update / pop / del / rename, nested keys included.

Every write validates the value (its leading dimensions must equal the batch size) before anything
is stored, so a failed ``set`` or ``update`` leaves the tensordict as it was; structural writes on a
locked tensordict raise :class:`~tensordict.errors.LockedError`, in-place writes are allowed.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from tensordict.core import factory
from tensordict.core.batch_shape import leaf_shape
from tensordict.core.behaviour.nesting import check_nesting
from tensordict.core.behaviour.setitem import refuse_cycle, setitem_index
from tensordict.core.behaviour.shape import broadcasts_to
from tensordict.core.behaviour.update_resize import check_source_batch_size, update_resized
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import NestedKey, is_key_index, key_path, unravel_key
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack, is_non_tensor
from tensordict.core.nontensor.data import list_to_stack as stack_list
from tensordict.core.options import GET_DEFAULTS_TO_NONE, list_to_stack
from tensordict.core.unbatched import is_unbatched, rebatch
from tensordict.errors import BatchSizeError, LockedError, ShapeMismatchError, TensorDictKeyError

__all__ = ["LOCK_ERROR", "NO_DEFAULT", "EntriesMixin", "inplace_value", "locked_message"]

T = TypeVar("T", bound="EntriesMixin")
_MISSING: Any = object()


class _Unset(enum.Enum):
    """``get``'s default: ``None``, or a KeyError under ``set_get_defaults_to_none(False)``.

    An enum member (not an instance of a plain class): torch.compile can hold it when it
    binds ``get``'s defaults without a source (a plain object there breaks the graph).
    """

    UNSET = "unset"

    def __repr__(self) -> str:
        return "None"


_UNSET: Any = _Unset.UNSET


# The opening of every locked-write message, worded as upstream's (clients match on it).
LOCK_ERROR = (
    "Cannot modify locked TensorDict. For in-place modification, consider using the `set_()` "
    "method and make sure the key is present."
)


class _NoDefault(enum.IntEnum):
    """Type of :data:`NO_DEFAULT`."""

    ZERO = 0


# Passed as ``default`` to ``get``: raise a KeyError for a missing key instead of returning.
NO_DEFAULT = _NoDefault.ZERO


def locked_message(what: str) -> str:
    return (
        f"{LOCK_ERROR} Could not {what}: the tensordict is locked. In-place writes (set_, "
        "update_, td[idx] = ...) are allowed; to change its structure, unlock it with "
        "td.unlock_() (or work on td.clone())."
    )


def inplace_value(path: tuple[str, ...], existing: torch.Tensor, item: Any) -> torch.Tensor:
    """``item`` as a tensor that can be copied into ``existing`` (or a clear error)."""
    if not isinstance(item, torch.Tensor):
        try:
            item = torch.as_tensor(item, device=existing.device)
        except (TypeError, ValueError, RuntimeError):
            raise ShapeMismatchError(
                f"Cannot update an existing entry of type {type(existing).__name__} with a value "
                f"of type {type(item).__name__} (key {unravel_key(path)!r}): an in-place write "
                "keeps the entry a tensor. Set it without inplace to replace it."
            ) from None
    if not broadcasts_to(item.shape, existing.shape):
        raise ShapeMismatchError(
            f"Failed to update {unravel_key(path)!r} in tensordict: a value of shape "
            f"{list(item.shape)} cannot be written in place into an entry of shape "
            f"{list(existing.shape)}. Give a value of that shape (or one that broadcasts to it)."
        )
    return item


def _leads_to(path: tuple[str, ...], keys: builtins.set[NestedKey]) -> bool:
    """Whether ``path`` is, or starts, one of ``keys``: a nested entry the destination lacks
    is then copied whole (as upstream)."""
    n = len(path)
    return any(
        (key,) == path[:1] if isinstance(key, str) else tuple(key[:n]) == path for key in keys
    )


class _LazyMerge:
    """A lazy stack written into an existing nested tensordict by ``update``: the target is
    seen as a lazy stack along the same dim and updated member by member (as upstream), so
    the members' own keys and shapes are kept."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def merge_into(self, td: Any, path: tuple[str, ...], *, clone: bool, inplace: bool) -> None:
        parent = td._parent_for_write(path, create=False)
        current = parent._get_str(path[-1], None)
        sd = self.value.stack_dim
        if getattr(current, "stack_dim", None) != sd:
            current = current.to_lazystack(sd)
            parent._set_str(path[-1], current, validated=True)
        current.update(self.value, clone=clone, inplace=inplace)


class _TcMerge:
    """A tensorclass written by ``update`` over an instance of its class: merged into it field
    by field (fields it holds None for leave the existing ones alone), as upstream."""

    __slots__ = ("keys", "value")

    def __init__(self, value: Any, keys: list[Any] | None) -> None:
        self.value = value
        self.keys = keys

    def merge_into(self, td: Any, path: tuple[str, ...], *, clone: bool, inplace: bool) -> None:
        parent = td._parent_for_write(path, create=False)
        current = parent._get_str(path[-1], None)
        current.update(self.value, clone=clone, inplace=inplace, keys_to_update=self.keys)
        if parent._get_str(path[-1], None) is not current:
            # a view (a sub-tensordict's entry) reads a new instance each time: the merged
            # one is written back, at the view's index of its source
            parent._set_str(path[-1], current, validated=True)


def _keys_inside(path: tuple[str, ...], keys: builtins.set[NestedKey] | None) -> list[Any] | None:
    """The keys of ``keys`` inside ``path`` (relative to it); None for all of them."""
    if keys is None or unravel_key(path) in keys:
        return None
    n = len(path)
    return [key[n:] for key in keys if isinstance(key, tuple) and key[:n] == path and key[n:]]


class _Resize:
    """A nested tensordict (or tensorclass) of ``update(..., update_batch_size=True)`` whose
    batch size conflicts with the one it is written into: that one is resized in place (it
    keeps its identity, as upstream)."""

    __slots__ = ("is_leaf", "value")

    def __init__(self, value: Any, is_leaf: Any) -> None:
        self.value = value
        self.is_leaf = is_leaf

    def merge_into(self, td: Any, path: tuple[str, ...], *, clone: bool, inplace: bool) -> None:
        current = td._parent_for_write(path, create=False)._get_str(path[-1], None)
        current.update(self.value, clone=clone, update_batch_size=True, is_leaf=self.is_leaf)


def _is_tc(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def _grown(value: Any, batch_size: torch.Size) -> Any:
    """A tensordict with fewer batch dims than its new parent, whose leaves allow it: a shallow
    copy with the parent's batch size (as upstream). Anything else is returned as is."""
    bs = value.batch_size
    if len(bs) >= len(batch_size) or tuple(batch_size[: len(bs)]) != tuple(bs):
        return value
    copy = value.clone(recurse=False)
    try:
        copy.batch_size = batch_size
    except (RuntimeError, ValueError):  # the leaves do not allow it: the batch check raises
        return value
    return copy


def list_value(value: list[Any], device: torch.device | None) -> Any:
    """What a list stored in a tensordict becomes, as upstream: numbers (or nested lists of
    them) a tensor, tensors their stack; other objects a :class:`NonTensorStack` along the first
    dims (one object per element) while ``list_to_stack()`` is on (the default), else one
    :class:`NonTensorData` holding them as an array. ``None``: store the list as it is."""
    if value and all(isinstance(v, torch.Tensor) for v in value):
        try:
            return torch.stack(value).to(device) if device is not None else torch.stack(value)
        except RuntimeError:
            return None  # tensors of different shapes: kept as one python object
    if value and not any(isinstance(v, (str, bytes, Mapping)) for v in value):
        try:
            return torch.tensor(value, device=device)
        except (TypeError, ValueError, RuntimeError):
            pass
    if not value:
        return None
    if list_to_stack():
        return NonTensorStack.from_list(value, device)
    return NonTensorData._new(np.array(value), torch.Size([]), device)


#: keyword options of update() (upstream's); any other keyword is an entry to write
_UPDATE_OPTIONS = frozenset({"is_leaf", "update_batch_size", "ignore_lock"})


class EntriesMixin(TensorCollection):
    """Entry access for every tensordict class."""

    __slots__ = ()

    def _get_path(self, path: tuple[str, ...], default: Any) -> Any:
        node: Any = self
        for part in path[:-1]:
            node = node._get_str(part, None) if isinstance(node, TensorCollection) else None
            if node is None:
                return default
            if getattr(type(node), "_is_tensorclass", False):
                node = node._tensordict
        if not isinstance(node, TensorCollection):
            return default
        return node._get_str(path[-1], default)

    def _missing_key(self, key: Any) -> TensorDictKeyError:
        avail = list(self._own_keys())
        shown = ", ".join(repr(k) for k in avail[:8]) + (", ..." if len(avail) > 8 else "")
        named = f'"{key}"' if isinstance(key, str) else repr(key)  # (upstream's quotes)
        return TensorDictKeyError(
            f"key {named} not found in {type(self).__name__} with keys [{shown}]. "
            "Check the spelling, or use td.get(key, default) for optional entries."
        )

    def get(self, key: NestedKey, default: Any = _UNSET, **options: Any) -> Any:
        """The value under ``key`` (``NonTensorData`` is returned as is), or ``default``.

        A ragged entry of a lazy stack is read with ``as_list=True``, ``as_padded_tensor=True``
        (with ``padding_value``, ``padding_side``) or ``as_nested_tensor=True`` (with ``layout``);
        see :mod:`tensordict.core.behaviour.ragged`.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": {"b": torch.ones(2)}}, [2])
            >>> td.get(("a", "b"))
            tensor([1., 1.])
            >>> td.get("missing") is None
            True
        """
        if "default" in options:
            default = options.pop("default")
        if default is _UNSET:
            if GET_DEFAULTS_TO_NONE.value is False:
                return self._get_or_raise(key)
            default = None
        elif default is NO_DEFAULT:
            return self._get_or_raise(key)
        if options:
            path = key_path(key)
            holder: Any = self._get_path(path[:-1], None) if len(path) > 1 else self
            if getattr(type(holder), "_is_tensorclass", False):
                holder = holder._tensordict
            if not isinstance(holder, TensorCollection):
                return default
            return holder._get_leaf_as(path[-1], default, **options)  # type: ignore[attr-defined]
        if type(key) is str:
            return self._get_str(key, default)
        return self._get_path(key_path(key), default)

    def _get_or_raise(self, key: NestedKey) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise self._missing_key(unravel_key(key))
        return value

    def _getitem_key(self, key: Any) -> Any:
        value = (
            self._get_str(key, _MISSING)
            if type(key) is str
            else self._get_path(key_path(key), _MISSING)
        )
        if value is _MISSING:
            raise self._missing_key(unravel_key(key))
        if isinstance(value, NonTensorData):
            return value.data
        if type(value) is NonTensorStack:
            return value._as_linked_list()
        return value

    def __getitem__(self, index: Any) -> Any:
        if is_key_index(index):
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
        if is_key_index(index):
            self.set(index, value)
            return
        setitem_index(self, index, value)

    # ================================================================== writing entries
    def _check_batch(self, key: Any, value: Any, batch_size: torch.Size) -> None:
        n = len(batch_size)
        if isinstance(value, torch.Tensor) and value.is_nested:
            shape = leaf_shape(value)  # (-1 where the components differ)
        else:
            shape = value.shape if hasattr(value, "shape") else None
        if shape is None or (n and tuple(shape[:n]) != tuple(batch_size)):
            got = list(shape) if shape is not None else type(value).__name__
            raise BatchSizeError(
                f"batch dimension mismatch, got self.batch_size={batch_size} and value.shape="
                f"{shape} for key {key!r}: cannot set {key!r}, its shape {got} does not start "
                f"with the batch size {list(batch_size)}. Every entry's leading dimensions must "
                "equal the batch size; reshape the value or change td.batch_size."
            )

    def _convert(self, key: Any, value: Any, batch_size: torch.Size) -> Any:
        """Turn a user value into a stored value for a tensordict of ``batch_size`` (or raise)."""
        device = self.device
        if isinstance(value, torch.Tensor):
            if is_unbatched(value):  # exempt from the batch size
                value = rebatch(value, batch_size)  # type: ignore[arg-type]
            else:
                self._check_batch(key, value, batch_size)
            if device is not None and value.device != device:
                value = value.to(device)
            return value
        if isinstance(value, TensorCollection):
            check_nesting(key, value)
            value = _grown(value, batch_size)
            self._check_batch(key, value, batch_size)
            if device is not None and value.device != device:
                value = value.to(device)  # type: ignore[attr-defined]
            return value
        if getattr(type(value), "_is_tensorclass", False):
            check_nesting(key, value)
            value = _grown(value, batch_size)
            self._check_batch(key, value, batch_size)
            if device is not None and value.device != device:  # (a moved copy, as upstream)
                value = value.to(device)
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
        if type(value) is list and list_to_stack():  # upstream 0.15's default
            stacked = stack_list(value, device)
            self._check_batch(key, stacked, batch_size)
            return stacked
        if isinstance(value, (bool, int, float, np.number, np.bool_)):  # (complex: python object)
            t = torch.tensor(value, device=device)
            self._check_batch(key, t, batch_size)
            return t
        if isinstance(value, np.ndarray) and value.dtype != object:
            t = torch.as_tensor(value, device=device)
            self._check_batch(key, t, batch_size)
            return t
        if isinstance(value, list):
            converted = list_value(value, device)
            if converted is not None:
                return self._convert(key, converted, batch_size)
        return NonTensorData._new(value, batch_size, device)

    def _new_nested(self, mapping: Mapping[str, Any], batch_size: torch.Size) -> Any:
        return factory.TensorDict(dict(mapping), batch_size=batch_size, device=self.device)

    def _parent_for_write(self, path: tuple[str, ...], create: bool) -> Any:
        """The tensordict that holds the last part of ``path``, created if asked and allowed."""
        node: Any = self
        for i, part in enumerate(path[:-1]):
            child = node._get_str(part, None)
            if child is None:
                if not create:
                    raise self._missing_key(path[: i + 1])
                if node.is_locked:
                    raise LockedError(locked_message(f"create the nested key {path[: i + 1]!r}"))
                node._set_str(part, node._new_dense({}, node.batch_size), validated=True)
                # read it back: a view (lazy view, sub-tensordict) stores it in its source
                child = node._get_str(part, None)
            elif getattr(type(child), "_is_tensorclass", False):
                child = child._tensordict
            elif not isinstance(child, TensorCollection):
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
            if not isinstance(child, TensorCollection):
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
        path = (key,) if type(key) is str else key_path(key)
        if inplace:
            existing = self._get_path(path, None)
            if existing is not None:
                self._write_inplace(path, existing, item)
                return self
        if self.is_locked:
            raise LockedError(locked_message(f"set {unravel_key(path)!r}"))
        value = self._convert(unravel_key(path), item, self._target_batch_size(path))
        refuse_cycle(self, path, value)
        parent = self._parent_for_write(path, create=True)
        if parent.is_locked:
            raise LockedError(locked_message(f"set {unravel_key(path)!r}"))
        parent._set_str(path[-1], value, validated=True)
        return self

    def _write_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        # The tensordict holding the leaf writes it: a lazy stack reads a stacked copy of its
        # members' tensors, so writing into ``existing`` would be lost (see
        # LazyStackedTensorDict._write_leaf_inplace).
        parent = self if len(path) == 1 else self._parent_for_write(path, create=False)
        parent._write_leaf_inplace(path, existing, item)

    def _write_leaf_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        """Write ``item`` in place into ``existing``, the entry ``path[-1]`` of this tensordict."""
        if isinstance(existing, torch.Tensor):
            existing.copy_(inplace_value(path, existing, item))
        elif isinstance(existing, TensorCollection) or getattr(
            type(existing), "_is_tensorclass", False
        ):
            existing.update_(item)
        elif isinstance(item, torch.Tensor) and is_non_tensor(existing):
            raise ShapeMismatchError(
                f"Failed to update {unravel_key(path)!r} in tensordict: it holds non-tensor data "
                f"and a tensor cannot be written into it in place. Set it without inplace."
            )
        else:
            self._set_str(
                path[-1],
                self._convert(unravel_key(path), item, self.batch_size),
                validated=True,
            )

    def set_(self: T, key: NestedKey, item: Any) -> T:
        """Overwrite an existing entry in place (works on locked tensordicts).

        Raises:
            TensorDictKeyError: the key does not exist.
        """
        path = (key,) if type(key) is str else key_path(key)
        existing = self._get_path(path, None)
        if existing is None:
            raise self._missing_key(unravel_key(path))
        self._write_inplace(path, existing, item)
        return self

    def set_at_(self: T, key: NestedKey, value: Any, index: Any) -> T:
        """Write ``value`` into ``td[key][index]`` in place."""
        path = key_path(key)
        parent = self if len(path) == 1 else self._parent_for_write(path, create=False)
        existing = parent._get_str(path[-1], None)
        if existing is None:
            raise self._missing_key(unravel_key(path))
        parent._write_leaf_at(path, existing, value, index)
        return self

    def _write_leaf_at(self, path: tuple[str, ...], existing: Any, value: Any, index: Any) -> None:
        """``existing[index] = value`` for the entry ``path[-1]`` of this tensordict."""
        if isinstance(existing, torch.Tensor) and isinstance(value, (np.ndarray, np.generic)):
            value = torch.as_tensor(value, device=existing.device)
        existing[index] = value

    def setdefault(self, key: NestedKey, default: Any, inplace: bool = False) -> Any:
        """Return ``td[key]``, setting it to ``default`` first if it is missing."""
        if self.get(key, _MISSING) is _MISSING:
            self.set(key, default, inplace=inplace)
        return self._getitem_key(key)

    def _flat_updates(
        self,
        other: Any,
        prefix: tuple[str, ...],
        keys: builtins.set[NestedKey] | None,
        is_leaf: Callable[[type], bool] | None = None,
        update_batch_size: bool = False,
    ) -> list[tuple[tuple[str, ...], Any]]:
        """The ``(path, value)`` pairs an update writes (nested tensordicts are merged, unless
        ``is_leaf(type(value))`` says they are leaves; one whose batch size conflicts with the
        nested tensordict it meets resizes it with ``update_batch_size``, else raises)."""
        items: Iterable[tuple[str, Any]]
        if isinstance(other, TensorCollection):
            items = other._own_items()
        elif getattr(type(other), "_is_tensorclass", False):
            items = other._tensordict._own_items()
        else:
            items = other.items()
        out: list[tuple[tuple[str, ...], Any]] = []
        for key, value in items:
            path = prefix + key_path(key)
            nested = isinstance(value, (Mapping, TensorCollection))
            if nested and is_leaf is not None and isinstance(value, TensorCollection):
                nested = not is_leaf(type(value))
            tc_value = getattr(type(value), "_is_tensorclass", False)
            current = self._get_path(path, None) if nested or tc_value else None
            if (
                (nested or tc_value)
                and (isinstance(current, TensorCollection) or _is_tc(current))
                and hasattr(value, "batch_size")
                and check_source_batch_size(current, value, update_batch_size)
            ):
                out.append((path, _Resize(value, is_leaf)))
            elif nested and isinstance(current, TensorCollection):
                if hasattr(value, "stack_dim"):  # a lazy stack is merged member by member
                    out.append((path, _LazyMerge(value)))
                else:
                    out.extend(self._flat_updates(value, path, keys, is_leaf, update_batch_size))
            elif tc_value and _is_tc(current) and type(current) is type(value):
                inside = _keys_inside(path, keys)
                if inside is None or inside:
                    out.append((path, _TcMerge(value, inside)))
            elif keys is None or unravel_key(path) in keys or _leads_to(path, keys):
                out.append((path, value))
        return out

    def update(
        self: T,
        input_dict_or_td: Mapping[str, Any] | TensorCollection | None = None,
        clone: bool = False,
        inplace: bool = False,
        *,
        keys_to_update: Sequence[NestedKey] | None = None,
        non_blocking: bool = False,
        **kwargs: Any,
    ) -> T:
        """Write every entry of a dict or tensordict (nested tensordicts are merged), and the
        entries given as keywords (which win over the first argument's, as upstream).

        All values are validated before anything is written: a failed update leaves the
        tensordict as it was.
        """
        entries = {k: v for k, v in kwargs.items() if k not in _UPDATE_OPTIONS}
        is_leaf = kwargs.get("is_leaf")
        if input_dict_or_td is None:
            input_dict_or_td = {}
        if kwargs.get("update_batch_size") and self.is_locked:
            raise LockedError(locked_message("update the batch size"))
        if check_source_batch_size(self, input_dict_or_td, kwargs.get("update_batch_size", False)):
            update_resized(
                self,
                input_dict_or_td,
                clone=clone,
                inplace=inplace,
                keys_to_update=keys_to_update,
                is_leaf=is_leaf,
            )
            input_dict_or_td = {}
        if entries:
            if not isinstance(input_dict_or_td, Mapping) or isinstance(
                input_dict_or_td, TensorCollection
            ):
                self.update(input_dict_or_td, clone, inplace, keys_to_update=keys_to_update)
                input_dict_or_td = {}
            input_dict_or_td = {**input_dict_or_td, **entries}
        keys = {unravel_key(k) for k in keys_to_update} if keys_to_update is not None else None
        updates = self._flat_updates(
            input_dict_or_td, (), keys, is_leaf, kwargs.get("update_batch_size", False)
        )
        staged: list[tuple[tuple[str, ...], Any, Any, Any]] = []
        for path, value in updates:
            if isinstance(value, (_LazyMerge, _Resize, _TcMerge)):
                if self.is_locked and not inplace:
                    raise LockedError(locked_message(f"update {unravel_key(path)!r}"))
                staged.append((path, value, None, None))
                continue
            if clone and hasattr(value, "clone"):
                value = value.clone()
            existing = self._get_path(path, None) if inplace else None
            if existing is not None:
                staged.append((path, None, value, existing))
                continue
            if self.is_locked:
                raise LockedError(locked_message(f"update {unravel_key(path)!r}"))
            converted = self._convert(unravel_key(path), value, self._target_batch_size(path))
            refuse_cycle(self, path, converted)
            staged.append((path, converted, value, None))
        for path, converted, value, existing in staged:
            if isinstance(converted, (_LazyMerge, _Resize, _TcMerge)):
                converted.merge_into(self, path, clone=clone, inplace=inplace)
            elif existing is not None:
                self._write_inplace(path, existing, value)
            else:
                self._parent_for_write(path, create=True)._set_str(
                    path[-1], converted, validated=True
                )
        return self

    def update_(
        self: T,
        input_dict_or_td: Mapping[str, Any] | TensorCollection | None = None,
        clone: bool = False,
        *,
        keys_to_update: Sequence[NestedKey] | None = None,
        **kwargs: Any,
    ) -> T:
        """Write every entry in place (keywords too). Validated before writing.

        As upstream, the keys the destination lacks are skipped when at least one other key
        matches an entry of the destination; they raise ``KeyError`` when none does, or when
        ``keys_to_update`` names them.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> _ = td.update_({"a": torch.ones(2), "new": torch.ones(2)})  # "new" is skipped
            >>> td["a"].tolist(), "new" in td.keys()
            ([1.0, 1.0], False)
        """
        entries = {k: v for k, v in kwargs.items() if k not in _UPDATE_OPTIONS | {"non_blocking"}}
        if input_dict_or_td is None:
            input_dict_or_td = {}
        if entries:
            if isinstance(input_dict_or_td, Mapping) and not isinstance(
                input_dict_or_td, TensorCollection
            ):
                input_dict_or_td = {**input_dict_or_td, **entries}
            else:
                self.update_(input_dict_or_td, clone, keys_to_update=keys_to_update)
                input_dict_or_td = entries
        keys = {unravel_key(k) for k in keys_to_update} if keys_to_update is not None else None
        updates = self._flat_updates(input_dict_or_td, (), keys)
        staged, missing = [], []
        for path, value in updates:
            existing = self._get_path(path, None)
            if existing is None:
                missing.append(path)
                continue
            if isinstance(existing, torch.Tensor):
                v = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
                if not broadcasts_to(v.shape, existing.shape):
                    raise ShapeMismatchError(
                        f"Failed to update {unravel_key(path)!r} in tensordict: it has shape "
                        f"{list(existing.shape)} but the new value has shape {list(v.shape)}. "
                        "Give a value of that shape (or one that broadcasts to it)."
                    )
            staged.append((path, existing, value))
        if missing and (keys is not None or not staged):
            raise TensorDictKeyError(
                f"key {unravel_key(missing[0])!r} was not found in {type(self).__name__}: "
                "update_ writes existing entries in place. Use update() to add new entries."
            )
        for path, existing, value in staged:
            if isinstance(value, (_LazyMerge, _TcMerge)):  # (written in place as it is)
                value = value.value
            self._write_inplace(path, existing, value.clone() if clone else value)
        return self

    def copy_(self: T, src: TensorCollection, non_blocking: bool = False) -> T:
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
                f"key {unravel_key(new_key)!r} already present in TensorDict: cannot rename "
                f"{unravel_key(old_key)!r} to it with safe=True. Pass safe=False to overwrite it."
            )
        old_path, new_path = key_path(old_key), key_path(new_key)
        if old_path == new_path:
            return self
        if new_path[: len(old_path)] == old_path:  # moved inside itself: make room first
            self.del_(old_key)
            self.set(new_key, value)
            return self
        if old_path[: len(new_path)] == new_path:  # moved onto its ancestor: it replaces it
            self.set(new_key, value)
            return self
        self.set(new_key, value)  # write first: a new key that cannot be set loses nothing
        self.del_(old_key)
        return self
