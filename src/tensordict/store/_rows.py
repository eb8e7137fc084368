"""Reading and writing the rows an index selects, with byte ranges, in few round-trips.

An index is first split by :func:`tensordict.formats.rows.select` into a region (one item per
leading dimension) and a chain of torch indices. Along the first dimension the region is read
with ``GETRANGE``: one range for an int or a slice (a step slice reads its covering range), one
per run of consecutive rows for positions. Every leaf of a call is read in one pipeline; writes
that change whole rows are ``SETRANGE``s in one transaction, the others read the covering rows
first (one more round-trip), change them in memory and write them back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tensordict.errors import StoreDataError
from tensordict.formats.rows import Selection, apply_chain, write_selection
from tensordict.store._connection import Connection, decode_meta, tensor_meta
from tensordict.store._utils import _bytes_to_tensor, _row_bytes, _tensor_to_bytes

__all__ = ["RowRead", "StaleMetadata", "fetch", "write_rows"]

FULL = slice(None)


def _is_full(item: Any) -> bool:
    return isinstance(item, slice) and item == FULL


class RowRead:
    """The byte ranges of one leaf's region, and how to rebuild the rows from them."""

    def __init__(self, path: str, shape: list[int], dtype: torch.dtype, sel: Selection) -> None:
        self.path, self.shape, self.dtype, self.sel = path, shape, dtype, sel
        region = sel.region
        r0 = region[0] if region else FULL
        n = shape[0] if shape else 1
        row = _row_bytes(shape, dtype) if shape else torch.empty((), dtype=dtype).element_size()
        self.rest = tuple(region[1:])
        self.local0: Any = FULL
        if not shape or _is_full(r0):
            self.rows: list[tuple[int, int]] = [(0, n)] if shape else [(0, 1)]
            self.drop = not shape
        elif isinstance(r0, (int, np.integer)):
            self.rows, self.drop = [(int(r0), 1)], True
        elif isinstance(r0, slice):
            r = range(*r0.indices(n))
            self.rows = [(r[0], r[-1] - r[0] + 1)] if len(r) else []
            self.drop = False
            if r0.step not in (None, 1):
                self.local0 = slice(None, None, r0.step)
        else:
            self.rows, self.drop = _runs(np.asarray(r0)), False
        self.ranges = [(start * row, count * row) for start, count in self.rows]

    def finish(self, chunks: list[bytes]) -> torch.Tensor:
        data = b"".join(chunks)
        count = sum(c for _, c in self.rows)
        shape = self.shape[1:] if self.drop and self.shape else [count, *self.shape[1:]]
        from tensordict.store._connection import check_length

        tensor = _bytes_to_tensor(
            check_length(self.path, data, shape, self.dtype), shape, self.dtype
        )
        index = (() if self.drop else (self.local0,)) + self.rest
        if not all(_is_full(i) for i in index):
            tensor = tensor[index]
        return apply_chain(tensor, self.sel.chain)


def _runs(positions: np.ndarray) -> list[tuple[int, int]]:
    """Sorted unique positions as ``(start, count)`` runs of consecutive rows."""
    if positions.size == 0:
        return []
    breaks = np.nonzero(np.diff(positions) != 1)[0] + 1
    return [(int(run[0]), len(run)) for run in np.split(positions, breaks)]


class StaleMetadata(Exception):
    """The metadata a read was planned with changed on the server (another client replaced
    the entry): the read is planned again with the new metadata."""


def fetch(
    conn: Connection, reads: list[RowRead], extra: Sequence[tuple[str, tuple[Any, ...]]] = ()
) -> tuple[list[torch.Tensor], list[Any]]:
    """Read every ``RowRead`` (and the ``extra`` commands) in one transaction, with each
    entry's metadata, which must still be what the read was planned with.

    Raises:
        StaleMetadata: an entry's shape or dtype changed since it was planned (the new ones
            are cached: plan again).
        StoreDataError: the stored tensordict is gone from the server.
    """
    commands: list[tuple[str, tuple[Any, ...]]] = []
    for read in reads:
        key = conn.data_key(read.path)
        commands.append(("hgetall", (conn.meta_key(read.path),)))
        commands += [
            ("getrange", (key, off, off + length - 1)) for off, length in read.ranges if length
        ]
    commands += list(extra)
    answers = conn.read(commands) if commands else []
    out, i, stale = [], 0, False
    for read in reads:
        meta = conn.remember(read.path, decode_meta(answers[i]))
        stale = stale or _changed(read, meta)
        n = sum(1 for _, length in read.ranges if length)
        if not stale:
            out.append(read.finish([bytes(a) for a in answers[i + 1 : i + 1 + n]]))
        i += 1 + n
    if stale:
        raise StaleMetadata
    return out, answers[i:]


