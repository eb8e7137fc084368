"""``store[index] = value``: every write validated, then sent in one transaction.

Tensors already on the server are written row by row (see ``_rows``); entries the server lacks
are built whole in memory (zeros, then the rows) and written with the rest; python objects
written into part of the batch are kept one per element along the first dimension (upstream's
``json_array`` encoding).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.indexing import plan_index
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import LockedError, ShapeMismatchError
from tensordict.formats.rows import fit_value, select
from tensordict.store._connection import KEY_SEP, tensor_meta
from tensordict.store._rows import RowWrite, write_rows

__all__ = ["stage_store_setitem"]


def _flat(value: Any, prefix: str) -> list[tuple[str, Any]]:
    if getattr(type(value), "_is_tensorclass", False):
        value = value._tensordict
    if isinstance(value, (NonTensorData, NonTensorStack)):
        return [(prefix, value)]
    if isinstance(value, TensorDictBase):
        items: Any = value._own_items()
    elif isinstance(value, Mapping):
        items = value.items()
    else:
        return [(prefix, value)]
    out: list[tuple[str, Any]] = []
    for key, child in items:
        key = KEY_SEP.join(key) if isinstance(key, tuple) else key
        out += _flat(child, f"{prefix}{KEY_SEP}{key}" if prefix else key)
    return out


def _is_tensor_like(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, int, float, bool, np.ndarray, np.number))


def stage_store_setitem(td: Any, index: Any, value: Any) -> list[Callable[[], None]]:
    """The validated writes of ``td[index] = value`` (one closure doing one transaction)."""
    bs = td.batch_size
    plan = plan_index(index, bs)
    sel = select(plan.leaf_index, bs)
    metas = td._entries_meta(fresh=True)  # a write never trusts cached metadata
    conn = td._conn
    collection = isinstance(value, (TensorDictBase, Mapping)) or getattr(
        type(value), "_is_tensorclass", False
    )
    if collection:
        items = _flat(value, "")
        inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
        value_bs = inner.batch_size if isinstance(inner, TensorDictBase) else plan.batch_size
    else:
        items = [(p, value) for p, m in metas.items() if m.get("is_non_tensor") != "1"]
        value_bs = plan.batch_size
    writes: list[RowWrite] = []
    extra: list[Any] = []
    objects: list[tuple[str, Any]] = []
    from tensordict.store._store import _leaf_commands

    for rel, v in items:
        full = td._full_key_path(rel)
        meta = metas.get(rel)
        if not _is_tensor_like(v):
            objects.append((rel, v))
            continue
        t = torch.as_tensor(v)
        if meta is not None and meta.get("is_non_tensor") == "1":
            raise ShapeMismatchError(
                f"cannot write a tensor into {rel!r}, which holds python data."
            )
        if meta is None:
            _check_unlocked(td, rel)
            shape = [*bs, *t.shape[len(value_bs) :]]
            t = _check(rel, t, torch.Size((*plan.batch_size, *shape[len(bs) :])))
            whole = torch.zeros(shape, dtype=t.dtype)
            whole[plan.leaf_index] = t
            extra += _leaf_commands(conn, full, whole)
            continue
        shape, dtype = tensor_meta(full, meta)
        t = _check(rel, t, torch.Size([*plan.batch_size, *shape[len(bs) :]]))
        writes.append(RowWrite(full, shape, dtype, sel, t, len(bs)))
    extra += _object_commands(td, plan, objects, metas)

    def run() -> None:
        write_rows(conn, writes, extra)

    return [run]


def _check(rel: str, value: torch.Tensor, expected: torch.Size) -> torch.Tensor:
    """``value`` ready to write into ``expected``: as torch's setitem, extra leading 1s go."""
    fitted = fit_value(value, expected)
    if fitted is None:
        raise ShapeMismatchError(
            f"cannot write {rel!r}: the value has shape {list(value.shape)} but the indexed "
            f"entry has shape {list(expected)}. Nothing was written."
        )
    return fitted


def _check_unlocked(td: Any, rel: str) -> None:
    if td.is_locked:
        raise LockedError(
            f"cannot create the missing entry {rel!r} while writing td[index] = ...: the store "
            "is locked. Add the key first (with td.unlock_())."
        )


def _object_commands(
    td: Any, plan: Any, objects: list[tuple[str, Any]], metas: dict[str, dict[str, str]]
) -> list[Any]:
    """Per-element rewrites of python-object entries (read now, written with the rest)."""
    if not objects:
        return []
    from tensordict.store._store import _leaf_commands, _non_tensor

    bs = td.batch_size
    n0 = bs[0] if bs else 1
    inner = math.prod(bs[1:]) if len(bs) > 1 else 1
    grid = (
        torch.arange(max(math.prod(bs), 1)).view(tuple(bs))
        if bs
        else torch.zeros((), dtype=torch.long)
    )
    rows = (grid[plan.leaf_index].reshape(-1) // inner).tolist() if bs else [0]
    conn = td._conn
    existing = [rel for rel, _ in objects if rel in metas]
    commands = [("get", (conn.data_key(td._full_key_path(r)),)) for r in existing]
    blobs = dict(zip(existing, conn.read(commands))) if commands else {}
    out: list[Any] = []
    for rel, v in objects:
        full = td._full_key_path(rel)
        if rel in metas:
            current = _non_tensor(metas[rel], blobs[rel], torch.Size([n0]), None, full, conn)
            values = (
                current.tolist() if isinstance(current, NonTensorStack) else [current.data] * n0
            )
        else:
            _check_unlocked(td, rel)
            values = [None] * n0
        new = v.tolist() if isinstance(v, NonTensorStack) else None
        if isinstance(v, NonTensorData):
            v = v.data
        new_values = list(np.asarray(new, dtype=object).reshape(-1)) if new is not None else None
        for i, row in enumerate(dict.fromkeys(rows)):
            values[row] = new_values[i] if new_values is not None and i < len(new_values) else v
        array = np.empty(n0, dtype=object)
        array[:] = values
        out += _leaf_commands(conn, full, NonTensorStack.from_array(array))
    return out
