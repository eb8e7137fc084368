"""TensorDict: the dict-backed tensordict.

Entries live in a plain ``dict``; results of indexing and other internal operations are built with
:meth:`TensorDict._new_unsafe`, which skips validation (the values are known to fit), so that the
per-chunk path of ``map_iter`` stays a few microseconds per entry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase, as_size
from tensordict.core.behaviour.entries import _UNSET, locked_message
from tensordict.core.behaviour.names import checked_names
from tensordict.core.behaviour.storage import keep_storage_flags
from tensordict.core.collection import publish_as
from tensordict.core.factory import forward
from tensordict.core.indexing import IndexPlan, index_jagged, plan_index
from tensordict.core.keys import is_key_index, key_path, leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.unbatched import is_unbatched, rebatch
from tensordict.errors import BatchSizeError, LockedError

__all__ = ["TensorDict"]

_MISSING: Any = object()


class TensorDict(TensorDictBase):
    """A dictionary of tensors that share leading batch dimensions and behaves like one tensor.

    Args:
        source: a dict (or mapping) of tensors, nested dicts, tensordicts, numbers or other python
            objects (stored as :class:`NonTensorData`). Keyword arguments are added to it.
        batch_size: the leading dimensions every entry shares. Defaults to no batch dimension.
        device: if given, every tensor is moved to this device.
        names: optional names of the batch dimensions.
        lock: lock the structure after construction.

    Raises:
        BatchSizeError: an entry's leading dimensions differ from ``batch_size``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(4, 3), "reward": torch.ones(4)}, batch_size=[4])
        >>> td.shape
        torch.Size([4])
        >>> td[1:3]["obs"].shape
        torch.Size([2, 3])
        >>> td["nested", "x"] = torch.arange(4)
        >>> td["nested"].batch_size
        torch.Size([4])
    """

    __slots__ = (
        "__weakref__",
        "_batch_size",
        "_context",
        "_device",
        "_is_locked",
        "_is_memmap",
        "_last_op",
        "_memmap_prefix",
        "_names",
        "_shared",
        "_tensordict",
        "_view_source",
    )
    _view_source: TensorDict  # set on a view only: the tensordict it views

    def __init__(
        self,
        source: Mapping[str, Any] | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        non_blocking: bool | None = None,
        lock: bool = False,
        **kwargs: Any,
    ) -> None:
        self._tensordict: dict[str, Any] = {}
        self._batch_size = as_size(batch_size)
        self._device = torch.device(device) if device is not None else None
        self._names: list[str | None] | None = None
        self._is_locked = False
        self._lock_parents = None
        self._is_memmap = False
        self._memmap_prefix: str | None = None
        self._last_op: tuple[str, bool] | None = None
        self._context: list[tuple[str, bool] | None] | None = None
        self._shared = False
        if source is None:
            source = kwargs
        elif kwargs:
            raise ValueError(
                "Either a dictionary or a sequence of kwargs must be provided, not both: got "
                f"source= and the keyword entries {sorted(kwargs)}. Put every entry in the dict "
                "(TensorDict({**source, 'key': value})), or pass them all as keywords."
            )
        elif isinstance(source, TensorDictBase):
            source = dict(source._own_items())
        elif not isinstance(source, Mapping):
            raise TypeError(
                f"TensorDict expects a dict of tensors (or keyword arguments), got "
                f"{type(source).__name__}. Wrap the data in a dict: TensorDict({{'key': value}})."
            )
        bs = self._batch_size
        store = self._tensordict
        convert = self._convert
        for key, value in source.items():
            if type(key) is not str:
                if isinstance(key, tuple):
                    self.set(key, value)
                    continue
                key_path(key)  # raises a KeyTypeError naming the bad key
            if type(value) is torch.Tensor and (
                self._device is None or value.device == self._device
            ):
                try:
                    fits = len(bs) == 0 or value.shape[: len(bs)] == bs  # (len: bs may be symbolic)
                except RuntimeError:  # a nested (strided) tensor has no shape: checked below
                    fits = False
                if fits:
                    store[key] = value
                    continue
            store[key] = convert(key, value, bs)
        if -1 in bs:
            _check_ragged(self, bs)
        if names is not None:
            self.names = names  # type: ignore[assignment]
        if lock:
            self.lock_()

    @classmethod
    def _new_unsafe(
        cls,
        source: dict[str, Any] | None = None,
        batch_size: torch.Size | Sequence[int] | int | None = None,
        device: torch.device | None = None,
        names: list[str | None] | None = None,
        non_blocking: bool | None = None,
        lock: bool = False,
        nested: bool = True,
        is_shared: bool = False,
        is_memmap: bool = False,
        **kwargs: Any,
    ) -> TensorDict:
        """Wrap already-validated entries without any check (internal fast path).

        The entries come as ``source`` or as keyword arguments (as upstream's signature). A
        plain ``dict`` entry becomes a nested tensordict of the same batch size (TorchRL builds
        nested parameter tensordicts this way, as upstream's ``_new_unsafe`` allows; not with
        ``nested=False``). ``non_blocking`` is accepted for upstream's signature.

        Examples:
            >>> td = TensorDict._new_unsafe(a=torch.zeros(3), batch_size=torch.Size([3]))
            >>> td["a"].shape, td.batch_size
            (torch.Size([3]), torch.Size([3]))
        """
        if source is None:
            source = kwargs
        if type(batch_size) is not torch.Size:
            batch_size = as_size(batch_size)
        if nested:
            for key, value in source.items():
                if type(value) is dict:
                    source[key] = cls._new_unsafe(
                        value, batch_size, device, names, lock=lock, is_memmap=is_memmap
                    )
        self = object.__new__(cls)
        self._tensordict = source
        self._batch_size = batch_size
        self._device = device
        self._names = names
        self._is_locked = lock
        self._lock_parents = None
        self._is_memmap = is_memmap
        self._memmap_prefix = None
        self._last_op = None
        self._context = None
        self._shared = is_shared
        if lock:
            for value in source.values():
                if getattr(type(value), "_is_tensorclass", False):
                    value = value._tensordict
                if isinstance(value, TensorDictBase):
                    value._set_locked(True, self)
        return self

    def _new_dense(
        self,
        source: dict[str, Any],
        batch_size: torch.Size,
        names: list[str | None] | None = None,
    ) -> TensorDict:
        # type(self): results of a subclass are of that subclass (as upstream)
        return type(self)._new_unsafe(source, batch_size, self._device, names)

    # ================================================================== in-place forms
    def reshape(self, *shape: Any, size: Sequence[int] | None = None, inplace: bool = False) -> Any:
        """Reshape the batch dimensions (copies only where torch must).

        The shape comes as ints, one sequence or ``size=``; ``inplace=True`` reshapes this
        tensordict itself (see ``_assume``).

        Examples:
            >>> td = TensorDict({"a": torch.zeros(6, 2)}, [6])
            >>> td.reshape(2, 3)["a"].shape
            torch.Size([2, 3, 2])
            >>> td.reshape(size=(3, 2), inplace=True) is td, td.batch_size
            (True, torch.Size([3, 2]))
        """
        if size is not None:
            if shape:
                raise TypeError("reshape() takes the shape as arguments or size=, not both.")
            shape = (size,)
        return self._inplace_result(super().reshape(*shape), inplace, "reshape")

    def view(
        self,
        *shape: Any,
        size: Sequence[int] | None = None,
        batch_size: Sequence[int] | None = None,
    ) -> Any:
        """View the batch dims with a new shape (``size=`` too), or every leaf as a ``dtype``;
        ``batch_size`` gives the batch size of a dtype view (leaves change size with it)."""
        if size is not None:
            shape = (*shape, size)
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            if batch_size is None:  # every leaf viewed as the dtype, the batch size kept
                return super().view(*shape)
            dtype = shape[0]
            return self._transform(lambda t: t.view(dtype), as_size(batch_size))
        if batch_size is not None:  # with a shape: refused by the base view
            return super().view(*shape, batch_size=batch_size)
        result = super().view(*shape)
        if result.batch_size == self._batch_size:  # (as upstream: the same tensordict)
            return self
        source = getattr(self, "_view_source", None)
        if source is not None and result.batch_size == source.batch_size:
            return source  # a view viewed back: the tensordict it came from
        if isinstance(result, TensorDict):  # (a lazy view, in legacy mode, knows its source)
            result._view_source = self  # type: ignore[attr-defined]
        return result

    def flatten(
        self, start_dim: int | None = None, end_dim: int | None = None, *, inplace: bool = False
    ) -> Any:
        """Merge the batch dims ``start_dim..end_dim`` into one (``inplace``: in this one)."""
        start = 0 if start_dim is None else start_dim
        result = super().flatten(start, -1 if end_dim is None else end_dim)
        return self._inplace_result(result, inplace, "flatten")

    def unflatten(self, dim: int, unflattened_size: Sequence[int], *, inplace: bool = False) -> Any:
        """Split batch dim ``dim`` into ``unflattened_size`` (``inplace``: in this one)."""
        result = super().unflatten(dim, unflattened_size)
        return self._inplace_result(result, inplace, "unflatten")

    def contiguous(self, *, inplace: bool = False, canonical: bool = False) -> TensorDict:
        """Leaves contiguous in memory (copies where needed; ``inplace``: in this one;
        ``canonical``: row-major strides too, see :meth:`TensorDictBase.contiguous`)."""
        result = super().contiguous(canonical=canonical)
        return self._inplace_result(result, inplace, "contiguous")  # type: ignore[no-any-return]

    def _assume(self, other: TensorDict) -> TensorDict:
        """Hold ``other``'s entries, batch size, names and device (the ``inplace=True`` forms
        of shape ops and ``to``). Nested tensordicts keep their identity; the old leaves are
        released."""
        store = self._tensordict
        for key in [k for k in store if k not in other._tensordict]:
            del store[key]
        for key, value in other._tensordict.items():
            mine = store.get(key)
            if isinstance(mine, TensorDict) and isinstance(value, TensorDict):
                mine._assume(value)
            else:
                store[key] = value
        self._batch_size = other._batch_size
        self._names = other._names
        self._device = other._device
        return self

    # ================================================================== primitives
    def _own_keys(self) -> list[str]:
        return list(self._tensordict)

    def _own_items(self) -> Iterator[tuple[str, Any]]:
        return iter(self._tensordict.items())

    def _get_str(self, key: str, default: Any) -> Any:
        return self._tensordict.get(key, default)

    def _set_str(
        self,
        key: str,
        value: Any,
        *,
        validated: bool,
        inplace: bool = False,
        ignore_lock: bool = False,
        non_blocking: bool = False,
    ) -> None:
        # (inplace / ignore_lock / non_blocking: upstream's signature, which TorchRL calls)
        if inplace:
            existing = self._tensordict.get(key)
            if isinstance(existing, torch.Tensor) and isinstance(value, torch.Tensor):
                existing.copy_(value)
                return
        if not validated:
            value = self._convert(key, value, self._batch_size)
        if self._is_locked:
            inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
            if isinstance(inner, TensorDictBase):
                inner._set_locked(True, self)
        if type(value) is not torch.Tensor and isinstance(value, TensorDict):
            self._share_names(value)
        self._tensordict[key] = value

    def _share_names(self, child: TensorDict) -> None:
        """A nested tensordict and its parent name their shared batch dims alike (as upstream):
        the child takes the parent's names, or an unnamed parent takes the child's."""
        n = len(self._batch_size)
        if self._names is not None:
            names = self._names + child.names[n:]
            if child.names != names:
                child.names = names
        elif child._names is not None and any(x is not None for x in child._names[:n]):
            self.names = child._names[:n]

    def _del_str(self, key: str) -> None:
        del self._tensordict[key]

    def _lock_children(self) -> list[Any]:
        children = []
        for child in self._tensordict.values():
            if getattr(type(child), "_is_tensorclass", False):
                children.append(child._tensordict)
            elif isinstance(child, TensorDictBase):
                children.append(child)
        return children

    def _set_locked(self, value: bool, parent: TensorDictBase | None = None) -> None:
        if value and parent is not None:
            self._add_lock_parent(parent)
        self._is_locked = value
        for child in self._lock_children():
            if value:
                child._set_locked(True, self)
            else:
                child._release_lock(self)

    def _context_ops(self) -> list[tuple[str, bool] | None]:
        if self._context is None:
            self._context = []
        return self._context

    def _set_device(self, device: torch.device | None) -> None:
        self._device = device
        for child in self._tensordict.values():
            if isinstance(child, TensorDictBase):
                child._set_device(device)
            elif getattr(type(child), "_is_tensorclass", False):  # (as upstream: theirs too)
                child._tensordict._set_device(device)

    def _names_or_none(self) -> list[str | None] | None:
        return self._names

    # ================================================================== fast paths
    def __getitem__(self, index: Any) -> Any:
        if type(index) is str:
            value = self._tensordict.get(index, _MISSING)
            if type(value) is torch.Tensor:
                return value
            if value is _MISSING:
                raise self._missing_key(index)
            if isinstance(value, NonTensorData):
                return value.data
            if type(value) is NonTensorStack:
                return value._as_linked_list()
            return value
        if is_key_index(index):
            return self._getitem_key(index)
        return self._index(index)

    def get(self, key: Any, default: Any = _UNSET, **options: Any) -> Any:
        if type(key) is str and not options:
            value = self._tensordict.get(key, _MISSING)
            if value is not _MISSING:
                return value
        return super().get(key, default, **options)

    def set(
        self,
        key: Any,
        item: Any,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        **kwargs: Any,
    ) -> TensorDict:
        if type(key) is str and type(item) is torch.Tensor and not inplace and not self._is_locked:
            bs = self._batch_size
            if (not bs or item.shape[: len(bs)] == bs) and (
                self._device is None or item.device == self._device
            ):
                self._tensordict[key] = item
                return self
        return super().set(key, item, inplace, non_blocking=non_blocking, **kwargs)

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        """The elements along batch dim ``dim``, with that dimension removed (views).

        Plain tensor leaves are cut with :func:`torch.unbind`, as upstream does, so the pieces
        are torch's multi-output views: writing a tensor that requires grad into one of them
        in place is refused by torch, as with upstream (TorchRL's batched envs rely on that
        error), where an indexing view would silently make the whole leaf require grad.

        Examples:
            >>> td = TensorDict({"a": torch.arange(4).reshape(2, 2)}, [2])
            >>> [t["a"].tolist() for t in td.unbind(0)]
            [[0, 1], [2, 3]]
        """
        if self._is_memmap or not _plain_leaves(self):
            return super().unbind(dim)
        d = self._batch_dim(dim, "unbind")
        pieces = _unbind_plain(self, d)
        for piece in pieces:  # (as upstream: views stay shared / memory-mapped, and locked)
            keep_storage_flags(self, piece)
            if self._is_locked:
                piece._set_locked(True)
        return tuple(pieces)

    def _index(self, index: Any) -> TensorDict:
        plan = plan_index(index, self._batch_size)
        return self._index_planned(plan)

    def _index_planned(self, plan: IndexPlan) -> TensorDict:
        leaf_index = plan.leaf_index
        batch_size = plan.batch_size
        source: dict[str, Any] = {}
        select = plan.select
        for key, value in self._tensordict.items():
            if isinstance(value, torch.Tensor):
                if is_unbatched(value):
                    source[key] = rebatch(value, batch_size)
                else:
                    try:
                        source[key] = (
                            value[leaf_index]
                            if select is None
                            else torch.index_select(value, select[0], select[1])
                        )
                    except (RuntimeError, NotImplementedError):
                        if not value.is_nested:  # torch cannot slice dim 0 of a jagged one
                            raise
                        source[key] = index_jagged(value, leaf_index)
            elif isinstance(value, TensorDict):
                source[key] = value._index_planned(_nested_plan(plan, len(self._batch_size), value))
            elif isinstance(value, (NonTensorData, NonTensorStack)):
                source[key] = value._index_planned(batch_size, leaf_index)
            else:
                source[key] = value[leaf_index]
        # a view index keeps the memory-mapped / shared flags and the lock that goes with them
        keeps = plan.is_view and (self._is_memmap or self._shared)
        out = type(self)._new_unsafe(
            source,
            batch_size,
            self._device,
            _index_names(self._names, plan),
            lock=keeps and self._is_locked,
            is_memmap=keeps and self._is_memmap,
        )
        out._shared = keeps and self._shared
        return out

    # ================================================================== state
    @property
    def batch_size(self) -> torch.Size:
        """The leading dimensions every entry shares (settable; validated against the entries)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new_size: Any) -> None:
        new = as_size(new_size)
        if new == self._batch_size:
            return
        if -1 in new:
            _check_ragged(self, new)
        n = len(new)
        for key, value in self._tensordict.items():
            if not _fits_batch_size(value, new):
                raise BatchSizeError(
                    f"the Tensor {key} has shape {value.shape} which is incompatible with the "
                    f"batch-size {new}. Choose a batch size that prefixes every entry's shape."
                )
        for key, value in list(self._tensordict.items()):
            if isinstance(value, NonTensorData) or is_unbatched(value):
                self._tensordict[key] = value._with_batch_size(new)
            elif isinstance(value, TensorDictBase) and len(value.batch_size) < n:
                value.batch_size = new
        if self._names is not None and len(self._names) != n:  # (as upstream: kept per dim)
            kept = [*self._names[:n], *[None] * (n - len(self._names))]
            self._names = kept if any(x is not None for x in kept) else None
        self._batch_size = new

    @property
    def device(self) -> torch.device | None:
        """The device of every tensor, or None when they may live on several devices."""
        return self._device

    @device.setter
    def device(self, value: Any) -> None:
        raise RuntimeError(
            "the device of a tensordict cannot be set. Use td.to(device) to move it, or "
            "td.clear_device_() to forget it."
        )

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions (a list of None when unnamed)."""
        if self._names is None:
            return [None] * len(self._batch_size)
        return list(self._names)

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        if value is None:
            self._names = None
            self._rename_nested([None] * len(self._batch_size))
            return
        value = checked_names(value, self._batch_size)
        self._names = value if any(v is not None for v in value) else None
        self._rename_nested(value)

    def _rename_nested(self, prefix: list[str | None]) -> None:
        # nested tensordicts, lazy stacks and non-tensor entries share the leading batch dims,
        # and so their names (as upstream)
        for child in self._tensordict.values():
            if getattr(type(child), "_is_tensorclass", False):
                child = child._tensordict
            named = isinstance(child, (TensorDictBase, NonTensorData, NonTensorStack))
            if named and len(child.batch_size) >= len(prefix):
                child.names = prefix + child.names[len(prefix) :]

    @property
    def _td_dim_names(self) -> list[str | None]:
        """The names of the batch dimensions (upstream's private accessor)."""
        return self.names

    @property
    def is_locked(self) -> bool:
        """Whether the structure is locked (see :meth:`lock_`)."""
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def is_memmap(self) -> bool:
        return self._is_memmap

    def is_shared(self) -> bool:
        """Whether :meth:`share_memory_` marked this tensordict (or the tensordict it is an index
        or a view of) as shared; see :meth:`TensorDictBase.is_shared`."""
        return self._shared

    @property
    def saved_path(self) -> str | None:
        return self._memmap_prefix if self._is_memmap else None

    # upstream's layout under plain pickle; multiprocessing's reducer: ``tensordict._reductions``
    __reduce_ex__ = forward("tensordict.core.serial.pickling", "reduce_tensordict")

    def _unlocked_check(self, what: str) -> None:
        if self._is_locked:
            raise LockedError(locked_message(what))


# pickles and ``repr(type)`` name the class by upstream's path (which re-exports it)
__test__ = publish_as("tensordict._td", TensorDict)  # methods' examples: doctest skips them


def _fits_batch_size(value: Any, new: torch.Size) -> bool:
    """Whether an entry can live in a tensordict of batch size ``new``.

    A nested tensordict with fewer batch dims fits if its leaves do: it takes the new batch size.
    """
    if isinstance(value, NonTensorData) or is_unbatched(value):
        return True
    n = len(new)
    if isinstance(value, TensorDictBase) and len(value.batch_size) < n:
        bs = value.batch_size
        return tuple(bs) == tuple(new[: len(bs)]) and all(
            _fits_batch_size(v, new) for _, v in value._own_items()
        )
    return tuple(value.shape[:n]) == tuple(new)


def _nested_plan(plan: IndexPlan, parent_dims: int, nested: TensorDict) -> IndexPlan:
    """The plan of a parent's index, applied to a nested tensordict with extra batch dims."""
    extra = nested._batch_size[parent_dims:]
    if not extra:
        return plan
    dim_map = plan.dim_map
    if dim_map is not None:
        dim_map = dim_map + tuple(range(parent_dims, parent_dims + len(extra)))
    return IndexPlan(plan.leaf_index, plan.batch_size + extra, plan.is_view, dim_map, plan.select)


def _check_ragged(td: TensorDict, batch_size: torch.Size) -> None:
    """A batch size with ``-1`` (a ragged dim, as upstream) needs a nested tensor to be ragged."""
    if not any(
        isinstance(v, torch.Tensor) and v.is_nested
        for v in td.values(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
    ):
        raise BatchSizeError(
            f"batch_size={list(batch_size)}: -1 marks a dim where nested tensors are ragged, "
            "but this tensordict holds no nested tensor. Give non-negative sizes."
        )


def _index_names(names: list[str | None] | None, plan: IndexPlan) -> list[str | None] | None:
    if names is None or plan.dim_map is None:
        return None
    out = [names[d] if d is not None else None for d in plan.dim_map]
    return out if any(n is not None for n in out) else None


def _plain_leaves(td: TensorDict) -> bool:
    """Only exact ``torch.Tensor`` leaves (batched, not nested-jagged) in exact tensordicts."""
    for value in td._tensordict.values():
        if type(value) is torch.Tensor:
            if value.is_nested:
                return False
        elif type(value) is not type(td) or not _plain_leaves(value):
            return False
    return True


def _unbind_plain(td: TensorDict, d: int) -> list[TensorDict]:
    n = td._batch_size[d]
    batch_size = torch.Size([*td._batch_size[:d], *td._batch_size[d + 1 :]])
    names = None if td._names is None else [*td._names[:d], *td._names[d + 1 :]]
    sources: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in td._tensordict.items():
        parts = torch.unbind(value, d) if type(value) is torch.Tensor else _unbind_plain(value, d)
        for source, part in zip(sources, parts):
            source[key] = part
    return [type(td)._new_unsafe(source, batch_size, td._device, names) for source in sources]
