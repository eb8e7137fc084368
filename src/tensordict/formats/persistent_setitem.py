"""``ptd[index] = value`` on a PersistentTensorDict: validate every write, then perform them.

Each array is written through the index's :class:`~tensordict.formats.rows.Selection`, so only
the selected elements change in the file. Keys the file lacks are created (zeros, then the rows);
python objects written into part of a batch are stored one per element.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.shape import broadcasts_to
from tensordict.core.indexing import plan_index
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack, same_value
from tensordict.errors import LockedError, ShapeMismatchError
from tensordict.formats.node import GroupNode
from tensordict.formats.rows import (
    Selection,
    fit_value,
    read_selection,
    select,
    write_selection,
)

__all__ = ["stage_setitem_persistent"]

Write = Callable[[], None]


class _Target:
    """Where a staged write goes: a group of the file, or one created when the writes run."""

    def __init__(
        self, node: GroupNode | None, src_bs: torch.Size, parent: Any = None, key: str = ""
    ) -> None:
        self._node, self.src_bs, self.parent, self.key = node, src_bs, parent, key

    def kind(self, key: str) -> str | None:
        if self._node is None:
            return None
        kind = self._node.kind(key)
        if kind == "array" and self._node.shape(key) == () and self.src_bs:
            return "scalar"
        return kind

    def node(self) -> GroupNode:
        if self._node is None:
            parent = self.parent.node()
            self._node = parent.create_group(self.key)
            self._node.set_meta({"batch_size": list(self.src_bs), "names": None, "version": 1})
        return self._node

    def child(self, key: str, src_bs: torch.Size) -> _Target:
        node = self._node.child(key) if self._node is not None else None
        return _Target(node, src_bs, self, key)


def stage_setitem_persistent(td: Any, index: Any, value: Any, run: bool = False) -> list[Write]:
    """The writes of ``td[index] = value``, all validated (performed at once if ``run``)."""
    plan = plan_index(index, td.batch_size)
    if td._selection is None:
        sel, sel_dims = select(plan.leaf_index, td.batch_size), len(td.batch_size)
    else:
        sel, sel_dims = td._selection.then(plan.leaf_index), td._sel_dims
    stager = _Stager(td, sel, sel_dims, plan.batch_size)
    target = _Target(td._node, td._src_batch_size)
    if getattr(type(value), "_is_tensorclass", False):
        value = value._tensordict
    if isinstance(value, TensorDictBase):
        if not broadcasts_to(value.batch_size, plan.batch_size):
            raise ShapeMismatchError(
                f"Cannot broadcast the tensordict of batch_size={list(value.batch_size)} to the "
                f"indexed persistent tensordict of batch size {list(plan.batch_size)}. Give a "
                "value of that batch size (or one that broadcasts to it). Nothing was written."
            )
        stager.collection(target, value._own_items(), value.batch_size, (), td)
    elif isinstance(value, Mapping):
        stager.collection(target, value.items(), plan.batch_size, (), td)
    else:
        stager.broadcast(target, torch.as_tensor(value), ())
    if run:
        for write in stager.writes:
            write()
    return stager.writes


class _Stager:
    def __init__(self, td: Any, sel: Selection, sel_dims: int, out_bs: torch.Size) -> None:
        self.td, self.sel, self.sel_dims, self.out_bs = td, sel, sel_dims, out_bs
        self.writes: list[Write] = []

    def _child_bs(self, target: _Target, key: str, value_bs: torch.Size, v: Any) -> torch.Size:
        if target.kind(key) == "group":
            from tensordict.formats.persistent_io import infer_batch_size

            return infer_batch_size(target._node.child(key))  # type: ignore[union-attr]
        extra = v.batch_size[len(value_bs) :] if isinstance(v, TensorDictBase) else ()
        return torch.Size((*target.src_bs, *extra))

    def collection(
        self, target: _Target, items: Any, value_bs: torch.Size, path: tuple[str, ...], td: Any
    ) -> None:
        for key, v in items:
            if isinstance(key, tuple):
                key, v = key[0], {key[1:]: v} if len(key) > 1 else v
            p = path + (key,)
            if getattr(type(v), "_is_tensorclass", False):
                v = v._tensordict
            kind = target.kind(key)
            if isinstance(v, (TensorDictBase, Mapping)) and not isinstance(v, NonTensorStack):
                if kind not in ("group", None):
                    raise ShapeMismatchError(f"cannot write a tensordict into {p!r}, an array.")
                if kind is None:
                    self._check_can_create(p)
                child = target.child(key, self._child_bs(target, key, value_bs, v))
                items_v = v._own_items() if isinstance(v, TensorDictBase) else v.items()
                bs_v = v.batch_size if isinstance(v, TensorDictBase) else value_bs
                self.collection(child, items_v, bs_v, p, td)
            elif isinstance(v, (torch.Tensor, int, float, bool, np.ndarray, np.number)):
                self.tensor(target, key, torch.as_tensor(v), value_bs, p, kind)
            else:
                self.non_tensor(target, key, v, p, kind)

    def _check_can_create(self, path: tuple[str, ...]) -> None:
        if self.td.is_locked:
            raise LockedError(
                f"cannot create the missing entry {path!r} while writing td[index] = ...: the "
                "tensordict is locked. Add the key first (with td.unlock_())."
            )

    def tensor(
        self,
        target: _Target,
        key: str,
        value: torch.Tensor,
        value_bs: torch.Size,
        path: tuple[str, ...],
        kind: str | None,
    ) -> None:
        src_bs = target.src_bs
        if kind is None:
            self._check_can_create(path)
            feature = tuple(value.shape[len(value_bs) :])
            shape = (*src_bs, *feature)
            dtype = value.dtype
        elif kind == "array":
            shape = target._node.shape(key)  # type: ignore[union-attr]
            feature = tuple(shape[len(src_bs) :])
            dtype = target._node.dtype(key)  # type: ignore[union-attr]
        else:
            raise ShapeMismatchError(
                f"cannot write a tensor into {path!r}, which holds {kind} data. Store tensors "
                "under their own key."
            )
        expected = torch.Size((*self.out_bs, *src_bs[len(self.td._src_batch_size) :], *feature))
        fitted = fit_value(value, expected)
        if fitted is None:
            raise ShapeMismatchError(
                f"cannot write {path!r}: the value has shape {list(value.shape)} but the indexed "
                f"entry has shape {list(expected)}. Give a value of that shape (or one that "
                "broadcasts)."
            )
        value = fitted.to(dtype)
        sel, dims = self.sel, self.sel_dims

        def write() -> None:
            node = target.node()
            if kind is None:
                node.create_zeros(key, shape, dtype)
            write_selection(
                lambda r: node.read(key, r),
                lambda r, v: node.write(key, r, v),
                sel,
                value,
                shape,
                dims,
            )

        self.writes.append(write)

    def broadcast(self, target: _Target, value: torch.Tensor, path: tuple[str, ...]) -> None:
        node = target._node
        assert node is not None
        for key in node.list_keys():
            kind = target.kind(key)
            if kind == "array":
                self.tensor(target, key, value, self.out_bs, path + (key,), kind)
            elif kind == "group":
                from tensordict.formats.persistent_io import infer_batch_size

                child = target.child(key, infer_batch_size(node.child(key)))
                self.broadcast(child, value, path + (key,))

    def non_tensor(
        self, target: _Target, key: str, value: Any, path: tuple[str, ...], kind: str | None
    ) -> None:
        if kind in ("group", "array"):
            raise ShapeMismatchError(
                f"cannot write the python object {value!r} into {path!r}, which holds {kind} "
                "data. Store python objects under their own key."
            )
        if kind is None:
            self._check_can_create(path)
            current = np.full(tuple(target.src_bs), None, dtype=object)
        else:
            current = _stored_objects(target, key)
        flat = current.reshape(-1)
        positions = _positions(self.sel, target.src_bs, self.sel_dims).reshape(-1).numpy()
        new = _object_values(value, positions.size)
        if kind is not None and all(same_value(flat[p], n) for p, n in zip(positions, new)):
            return  # nothing changes (a label written again)
        updated = flat.copy()
        for p, n in zip(positions, new):
            updated[p] = n
        allow_pickle = self.td.allow_pickle

        def write() -> None:
            node = target.node()
            if kind is not None:
                node.delete(key)
            first = updated[0] if updated.size else None
            if updated.size and all(same_value(v, first) for v in updated):
                node.write_non_tensor(key, first, False, allow_pickle=allow_pickle)
            else:
                node.write_non_tensor(
                    key, updated.reshape(current.shape), True, allow_pickle=allow_pickle
                )

        self.writes.append(write)


def _stored_objects(target: _Target, key: str) -> np.ndarray:
    node = target._node
    assert node is not None
    if target.kind(key) == "scalar":
        value, shape = node.read(key, ()).item(), None
    else:
        value, shape = node.read_non_tensor(key)
    if shape is None:
        out = np.empty(tuple(target.src_bs), dtype=object)
        out.fill(value)
        return out
    return np.asarray(value, dtype=object)


def _positions(sel: Selection, src_bs: torch.Size, sel_dims: int) -> torch.Tensor:
    """The flat positions (in the stored batch) of the elements ``sel`` selects."""
    grid = torch.arange(int(np.prod(src_bs[:sel_dims], dtype=np.int64))).view(src_bs[:sel_dims])

    def read(region: tuple[Any, ...]) -> torch.Tensor:
        index = tuple(torch.from_numpy(r) if isinstance(r, np.ndarray) else r for r in region)
        return grid[index] if index else grid

    positions = read_selection(read, sel)
    extra = src_bs[sel_dims:]
    if not extra:
        return positions
    n_extra = int(np.prod(extra, dtype=np.int64))
    inner = torch.arange(n_extra).view(extra)
    return positions.reshape((*positions.shape, *([1] * len(extra)))) * n_extra + inner


def _object_values(value: Any, n: int) -> list[Any]:
    if isinstance(value, NonTensorStack):
        values = list(value.to_array().reshape(-1))
        if len(values) != n:
            raise ShapeMismatchError(
                f"cannot write {len(values)} python objects into {n} selected elements."
            )
        return values
    if isinstance(value, NonTensorData):
        value = value.data
    return [value] * n
