"""LazyStackedTensorDict: a stack of tensordicts that keeps its members apart.

Members share a batch size but may differ in keys and leaf shapes (heterogeneous data: episodes of
different lengths, samples with optional entries). Reading a key stacks the members' values;
indexing along the stack dimension selects members without copying; ``to_tensordict()`` makes the
dense copy when the members agree.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.combine import stack_or_lazy
from tensordict.core.behaviour.entries import inplace_value, locked_message
from tensordict.core.behaviour.ops import _KEEP
from tensordict.core.behaviour.ragged import LazyRaggedMixin, pad_and_stack
from tensordict.core.behaviour.setitem import stage_setitem
from tensordict.core.behaviour.shape import normalize_dim
from tensordict.core.collection import publish_as
from tensordict.core.dense import TensorDict
from tensordict.core.factory import forward
from tensordict.core.lazy.index import (
    LeafProbe,
    Member,
    Stack,
    decompose,
    decompose_ragged,
    evaluate,
    first_member,
    stage_writes,
)
from tensordict.core.lazy.keys import LazyStackKeysMixin
from tensordict.core.lazy.members import (
    STACKING,
    LazyMembersMixin,
    as_member,
    check_member_batch_size,
    joint_batch_size,
)
from tensordict.core.lazy.names import LazyStackNamesMixin
from tensordict.core.lazy.shape import LazyShapeMixin, maybe_dense_stack
from tensordict.core.nontensor.combine import stack_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.options import list_to_stack
from tensordict.core.unbatched import is_unbatched, stack_unbatched
from tensordict.errors import (
    BatchSizeError,
    InplaceNotSupportedError,
    LockedError,
    ShapeMismatchError,
    TensorDictKeyError,
)

__all__ = ["LazyStackedTensorDict"]

_MISSING: Any = object()


class _ShapeOnly:
    """What the repr shows for a key of a lazy stack: the stacked shape, -1 where members differ."""

    def __init__(self, cls: str, shape: list[int], device: Any, dtype: Any) -> None:
        self.cls, self.shape, self.device, self.dtype = cls, shape, device, dtype

    def __repr__(self) -> str:
        return (
            f"{self.cls}(shape=torch.Size({self.shape}), "
            f"device={self.device}, dtype={self.dtype}, is_shared=False)"
        )


class LazyStackedTensorDict(
    LazyMembersMixin,
    LazyStackKeysMixin,
    LazyStackNamesMixin,
    LazyShapeMixin,
    LazyRaggedMixin,
    TensorDictBase,
):
    """A lazy stack of tensordicts along ``stack_dim``.

    Args:
        *tensordicts: the members; they must share a batch size.
        stack_dim: where the new batch dimension goes.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, LazyStackedTensorDict
        >>> a = TensorDict({"x": torch.zeros(3), "y": torch.zeros(2)}, [])
        >>> b = TensorDict({"x": torch.ones(3), "z": torch.ones(1)}, [])
        >>> td = LazyStackedTensorDict.lazy_stack([a, b])
        >>> td.batch_size, list(td.keys())
        (torch.Size([2]), ['x'])
        >>> td["x"].shape
        torch.Size([2, 3])
        >>> td[1]["z"]
        tensor([1.])
    """

    __slots__ = (
        "__weakref__",
        "_context",
        "_empty_device",  # the device of a stack with no member
        "_is_locked",
        "_last_op",
        "_member_batch_size",  # the members' batch size when there is no member
        "_saved_path",  # set by memmap_/load_memmap; unset reads as None (see saved_path)
        "_stack_name",  # the stack dimension's name; unset reads as None
        "stack_dim",
        "tensordicts",
    )

    def __init__(
        self,
        *tensordicts: Any,
        stack_dim: int = 0,
        batch_size: Sequence[int] | None = None,
        device: Any = None,
        strict_shape: bool = False,
        **kwargs: Any,
    ) -> None:
        members = list(tensordicts)
        if len(members) == 1 and isinstance(members[0], (list, tuple)):
            members = list(members[0])
        members = [as_member(m, i) for i, m in enumerate(members)]
        ref = members[0].batch_size if members else torch.Size(batch_size or ())
        if strict_shape:
            for i, m in enumerate(members[1:], 1):
                check_member_batch_size(ref, m, i, STACKING)
        else:  # members of different sizes: -1 where they differ (as upstream)
            ref = joint_batch_size([m.batch_size for m in members], ref)
        self.stack_dim = normalize_dim(stack_dim, len(ref), ref, "lazy_stack", extra=1)
        self.tensordicts: list[Any] = members
        self._member_batch_size = ref
        self._empty_device = torch.device(device) if device is not None else None
        # True once lock_() was called on the stack (or a locked parent holds it); None
        # otherwise: the stack then reads as locked when every member is (as upstream)
        self._is_locked: bool | None = None
        self._lock_parents = None
        self._last_op: tuple[str, bool] | None = None
        self._context: list[tuple[str, bool] | None] | None = None
        if device is not None:
            self.tensordicts = [m.to(device) for m in members]

    @classmethod
    def lazy_stack(  # type: ignore[override]  # (upstream: "items", explicit options)
        cls,
        items: Sequence[Any],
        dim: int = 0,
        *,
        device: Any = None,
        out: Any = None,
        stack_dim_name: str | None = None,
        strict_shape: bool = False,
        as_list: bool = False,
        as_padded_tensor: bool = False,
        as_nested_tensor: bool = False,
        padding_side: str = "right",
        layout: torch.layout | None = None,
        padding_value: float | int | bool = 0.0,
    ) -> Any:
        """Stack without copying (with ``out=``: write the members into ``out``).

        Tensors (rather than tensordicts) are stacked with ``torch.stack``, or returned as a list
        (``as_list``), padded to the largest shape (``as_padded_tensor``, with
        ``padding_value`` and ``padding_side``) or made a nested tensor (``as_nested_tensor``,
        of ``layout``, jagged by default); those three exclude each other. ``device`` is
        accepted as upstream accepts it (the members stay where they are).

        Raises:
            TypeError: more than one of ``as_list``, ``as_padded_tensor``, ``as_nested_tensor``.

        Examples:
            >>> import torch
            >>> LazyStackedTensorDict.lazy_stack([torch.ones(1), torch.ones(2)], as_list=True)
            [tensor([1.]), tensor([1., 1.])]
            >>> from tensordict import TensorDict
            >>> td = TensorDict(x=torch.zeros(3), batch_size=[3])
            >>> LazyStackedTensorDict.lazy_stack([td, td], stack_dim_name="env").names
            ['env', None]
        """
        members = list(items)
        if as_list + as_padded_tensor + as_nested_tensor > 1:
            raise TypeError(
                "as_list, as_padded_tensor and as_nested_tensor are exclusive. Pass one of them."
            )
        if members and all(isinstance(m, torch.Tensor) for m in members):
            if as_list:
                return members
            if as_padded_tensor:  # (as upstream: along a new first dim, whatever ``dim``)
                return pad_and_stack(members, 0, padding_value, padding_side)
            if as_nested_tensor:
                return torch.nested.nested_tensor(members, layout=layout or torch.jagged)
            return torch.stack(members, dim, out=out)
        if out is not None:
            return stack_or_lazy(members, dim, out=out)
        if members and getattr(type(members[0]), "_is_tensorclass", False):
            return type(members[0]).lazy_stack(members, dim)  # the tensorclass around the stack
        if members and all(isinstance(m, (NonTensorData, NonTensorStack)) for m in members):
            return NonTensorStack(*members, stack_dim=dim)  # (as upstream)
        result = cls(*members, stack_dim=dim, strict_shape=strict_shape)
        if stack_dim_name is not None:
            result._stack_name = stack_dim_name
        return result

    @classmethod
    def maybe_dense_stack(  # type: ignore[override]  # (upstream: "items", out positional)
        cls, items: Sequence[Any], dim: int = 0, out: Any = None, strict: bool = False
    ) -> Any:
        """Dense where the members agree, lazy where they differ (see
        :func:`tensordict.maybe_dense_stack`); with ``out=``, written into ``out`` (its keys
        only). ``strict`` is accepted as upstream accepts it (members that differ still stack
        lazily)."""
        if out is not None:
            return stack_or_lazy(list(items), dim, out=out)
        return maybe_dense_stack(items, dim)

    # ================================================================== deprecated upstream API
    @property
    def valid_keys(self) -> Any:
        """Deprecated, as upstream. The keys every member holds, ``keys()``."""
        _deprecated("LazyStackedTensorDict.valid_keys is deprecated: use keys() instead.")
        return self.keys()

    @property
    def hook_in(self) -> None:
        """Deprecated, as upstream. Always None (a function once applied to values written)."""
        _deprecated("LazyStackedTensorDict.hook_in is deprecated.")
        return None

    @property
    def hook_out(self) -> None:
        """Deprecated, as upstream. Always None (a function once applied to values read)."""
        _deprecated("LazyStackedTensorDict.hook_out is deprecated.")
        return None

    # ================================================================== primitives
    @property
    def batch_size(self) -> torch.Size:
        bs = self._member_batch_size
        d = self.stack_dim
        return torch.Size([*bs[:d], len(self.tensordicts), *bs[d:]])

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        if torch.Size(value) != self.batch_size:
            raise BatchSizeError(
                f"the batch size of a LazyStackedTensorDict follows its members "
                f"({list(self.batch_size)}); set the members' batch sizes, or call "
                ".to_tensordict() first."
            )

    @property
    def device(self) -> torch.device | None:
        if not self.tensordicts:
            return self._empty_device
        device = self.tensordicts[0].device
        return device if all(m.device == device for m in self.tensordicts[1:]) else None

    @property
    def is_locked(self) -> bool:
        """Whether the structure is locked (the stack was locked, or all its members are)."""
        if self._is_locked:
            return True
        return bool(self.tensordicts) and all(m.is_locked for m in self.tensordicts)

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def _lock_members(self) -> list[Any]:
        return list(self.tensordicts)

    def _set_locked(self, value: bool, parent: TensorDictBase | None = None) -> None:
        if value and parent is not None:
            self._add_lock_parent(parent)
        self._is_locked = True if value else None
        for m in self.tensordicts:
            if value:
                m._set_locked(True, self)
            else:
                m._release_lock(self)

    def _context_ops(self) -> list[tuple[str, bool] | None]:
        if self._context is None:
            self._context = []
        return self._context

    def _set_device(self, device: torch.device | None) -> None:
        for m in self.tensordicts:
            m._set_device(device)

    def _own_keys(self) -> list[str]:
        if not self.tensordicts:
            return []
        first = self.tensordicts[0]._own_keys()
        others = [set(m._own_keys()) for m in self.tensordicts[1:]]
        return [k for k in first if all(k in o for o in others)]

    def _own_items(self) -> Iterator[tuple[str, Any]]:
        for key in self._own_keys():
            yield key, self._get_str(key, None)

    def _own_key_items(self) -> Iterator[tuple[str, Any]]:
        # keys() must work when members hold a key with different shapes: no stacking here.
        for key in self._own_keys():
            yield key, self._stand_in(key)

    def _stand_in(self, key: str) -> Any:
        """What ``keys()`` needs of the entry ``key``: its kind, without stacking leaves (a
        member's leaf; for nested tensordicts, the lazy stack of the members' ones)."""
        values = [
            m._stand_in(key) if isinstance(m, LazyStackedTensorDict) else m._get_str(key, None)
            for m in self.tensordicts
        ]
        if isinstance(values[0], TensorDictBase):
            return self._nested_stack(values)
        return values[0]

    def _get_str(self, key: str, default: Any) -> Any:
        values = [m._get_str(key, _MISSING) for m in self.tensordicts]
        if not values or any(v is _MISSING for v in values):
            return default
        v0 = values[0]
        if is_unbatched(v0):
            return stack_unbatched(values, self.batch_size)
        if isinstance(v0, torch.Tensor):
            shapes = {tuple(v.shape) for v in values}
            if len(shapes) > 1:
                shown = [list(sh) for sh in sorted(shapes)]
                raise ShapeMismatchError(
                    f"Failed to stack tensors within a tensordict under the key {key!r}: the "
                    f"members hold it with different shapes {shown}. Read it with "
                    "get(key, as_list=True), as_padded_tensor=True or as_nested_tensor=True, "
                    "member by member (td.tensordicts[i]), or index the stack first."
                )
            return torch.stack(values, self.stack_dim)
        if isinstance(v0, (NonTensorData, NonTensorStack)):
            return stack_non_tensor(values, self.stack_dim)
        if isinstance(v0, TensorDictBase):
            return self._nested_stack(values)
        if getattr(type(v0), "_is_tensorclass", False):  # kept lazy, as the members are
            return type(v0).lazy_stack(values, self.stack_dim)
        return torch.stack(values, self.stack_dim)

    def entry_class(self, key: Any) -> type:
        """The class of the entry at ``key``. A tensor's class is the first member's, read
        without stacking (the members may hold it with different shapes, which ``get``
        refuses), as upstream; a nested collection's is what ``get`` builds."""
        if self.tensordicts:
            first = self.tensordicts[0].entry_class(key)
            if isinstance(first, type) and issubclass(first, torch.Tensor):
                return first
        return super().entry_class(key)

    def _restack(self, members: Sequence[Any]) -> LazyStackedTensorDict:
        """A stack of ``members`` along this stack's dim, which keeps its name (as upstream)."""
        out = LazyStackedTensorDict(*members, stack_dim=self.stack_dim)
        out._stack_name = getattr(self, "_stack_name", None)
        return out

    def _nested_stack(self, values: list[Any]) -> LazyStackedTensorDict:
        """The lazy stack of the members' nested tensordicts, locked (and held) like this one."""
        out = LazyStackedTensorDict(*values, stack_dim=self.stack_dim)
        out._stack_name = getattr(self, "_stack_name", None)  # nested ones share the dim
        if self._is_locked:
            # its members are locked already, by the members of this stack (so it reads as
            # locked): it only records this stack as its holder, and does not lock the members
            # itself (they would outlive this stack's lock through it)
            out._add_lock_parent(self)
        return out

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
        if not validated:
            value = self._convert(key, value, self.batch_size)
        if isinstance(value, NonTensorData) or is_unbatched(value):
            parts: Sequence[Any] = [value._with_batch_size(m.batch_size) for m in self.tensordicts]
        elif isinstance(value, LazyStackedTensorDict) and value.stack_dim == self.stack_dim:
            parts = value.tensordicts
        else:
            parts = value.unbind(self.stack_dim)
        for m, part in zip(self.tensordicts, parts):
            m._set_str(key, part, validated=True, inplace=inplace)

    def _del_str(self, key: str) -> None:
        for m in self.tensordicts:
            if m._get_str(key, None) is not None:
                m._del_str(key)

    def _new_dense(self, source: dict[str, Any], batch_size: torch.Size, names: Any = None) -> Any:
        return TensorDict._new_unsafe(source, batch_size, self.device, names)

    def _assume(self, other: Any) -> Any:
        """Take ``other``'s entries member by member (the ``inplace=True`` form of ``to``):
        ``other`` is this stack transformed member-wise (same members, same stack dim)."""
        theirs: list[Any] = getattr(other, "tensordicts", None) or []
        same = len(theirs) == len(self.tensordicts) and hasattr(other, "stack_dim")
        if not same or other.stack_dim != self.stack_dim or other.batch_size != self.batch_size:
            raise InplaceNotSupportedError(
                "it changes how the lazy stack is built (its members or batch size). Use the "
                "out-of-place form and keep the result."
            )
        for member, new in zip(self.tensordicts, theirs):
            member._inplace_result(new, True, "to")
        return self

    def is_memmap(self) -> bool:
        return all(m.is_memmap() for m in self.tensordicts)

    def is_shared(self) -> bool:
        return bool(self.tensordicts) and all(m.is_shared() for m in self.tensordicts)

    @property
    def saved_path(self) -> str | None:
        return getattr(self, "_saved_path", None)

    def _repr_value(self, key: str) -> Any:
        values = [m._get_str(key, None) for m in self.tensordicts]
        v0 = values[0]
        if isinstance(v0, torch.Tensor):
            shapes = [list(v.shape) for v in values]
            merged = (
                [s if all(sh[i] == s for sh in shapes) else -1 for i, s in enumerate(shapes[0])]
                if all(len(sh) == len(shapes[0]) for sh in shapes)
                else [-1] * len(shapes[0])
            )
            merged.insert(self.stack_dim, len(values))
            return _ShapeOnly(type(v0).__name__, merged, v0.device, v0.dtype)
        return self._get_str(key, None)

    # ================================================================== indexing
    def _index(self, index: Any) -> Any:
        if self.is_ragged:
            node = decompose_ragged(index, self.batch_size, self.stack_dim)
        else:
            node = decompose(index, self.batch_size, self.stack_dim)
        if node is None:
            return _empty_result(self, index)
        out = evaluate(node, self.tensordicts, self._stack_results)
        if getattr(self, "_stack_name", None) is not None:
            self._carry_stack_name(index, out)
        if self._is_locked and out is not self:
            if isinstance(node, Stack) and all(
                isinstance(c, Member) and not c.sub for c in node.children
            ):
                # the members are ours, already locked under us: a slice (often a temporary)
                # must not become one more holder that keeps them locked after unlock_()
                out._is_locked = True
            elif isinstance(out, LazyStackedTensorDict):
                out._set_locked(True)  # new member views: this stack is their only holder
        return out

    @staticmethod
    def _stack_results(results: list[Any], dim: int) -> LazyStackedTensorDict:
        return LazyStackedTensorDict(*results, stack_dim=dim)

    def _stage_setitem_index(self, index: Any, value: Any) -> list[Any]:
        """The validated writes of ``self[index] = value`` (see ``setitem.stage_setitem``)."""
        if (
            isinstance(index, torch.Tensor)
            and index.dtype == torch.bool
            and index.ndim > self.stack_dim + 1
            and (isinstance(value, (int, float, bool)) or getattr(value, "ndim", None) == 0)
        ):
            # a mask over the stack dim and the members' dims, filled with one value: each
            # member takes its slice of the mask
            writes: list[Any] = []
            for member, sub in zip(self.tensordicts, index.unbind(self.stack_dim)):
                writes.extend(stage_setitem(member, sub, value))
            return writes
        if self.is_ragged:  # one member at a time: its own batch size checks the value
            node = decompose_ragged(index, self.batch_size, self.stack_dim)
            if node is None:
                return []
            if isinstance(node, Stack):
                raise ShapeMismatchError(
                    "cannot write across the members of a lazy stack of different batch sizes "
                    f"(batch_size={list(self.batch_size)}): index one member (an int along the "
                    f"stack dim {self.stack_dim}) and write into it."
                )
            return stage_setitem(self.tensordicts[node.i], node.sub or (...,), value)
        node = decompose(index, self.batch_size, self.stack_dim)
        if node is None:
            return []
        members = self.tensordicts

        def stage_member(i: int, member_index: tuple[Any, ...], v: Any) -> list[Any]:
            return stage_setitem(members[i], member_index or (...,), v)

        probe = LeafProbe(members[first_member(node).i])
        return stage_writes(node, value, members[0].batch_size, stage_member, probe)

    def _write_leaf_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        """Write ``item`` into every member's entry ``path[-1]`` (``existing`` is a copy)."""
        if not isinstance(existing, torch.Tensor):
            super()._write_leaf_inplace(path, existing, item)
            return
        item = inplace_value(path, existing, item)
        parts = item.expand(existing.shape).unbind(self.stack_dim)
        key = path[-1]
        for member, part in zip(self.tensordicts, parts):
            member._write_leaf_inplace(path, member._get_str(key, None), part)

    def _write_leaf_at(self, path: tuple[str, ...], existing: Any, value: Any, index: Any) -> None:
        """``stacked[index] = value`` for the entry ``path[-1]``, written into the members."""
        if not isinstance(existing, torch.Tensor):
            super()._write_leaf_at(path, existing, value, index)
            return
        key = path[-1]
        leaves = [m._get_str(key, None) for m in self.tensordicts]
        node = decompose(index, existing.shape, self.stack_dim)
        if node is None:
            return

        def stage_member(i: int, leaf_index: tuple[Any, ...], v: Any) -> list[Any]:
            return [_leaf_writer(self.tensordicts[i], path, leaves[i], leaf_index, v)]

        for write in stage_writes(node, value, leaves[0].shape, stage_member, None):
            write()

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        d = normalize_dim(dim, len(self.batch_size), self.batch_size, "unbind")
        if d == self.stack_dim:
            return tuple(self.tensordicts)
        return super().unbind(dim)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.unbind(0))

    # ================================================================== conversion and walks
    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        """A dense TensorDict copy of the keys every member holds (nested stacks made dense).

        Raises:
            ShapeMismatchError: the members hold a shared key with different shapes.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, LazyStackedTensorDict
            >>> a = TensorDict({"x": torch.zeros(3), "y": torch.zeros(1)})
            >>> b = TensorDict({"x": torch.ones(3)})
            >>> dense = LazyStackedTensorDict(a, b).to_tensordict()
            >>> type(dense).__name__, list(dense.keys()), dense["x"].shape
            ('TensorDict', ['x'], torch.Size([2, 3]))
        """
        source: dict[str, Any] = {}
        for key, value in self._own_items():  # tensors: stacked copies; nested: lazy stacks
            if isinstance(value, TensorDictBase):
                value = value.to_tensordict(retain_none=retain_none)
            source[key] = value
        return self._new_dense(source, self.batch_size, self._names_or_none())

    def contiguous(self, *, inplace: bool = False, canonical: bool = False) -> Any:
        """A dense copy (see :meth:`to_tensordict`; ``canonical`` is accepted for upstream code)."""
        if inplace:
            raise InplaceNotSupportedError(
                "contiguous(inplace=True) is not supported on a LazyStackedTensorDict: it keeps "
                "its members apart. Use td.contiguous() (a dense copy)."
            )
        return self.to_tensordict()

    def clone(self, recurse: bool = True, **kwargs: Any) -> Any:
        return self._restack([m.clone(recurse) for m in self.tensordicts])

    def _apply_leaves(self, fn: Any, *others: Any, **kwargs: Any) -> Any:
        batch_size = kwargs.get("batch_size")
        if batch_size is not None:
            return self.to_tensordict()._apply_leaves(fn, *others, **kwargs)
        split_others = [
            o.unbind(self.stack_dim)
            if isinstance(o, TensorDictBase)
            else [o] * len(self.tensordicts)
            for o in others
        ]
        results = [
            m._apply_leaves(fn, *[so[i] for so in split_others], **kwargs)
            for i, m in enumerate(self.tensordicts)
        ]
        if kwargs.get("inplace"):
            return self
        if kwargs.get("batch_size") is None and kwargs.get("names", _KEEP) is _KEEP:
            return self._restack(results)  # (same batch dims: the stack dim keeps its name)
        return LazyStackedTensorDict(*results, stack_dim=self.stack_dim)

    def empty(self, recurse: bool = False, **kwargs: Any) -> Any:
        """An empty stack of the members' empty tensordicts (as upstream), unless
        ``batch_size`` changes the dims up to the stack dim: then a :class:`TensorDict`.

        ``batch_size``, ``device`` and ``names`` go to the members without the stack dim
        (``names[stack_dim]`` names the stack dim).
        """
        bs = kwargs.get("batch_size")
        end = self.stack_dim + 1
        if bs is not None and torch.Size(bs)[:end] != self.batch_size[:end]:
            return super().empty(recurse, **kwargs)
        member_kw = dict(kwargs)
        if bs is not None:
            member_kw["batch_size"] = [b for i, b in enumerate(bs) if i != self.stack_dim]
        names = kwargs.get("names")
        if names is not None:
            member_kw["names"] = [n for i, n in enumerate(names) if i != self.stack_dim]
        out = self._restack([m.empty(recurse, **member_kw) for m in self.tensordicts])
        if names is not None:
            out._stack_name = names[self.stack_dim] if len(names) > self.stack_dim else None
        return out

    def _copy_structure(self, excluded: set[tuple[str, ...]], prefix: tuple[str, ...]) -> Any:
        members = [m._copy_structure(excluded, prefix) for m in self.tensordicts]
        return self._restack(members)

    def select(
        self, *keys: Any, inplace: bool = False, strict: bool = True, as_tensordict: bool = False
    ) -> Any:
        members = [m.select(*keys, strict=strict) for m in self.tensordicts]  # (raises first)
        if inplace:  # each member keeps the selected entries, nested ones included
            for member in self.tensordicts:
                member.select(*keys, inplace=True, strict=strict)
            return self
        return self._restack(members)

    def filter_non_tensor_data(self) -> Any:
        members = [m.filter_non_tensor_data() for m in self.tensordicts]
        return self._restack(members)

    def _reduce_features(
        self, name: str, fn: Any, dim: str, keepdim: bool, reduce: bool, **kw: Any
    ) -> Any:
        """``dim="feature"`` member by member (members may hold entries of other shapes)."""
        if dim != "feature" or keepdim or name in ("max", "min") or not self.tensordicts:
            return super()._reduce_features(name, fn, dim, keepdim, reduce, **kw)
        parts = [m._reduce_features(name, fn, dim, keepdim, reduce, **kw) for m in self.tensordicts]
        if reduce:
            return torch.stack(parts, self.stack_dim)
        return self._restack(parts)

    def _feature_walk(self, leaf: Any) -> Any:
        return LazyStackedTensorDict(
            *[m._feature_walk(leaf) for m in self.tensordicts], stack_dim=self.stack_dim
        )

    def _tensor_leaves(self) -> list[torch.Tensor]:
        return [t for m in self.tensordicts for t in m._tensor_leaves()]

    def zero_(self) -> Any:
        """Fill every tensor of every member with zeros, in place."""
        for member in self.tensordicts:
            member.zero_()
        return self

    def set_(self, key: Any, item: Any) -> Any:
        """Overwrite an entry every member holds, in place (in each member).

        Raises:
            TensorDictKeyError: a member lacks ``key``.
        """
        if key not in self.keys(include_nested=True):
            raise TensorDictKeyError(
                f"key {key!r} not found: setting a value in-place on a stack of TensorDict is "
                "only possible for keys every member holds. Use set() (not in place) to add it "
                "to every member."
            )
        return super().set_(key, item)

    def set(self, key: Any, item: Any, inplace: bool = False, **kwargs: Any) -> Any:
        if self._is_locked and not inplace:
            raise LockedError(locked_message(f"set {key!r}"))
        if isinstance(item, list) and list_to_stack() and len(item) == self.batch_size[0]:
            # a (nested) list along the batch dims: each member takes its slice of it
            for k, member in enumerate(self.tensordicts):
                member.set(key, _list_part(item, self.stack_dim, k), inplace, **kwargs)
            return self
        return super().set(key, item, inplace, **kwargs)

    def __contains__(self, item: object) -> bool:
        """A member (by identity) or a key of every member."""
        if isinstance(item, TensorDictBase):
            return any(item is m for m in self.tensordicts)
        return item in self.keys(include_nested=isinstance(item, tuple))

    def to_lazystack(self, dim: int = 0) -> Any:
        """This stack if it stacks along ``dim``, else a lazy stack of its slices along ``dim``."""
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "to_lazystack")
        if d == self.stack_dim:
            return self
        return LazyStackedTensorDict(*self.unbind(d), stack_dim=d)

    # upstream's layout; a consolidated stack as its storage and metadata
    __reduce_ex__ = forward("tensordict.core.serial.pickling", "reduce_lazy_stack")


