"""LazyStackedTensorDict: a stack of tensordicts that keeps its members apart.

Members share a batch size but may differ in keys and leaf shapes (heterogeneous data: episodes of
different lengths, samples with optional entries). Reading a key stacks the members' values;
indexing along the stack dimension selects members without copying; ``to_tensordict()`` makes the
dense copy when the members agree.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from tensordict.core.base import TensorDictBase
from tensordict.core.combine import stack
from tensordict.core.entries import locked_message
from tensordict.core.indexing import plan_index
from tensordict.core.non_tensor import NonTensorData, NonTensorStack, stack_non_tensor
from tensordict.core.setitem import stage_setitem
from tensordict.core.shape import normalize_dim
from tensordict.core.unbatched import is_unbatched, stack_unbatched
from tensordict.errors import BatchSizeError, IndexingError, LockedError, ShapeMismatchError

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


class LazyStackedTensorDict(TensorDictBase):
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
        "_is_locked",
        "_last_op",
        "_saved_path",  # set by memmap_/load_memmap; unset reads as None (see saved_path)
        "stack_dim",
        "tensordicts",
    )

    def __init__(
        self,
        *tensordicts: Any,
        stack_dim: int = 0,
        batch_size: Sequence[int] | None = None,
        device: Any = None,
        **kwargs: Any,
    ) -> None:
        members = list(tensordicts)
        if len(members) == 1 and isinstance(members[0], (list, tuple)):
            members = list(members[0])
        if not members:
            if batch_size is None:
                raise ValueError(
                    "a LazyStackedTensorDict needs at least one member (or an explicit batch_size)."
                )
            raise ValueError(
                "an empty LazyStackedTensorDict is not supported; stack some tensordicts."
            )
        members = [
            m._tensordict if getattr(type(m), "_is_tensorclass", False) else m for m in members
        ]
        ref = members[0].batch_size
        for i, m in enumerate(members[1:], 1):
            if m.batch_size != ref:
                raise ShapeMismatchError(
                    f"cannot lazily stack tensordicts with different batch sizes: member 0 has "
                    f"batch_size={list(ref)}, member {i} has batch_size={list(m.batch_size)}."
                )
        self.stack_dim = normalize_dim(stack_dim, len(ref), ref, "lazy_stack", extra=1)
        self.tensordicts: list[Any] = members
        self._is_locked = False
        self._last_op: tuple[str, bool] | None = None
        self._context: list[tuple[str, bool] | None] | None = None
        if device is not None:
            self.tensordicts = [m.to(device) for m in members]

    @classmethod
    def lazy_stack(cls, input: Sequence[Any], dim: int = 0, **kwargs: Any) -> Any:
        """Stack without copying."""
        return cls(*input, stack_dim=dim)

    @classmethod
    def maybe_dense_stack(cls, input: Sequence[Any], dim: int = 0, **kwargs: Any) -> Any:
        """A dense TensorDict when the members agree in keys and shapes, else a lazy stack."""
        return stack(input, dim)

    # ================================================================== primitives
    @property
    def batch_size(self) -> torch.Size:
        bs = self.tensordicts[0].batch_size
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
        device = self.tensordicts[0].device
        return device if all(m.device == device for m in self.tensordicts[1:]) else None

    @property
    def names(self) -> list[str | None]:
        return [None] * len(self.batch_size)

    def _names_or_none(self) -> None:
        return None

    @property
    def is_locked(self) -> bool:
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def _set_locked(self, value: bool, parent: TensorDictBase | None = None) -> None:
        if value and parent is not None:
            self._add_lock_parent(parent)
        self._is_locked = value
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
        first = self.tensordicts[0]._own_keys()
        others = [set(m._own_keys()) for m in self.tensordicts[1:]]
        return [k for k in first if all(k in o for o in others)]

    def _own_items(self) -> Iterator[tuple[str, Any]]:
        for key in self._own_keys():
            yield key, self._get_str(key, None)

    def _own_key_items(self) -> Iterator[tuple[str, Any]]:
        # keys() must work when members hold a key with different shapes: no stacking here.
        for key in self._own_keys():
            values = [m._get_str(key, None) for m in self.tensordicts]
            if isinstance(values[0], TensorDictBase):
                yield key, LazyStackedTensorDict(*values, stack_dim=self.stack_dim)
            else:
                yield key, values[0]

    def _get_str(self, key: str, default: Any) -> Any:
        values = [m._get_str(key, _MISSING) for m in self.tensordicts]
        if any(v is _MISSING for v in values):
            return default
        v0 = values[0]
        if is_unbatched(v0):
            return stack_unbatched(values, self.batch_size)
        if isinstance(v0, torch.Tensor):
            shapes = {tuple(v.shape) for v in values}
            if len(shapes) > 1:
                raise ShapeMismatchError(
                    f"cannot read {key!r} from a LazyStackedTensorDict: its members hold it with "
                    f"different shapes {sorted(shapes)}. Read it member by member "
                    f"(td.tensordicts[i][{key!r}]) or index the stack first."
                )
            return torch.stack(values, self.stack_dim)
        if isinstance(v0, (NonTensorData, NonTensorStack)):
            return stack_non_tensor(values, self.stack_dim)
        if isinstance(v0, TensorDictBase):
            return LazyStackedTensorDict(*values, stack_dim=self.stack_dim)
        return torch.stack(values, self.stack_dim)

    def _set_str(self, key: str, value: Any, *, validated: bool) -> None:
        if not validated:
            value = self._convert(key, value, self.batch_size)
        if isinstance(value, NonTensorData) or is_unbatched(value):
            parts: Sequence[Any] = [value._with_batch_size(m.batch_size) for m in self.tensordicts]
        elif isinstance(value, LazyStackedTensorDict) and value.stack_dim == self.stack_dim:
            parts = value.tensordicts
        else:
            parts = value.unbind(self.stack_dim)
        for m, part in zip(self.tensordicts, parts):
            m._set_str(key, part, validated=True)

    def _del_str(self, key: str) -> None:
        for m in self.tensordicts:
            if m._get_str(key, None) is not None:
                m._del_str(key)

    def _new_dense(self, source: dict[str, Any], batch_size: torch.Size, names: Any = None) -> Any:
        from tensordict.core.dense import TensorDict

        return TensorDict._new_unsafe(source, batch_size, self.device, names)

    def is_memmap(self) -> bool:
        return all(m.is_memmap() for m in self.tensordicts)

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
    def _split_index(self, index: Any) -> tuple[Any, tuple[Any, ...], int]:
        """(index along the stack dim, index for members, result position of the stack dim)."""
        plan = plan_index(index, self.batch_size)
        items = plan.leaf_index if isinstance(plan.leaf_index, tuple) else (plan.leaf_index,)
        if plan.leaf_index is Ellipsis:
            items = ()
        src = res = 0
        stack_item: Any = slice(None)
        stack_pos = -1
        rest: list[Any] = []
        for item in items:
            if item is None:
                rest.append(None)
                res += 1
                continue
            consumes = (
                item.ndim if isinstance(item, torch.Tensor) and item.dtype == torch.bool else 1
            )
            if src <= self.stack_dim < src + consumes:
                if consumes != 1:
                    raise IndexingError(
                        "a boolean mask spanning the stack dimension of a LazyStackedTensorDict is "
                        "not supported; index with a 1-d mask on that dimension, or call "
                        ".to_tensordict() first."
                    )
                stack_item = item
                stack_pos = res
            else:
                rest.append(item)
            src += consumes
            if not isinstance(item, int):
                res += 1
        if stack_pos == -1:
            stack_pos = res + (self.stack_dim - src)
            # items not given for trailing dims: the stack dim keeps its place after them
        return stack_item, tuple(rest), stack_pos

    def _index(self, index: Any) -> Any:
        stack_item, rest, stack_pos = self._split_index(index)
        if isinstance(stack_item, int):
            member = self.tensordicts[stack_item]
            return member[rest] if rest else member
        if isinstance(stack_item, slice):
            members = self.tensordicts[stack_item]
        else:
            ids = stack_item
            if ids.dtype == torch.bool:
                ids = ids.nonzero().squeeze(-1)
            if ids.ndim != 1:
                raise IndexingError(
                    "indexing the stack dimension of a LazyStackedTensorDict needs a 1-d index, "
                    f"got shape {list(ids.shape)}."
                )
            members = [self.tensordicts[int(i)] for i in ids]
        if not members:
            return _empty_result(self, index)
        new_members = [m[rest] if rest else m for m in members]
        n_adv = sum(1 for r in rest if isinstance(r, torch.Tensor))
        if n_adv:
            return stack(new_members, 0)
        pos = min(stack_pos, len(new_members[0].batch_size))
        out = LazyStackedTensorDict(*new_members, stack_dim=pos)
        if self._is_locked:
            if rest:
                out._set_locked(True)  # new member views: this stack is their only holder
            else:
                # the members are ours, already locked under us: a slice (often a temporary)
                # must not become one more holder that keeps them locked after unlock_()
                out._is_locked = True
        return out

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
        stack_item, rest, stack_pos = self._split_index(index)
        if isinstance(stack_item, int):
            targets = [self.tensordicts[stack_item]]
            values = [value]
        else:
            if isinstance(stack_item, slice):
                targets = self.tensordicts[stack_item]
            else:
                ids = (
                    stack_item.nonzero().squeeze(-1)
                    if stack_item.dtype == torch.bool
                    else stack_item
                )
                targets = [self.tensordicts[int(i)] for i in ids]
            result_dims = len(plan_index(index, self.batch_size).batch_size)
            is_td = isinstance(value, TensorDictBase) or getattr(
                type(value), "_is_tensorclass", False
            )
            if is_td and value.batch_dims >= result_dims:
                values = list(value.unbind(stack_pos + value.batch_dims - result_dims))
            else:  # a dict, a scalar, or a tensordict that broadcasts over the stack dim
                values = [value] * len(targets)
            if len(values) != len(targets):
                raise ShapeMismatchError(
                    f"cannot write a value of batch_size={list(value.batch_size)} into "
                    f"{len(targets)} members of a lazy stack (the indexed stack dim has size "
                    f"{len(targets)}, the value {len(values)})."
                )
        writes = []
        for target, v in zip(targets, values):
            writes.extend(stage_setitem(target, rest if rest else (...,), v))
        return writes

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        d = normalize_dim(dim, len(self.batch_size), self.batch_size, "unbind")
        if d == self.stack_dim:
            return tuple(self.tensordicts)
        return super().unbind(dim)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.unbind(0))

    # ================================================================== conversion and walks
    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        """A dense TensorDict copy.

        Raises:
            ShapeMismatchError: the members differ in keys or leaf shapes.
        """
        result = stack(self.tensordicts, self.stack_dim)
        if isinstance(result, LazyStackedTensorDict):
            keys = [
                sorted(m.keys(include_nested=True, leaves_only=True), key=str)
                for m in self.tensordicts
            ]
            shapes = [
                {
                    str(k): list(v.shape)
                    for k, v in m.items(True, True)
                    if isinstance(v, torch.Tensor)
                }
                for m in self.tensordicts
            ]
            raise ShapeMismatchError(
                "cannot make a dense TensorDict from a lazy stack whose members differ in keys or "
                f"leaf shapes (keys: {keys}; shapes: {shapes}). Select the shared keys with "
                "td.select(*td.keys()) or pad the entries first."
            )
        return result

    def contiguous(self) -> Any:
        return self.to_tensordict()

    def clone(self, recurse: bool = True, **kwargs: Any) -> Any:
        return LazyStackedTensorDict(
            *[m.clone(recurse) for m in self.tensordicts], stack_dim=self.stack_dim
        )

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
        return LazyStackedTensorDict(*results, stack_dim=self.stack_dim)

    def _transform(self, leaf_fn: Any, batch_size: Any = None, names: Any = None) -> Any:
        return self.to_tensordict()._transform(leaf_fn, batch_size, names)

    def empty(self, recurse: bool = False, **kwargs: Any) -> Any:
        if kwargs:
            return super().empty(recurse, **kwargs)
        return LazyStackedTensorDict(
            *[m.empty(recurse) for m in self.tensordicts], stack_dim=self.stack_dim
        )

    def _copy_structure(self, excluded: set[tuple[str, ...]], prefix: tuple[str, ...]) -> Any:
        members = [m._copy_structure(excluded, prefix) for m in self.tensordicts]
        return LazyStackedTensorDict(*members, stack_dim=self.stack_dim)

    def select(self, *keys: Any, inplace: bool = False, strict: bool = True) -> Any:
        if inplace:
            return super().select(*keys, inplace=True, strict=strict)
        members = [m.select(*keys, strict=strict) for m in self.tensordicts]
        return self._lock_like_storage(LazyStackedTensorDict(*members, stack_dim=self.stack_dim))

    def filter_non_tensor_data(self) -> Any:
        members = [m.filter_non_tensor_data() for m in self.tensordicts]
        return LazyStackedTensorDict(*members, stack_dim=self.stack_dim)

    def _tensor_leaves(self) -> list[torch.Tensor]:
        return [t for m in self.tensordicts for t in m._tensor_leaves()]

    def set(self, key: Any, item: Any, inplace: bool = False, **kwargs: Any) -> Any:
        if self._is_locked and not inplace:
            raise LockedError(locked_message(f"set {key!r}"))
        return super().set(key, item, inplace, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_lazy, (self.tensordicts, self.stack_dim, self._is_locked))


def _rebuild_lazy(members: list[Any], stack_dim: int, locked: bool) -> LazyStackedTensorDict:
    out = LazyStackedTensorDict(*members, stack_dim=stack_dim)
    if locked:
        out._set_locked(True)
    return out


def _empty_result(td: LazyStackedTensorDict, index: Any) -> Any:
    shape = torch.empty(td.batch_size, device="meta")[
        plan_index(index, td.batch_size).leaf_index
    ].shape
    return td._new_dense({}, shape)