def _changed(read: RowRead, meta: dict[str, str]) -> bool:
    """Whether ``meta`` (just read) describes another tensor than the one ``read`` planned."""
    if not meta or meta.get("is_non_tensor") == "1":
        return True
    shape, dtype = tensor_meta(read.path, meta)
    return list(shape) != list(read.shape) or dtype != read.dtype


class RowWrite:
    """One leaf's write of ``value`` into the elements ``sel`` selects."""

    def __init__(
        self,
        path: str,
        shape: list[int],
        dtype: torch.dtype,
        sel: Selection,
        value: torch.Tensor,
        batch_dims: int,
    ) -> None:
        self.path, self.shape, self.dtype, self.sel = path, shape, dtype, sel
        self.value, self.batch_dims = value.to(dtype), batch_dims
        region = sel.region
        r0 = region[0] if region else FULL
        whole_rows = not sel.chain and all(_is_full(r) for r in region[1:])
        plain = isinstance(r0, (int, np.integer)) or (
            isinstance(r0, slice) and r0.step in (None, 1)
        )
        self.direct = bool(shape) and whole_rows and (plain or _is_full(r0))
        self.block = RowRead(path, shape, dtype, Selection((_cover(r0, shape[0] if shape else 1),)))

    def commands(
        self, conn: Connection, block: torch.Tensor | None
    ) -> list[tuple[str, tuple[Any, ...]]]:
        key = conn.data_key(self.path)
        offset = self.block.ranges[0][0] if self.block.ranges else 0
        if self.direct:
            shape = tuple((self.block.rows and [self.block.rows[0][1], *self.shape[1:]]) or [0])
            data = self.value.expand(_drop_int(shape, self.sel.region)).contiguous()
            return [("setrange", (key, offset, _tensor_to_bytes(data)))] if data.numel() else []
        assert block is not None
        local = _local_selection(self.sel, self.block.rows[0][0] if self.block.rows else 0)
        write_selection(
            lambda r: block[_torch_index(r)] if r else block,
            lambda r, v: block.__setitem__(_torch_index(r) if r else (...,), v),
            local,
            self.value,
            tuple(block.shape),
            self.batch_dims,
        )
        return [("setrange", (key, offset, _tensor_to_bytes(block)))] if block.numel() else []


def _drop_int(shape: tuple[int, ...], region: tuple[Any, ...]) -> tuple[int, ...]:
    if region and isinstance(region[0], (int, np.integer)):
        return tuple(shape[1:])
    return tuple(shape)


def _cover(r0: Any, n: int) -> slice:
    if isinstance(r0, (int, np.integer)):
        return slice(int(r0), int(r0) + 1)
    if isinstance(r0, slice):
        r = range(*r0.indices(n))
        return slice(r[0], r[-1] + 1) if len(r) else slice(0, 0)
    if isinstance(r0, np.ndarray):
        return slice(int(r0.min()), int(r0.max()) + 1) if r0.size else slice(0, 0)
    return slice(None)


def _local_selection(sel: Selection, first: int) -> Selection:
    region = sel.region
    if not region:
        return sel
    r0 = region[0]
    if isinstance(r0, (int, np.integer)):
        local0: Any = 0
    elif isinstance(r0, slice):  # normalised by select(): explicit start and stop
        local0 = slice(r0.start - first, r0.stop - first, r0.step)
    else:
        local0 = np.asarray(r0) - first
    return Selection((local0, *region[1:]), sel.chain)


def _torch_index(region: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(torch.from_numpy(r) if isinstance(r, np.ndarray) else r for r in region)


def write_rows(
    conn: Connection, writes: list[RowWrite], extra: Sequence[tuple[str, tuple[Any, ...]]] = ()
) -> None:
    """Perform ``writes`` (and ``extra`` commands) in one transaction, after one read of the
    covering rows of those that do not replace whole rows."""
    rmw = [w for w in writes if not w.direct]
    try:
        blocks, _ = fetch(conn, [w.block for w in rmw]) if rmw else ([], [])
    except StaleMetadata:
        raise StoreDataError(
            "an entry this write changes was replaced by another client while the write was "
            "prepared (its shape or dtype changed). Nothing was written; write again."
        ) from None
    by_id = {id(w): b for w, b in zip(rmw, blocks)}
    commands: list[tuple[str, tuple[Any, ...]]] = []
    for w in writes:
        commands += w.commands(conn, by_id.get(id(w)))
    commands += list(extra)
    if commands:
        conn.run(commands, write=True)


def numel_bytes(shape: Any, dtype: torch.dtype) -> int:
    return math.prod(int(s) for s in shape) * torch.empty((), dtype=dtype).element_size()