# pickles and ``repr(type)`` name the class by upstream's path (which re-exports it)
__test__ = publish_as(
    "tensordict._lazy", LazyStackedTensorDict
)  # methods' examples: doctest skips them


def _list_part(values: list[Any], stack_dim: int, k: int) -> Any:
    """Member ``k``'s part of a nested list laid out along the batch dims (the stack dim taken
    out); a part that is a list of numbers or tensors becomes a tensor, as upstream stacks it."""
    part = _take(values, stack_dim, k)
    if isinstance(part, list) and part and not isinstance(_first_leaf(part), str):
        try:
            return torch.stack([torch.as_tensor(p) for p in part])
        except (RuntimeError, TypeError, ValueError):
            return part
    return part


def _take(values: Any, depth: int, k: int) -> Any:
    if depth == 0:
        return values[k]
    return [_take(v, depth - 1, k) for v in values]


def _first_leaf(values: Any) -> Any:
    while isinstance(values, list) and values:
        values = values[0]
    return values


def _deprecated(message: str) -> None:
    warnings.warn(message, DeprecationWarning, stacklevel=3)


def _rebuild_lazy(members: list[Any], stack_dim: int, locked: bool) -> LazyStackedTensorDict:
    out = LazyStackedTensorDict(*members, stack_dim=stack_dim)
    if locked:
        out._set_locked(True)
    return out


def _leaf_writer(
    member: Any, path: tuple[str, ...], leaf: torch.Tensor, index: tuple[Any, ...], value: Any
) -> Any:
    # (a member that is itself a lazy stack writes into its own members)
    return lambda: member._write_leaf_at(path, leaf, value, index or (...,))


def _empty_result(td: LazyStackedTensorDict, index: Any) -> Any:
    """An index that selects no member: a dense tensordict of the result's shape with the
    shared keys (member 0's leaf shapes), as upstream."""
    keys = list(td.keys())
    first = td.tensordicts[0].select(*keys)
    proto = first.unsqueeze(td.stack_dim).expand(td.batch_size)
    return proto[index]
