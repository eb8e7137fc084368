"""Collectives of tensordicts: ``all_reduce`` and ``reduce`` (leaf by leaf, in place),
``all_gather``, ``scatter`` and ``gather_and_stack`` (whole tensordicts, as envelopes and
consolidated storages: :mod:`~tensordict.distributed.payload`).

``all_reduce`` and ``reduce`` start by agreeing on the structure: every rank all-gathers the
fingerprint of its leaves, and if one differs every rank raises
:class:`~tensordict.errors.TransferMismatchError`, saying where (gloo would crash the process or
mix up data). Then the collectives of every leaf (or bucket of leaves) are in flight at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import is_non_tensor
from tensordict.distributed import payload, schema, wire
from tensordict.distributed.payload import Outgoing
from tensordict.distributed.wire import Deadline, Timeout
from tensordict.errors import TransferMismatchError
from tensordict.memmap.tensor import MemoryMappedTensor

__all__ = ["CollectiveWork", "all_gather", "all_reduce", "gather_and_stack", "reduce", "scatter"]

MAGIC = 0x7464_0001_636F_6C31
_NOTHING, _PICKLE, _STORAGE = 0, 1, 2


class CollectiveWork:
    """A collective of ``all_reduce(async_op=True)`` / ``reduce(..., return_premature=True)``
    whose result is copied back into the leaves when it is waited for (a bucket, a
    non-contiguous leaf): call :meth:`wait` (as on ``torch.distributed``'s ``Work``) before you
    use the tensordict."""

    def __init__(self, work: Any, finish: Callable[[], None], deadline: Deadline, doing: str):
        self._work, self._finish, self._deadline, self._doing = work, finish, deadline, doing
        self._done = False

    def wait(self, timeout: Timeout = None) -> bool:
        """Wait for the collective and write its result into the leaves."""
        deadline = self._deadline if timeout is None else Deadline(timeout)
        deadline.wait(self._work, self._doing)
        if not self._done:
            self._done = True
            self._finish()
        return True

    def is_completed(self) -> bool:
        """Whether :meth:`wait` returned."""
        return self._done


def _world(group: Any) -> int:
    return dist.get_world_size(group=group)


def _agree(group: Any, found: list[schema.Leaf], deadline: Deadline, doing: str) -> None:
    """Raise on every rank unless every rank holds leaves of the same dtypes and sizes (in
    number of elements: the shapes may differ, as upstream)."""
    recs = schema.records([leaf.tensor for leaf in found])
    total = sum(leaf.tensor.numel() * leaf.tensor.element_size() for leaf in found)
    row = torch.tensor([MAGIC, len(found), total, schema.fingerprint(recs), len(recs)])
    rows = [torch.zeros_like(row) for _ in range(_world(group))]
    deadline.wait(dist.all_gather(rows, row, group=group, async_op=True), doing)
    if all(torch.equal(r[:4], rows[0][:4]) for r in rows):  # (r[4]: the records' length)
        return
    # every rank sees the mismatch: gather the records (padded) to say where they differ
    width = max(int(r[4]) for r in rows)
    mine = torch.zeros(width, dtype=torch.int64)
    mine[: len(recs)] = torch.tensor(recs, dtype=torch.int64)
    everyone = [torch.zeros_like(mine) for _ in rows]
    deadline.wait(dist.all_gather(everyone, mine, group=group, async_op=True), doing)
    me = dist.get_rank(group=group)
    other = next(i for i, r in enumerate(rows) if not torch.equal(r[:4], rows[me][:4]))
    theirs = schema.split_records(everyone[other][: int(rows[other][4])].tolist())
    here = schema.split_records(recs)
    index = schema.first_difference(here, theirs)
    where = "their dtypes or sizes differ"
    if index is not None:
        key = f" (key {found[index].path})" if index < len(found) else ""
        at_here = here[index] if index < len(here) else None
        at_there = theirs[index] if index < len(theirs) else None
        where = (
            f"tensor #{index}{key} is {schema.describe(at_here)} here and "
            f"{schema.describe(at_there)} on rank {other} of the group"
        )
    raise TransferMismatchError(
        f"{doing}: the ranks hold tensordicts that do not fit: {len(found)} tensors of {total} "
        f"bytes here, {int(rows[other][1])} of {int(rows[other][2])} on rank {other} of the "
        f"group; {where}. Nothing was reduced, and every rank raises. Give every rank the same "
        "keys, dtypes and shapes (a lazy stack: the same members)."
    )


def _leaf_buffers(td: Any) -> tuple[list[schema.Leaf], list[torch.Tensor], list[Any]]:
    found = schema.leaves(td)
    buffers, after = [], []
    for leaf in found:
        buf = leaf.tensor if schema.direct(leaf.tensor) else leaf.tensor.detach().contiguous()
        buffers.append(buf)
        after.append(schema.write_back(leaf, buf))
    return found, buffers, after


def _buckets(
    buffers: list[torch.Tensor], after: list[Any], bucket_bytes: int | None
) -> list[tuple[torch.Tensor, Callable[[], None] | None]]:
    """The tensors to reduce, each with what writes its result back: one per leaf, or (with
    ``bucket_bytes``) the leaves of a device and dtype packed into buckets of at most that many
    bytes (a larger leaf alone)."""
    if bucket_bytes is None:
        return list(zip(buffers, after))
    if bucket_bytes <= 0:
        raise ValueError(
            f"bucket_bytes must be a positive number of bytes, got {bucket_bytes}. Pass None "
            "for one collective per leaf."
        )
    groups: dict[tuple[Any, Any], list[int]] = {}
    for i, buf in enumerate(buffers):
        groups.setdefault((buf.device, buf.dtype), []).append(i)
    units: list[tuple[torch.Tensor, Callable[[], None] | None]] = []
    for members in groups.values():
        bucket: list[int] = []
        size = 0
        for i in members:
            nbytes = buffers[i].numel() * buffers[i].element_size()
            if bucket and size + nbytes > bucket_bytes:
                units.append(_pack(bucket, buffers, after))
                bucket, size = [], 0
            bucket.append(i)
            size += nbytes
        if bucket:
            units.append(_pack(bucket, buffers, after))
    return units


def _pack(
    bucket: list[int], buffers: list[torch.Tensor], after: list[Any]
) -> tuple[torch.Tensor, Callable[[], None] | None]:
    if len(bucket) == 1:
        return buffers[bucket[0]], after[bucket[0]]
    with torch.no_grad():
        flat = torch.cat([buffers[i].reshape(-1) for i in bucket])

    def unpack() -> None:
        with torch.no_grad():
            pieces = flat.split([buffers[i].numel() for i in bucket])
            for i, piece in zip(bucket, pieces):
                buffers[i].copy_(piece.view(buffers[i].shape))
                if after[i] is not None:
                    after[i]()

    return flat, unpack


def _finish(
    works: list[Any], finishers: list[Any], wait: bool, deadline: Deadline, doing: str
) -> list[Any] | None:
    """Wait for every collective and write the results back; or, with ``wait=False``, the works
    (wrapped where a result must be written back)."""
    if not wait:
        return [
            w if f is None else CollectiveWork(w, f, deadline, doing)
            for w, f in zip(works, finishers)
        ]
    error: BaseException | None = None
    for work, finish in zip(works, finishers):
        try:
            deadline.wait(work, doing)
            if finish is not None:
                finish()
        except BaseException as err:  # wait for the others before raising: they write into td
            error = error or err
    if error is not None:
        raise error
    return None


def all_reduce(
    self: Any,
    op: Any = None,
    *,
    group: Any = None,
    async_op: bool = False,
    bucket_bytes: int | None = None,
    timeout: Timeout = None,
) -> list[Any] | None:
    """Reduce every leaf over the ranks of the group, in place: every rank holds the result.

    Every rank calls it with a tensordict of the same leaves (dtypes and shapes); the ranks
    first agree on that (a small all-gather, which also waits for every rank to arrive), and
    raise :class:`~tensordict.errors.TransferMismatchError` on every rank if one differs. Then
    every leaf's reduction is in flight at once.

    Args:
        op: the ``torch.distributed.ReduceOp`` (default: ``SUM``).
        group: the process group (default: the default group).
        async_op: return the works without waiting: wait for each before you use the
            tensordict.
        bucket_bytes: pack the leaves of a device and dtype into buckets of at most this many
            bytes (a larger leaf alone), one reduction per bucket: faster for many small leaves.
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        With ``async_op=True``, the works (one per leaf or bucket); otherwise None.

    Examples:
        .. code-block:: python

            td = TensorDict(a=torch.ones(3) * rank, batch_size=[3])
            td.all_reduce()           # with 2 ranks: td["a"] == 1 on both
    """
    with wire.translated("all_reduce"):
        op = dist.ReduceOp.SUM if op is None else op
        deadline, doing = Deadline(timeout), "all_reduce"
        found, buffers, after = _leaf_buffers(self)
        _agree(group, found, deadline, doing)
        units = _buckets(buffers, after, bucket_bytes)
        works = [dist.all_reduce(flat, op=op, group=group, async_op=True) for flat, _ in units]
        return _finish(works, [f for _, f in units], not async_op, deadline, doing)


def reduce(
    self: Any,
    dst: int,
    op: Any = None,
    async_op: bool = False,
    return_premature: bool = False,
    group: Any = None,
    *,
    bucket_bytes: int | None = None,
    timeout: Timeout = None,
) -> list[Any] | None:
    """Reduce every leaf over the ranks of the group into the tensordict of rank ``dst``.

    As :meth:`all_reduce` (the same agreement first); only rank ``dst`` holds the result (the
    other ranks' values are undefined afterwards: clone first to keep them).

    Args:
        dst: the global rank that receives the result.
        op: the ``torch.distributed.ReduceOp`` (default: ``SUM``).
        async_op: with ``return_premature``, return the works without waiting.
        return_premature: see ``async_op`` (both are needed to return early, as upstream).
        group: the process group (default: the default group).
        bucket_bytes: pack small leaves into buckets (see :meth:`all_reduce`).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        With ``async_op`` and ``return_premature``, the works; otherwise None.

    Examples:
        .. code-block:: python

            td = TensorDict(a=torch.ones(3) * (rank + 1), batch_size=[3])
            td.reduce(dst=0)          # with 2 ranks: td["a"] == 3 on rank 0
    """
    with wire.translated("reduce"):
        op = dist.ReduceOp.SUM if op is None else op
        deadline, doing = Deadline(timeout), f"reduce to rank {dst}"
        found, buffers, after = _leaf_buffers(self)
        _agree(group, found, deadline, doing)
        if dist.get_rank() != dst:
            after = [None] * len(after)  # (no result here: nothing to write back)
        units = _buckets(buffers, after, bucket_bytes)
        works = [dist.reduce(flat, dst=dst, op=op, group=group, async_op=True) for flat, _ in units]
        early = async_op and return_premature
        return _finish(works, [f for _, f in units], not early, deadline, doing)


def _rebuild_all(
    heads: list[torch.Tensor], envelopes: list[torch.Tensor], storages: list[torch.Tensor]
) -> list[Any]:
    out = []
    for head, envelope, storage in zip(heads, envelopes, storages):
        size, total = int(head[1]), int(head[2])
        out.append(payload.rebuild(wire.unpack_object(envelope[:size]), storage[:total]))
    return out


def _check_heads(heads: list[torch.Tensor], doing: str) -> None:
    if any(int(h[0]) != MAGIC for h in heads):
        raise TransferMismatchError(
            f"{doing}: a rank sent something else than this package's header: run the same "
            "tensordict on every rank, and make their calls match."
        )


def all_gather(self: Any, *, group: Any = None, timeout: Timeout = None) -> list[Any]:
    """The tensordict of every rank of the group, on every rank (in rank order).

    Every rank calls it; the tensordicts may differ in structure. Each travels as its metadata
    (pickled: trusted ranks only) and one consolidated storage.

    Args:
        group: the process group (default: the default group).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        New consolidated tensordicts, one per rank.

    Examples:
        .. code-block:: python

            tds = TensorDict(a=torch.full((3,), float(rank)), batch_size=[3]).all_gather()
            [td["a"][0].item() for td in tds]        # [0.0, 1.0] on both of 2 ranks
    """
    with wire.translated("all_gather"):
        deadline, doing = Deadline(timeout), "all_gather"
        out, world = Outgoing(self), _world(group)
        head = torch.tensor([MAGIC, out.envelope.numel(), out.total])
        heads = [torch.zeros_like(head) for _ in range(world)]
        deadline.wait(dist.all_gather(heads, head, group=group, async_op=True), doing)
        _check_heads(heads, doing)
        widest = max(int(h[1]) for h in heads), max(int(h[2]) for h in heads)
        envelope = torch.zeros(widest[0], dtype=torch.uint8)
        envelope[: out.envelope.numel()] = out.envelope
        storage = torch.empty(widest[1], dtype=torch.uint8, device=out.storage.device)
        out.place(storage)
        envelopes = [torch.empty_like(envelope) for _ in range(world)]
        storages = [torch.empty_like(storage) for _ in range(world)]
        works = [
            dist.all_gather(envelopes, envelope, group=group, async_op=True),
            dist.all_gather(storages, storage, group=group, async_op=True),
        ]
        for work in works:
            deadline.wait(work, doing)
        return _rebuild_all(heads, envelopes, storages)


def scatter(
    self: Any,
    src: int,
    tensordicts: list[Any] | None = None,
    *,
    group: Any = None,
    device: Any = None,
    timeout: Timeout = None,
) -> Any:
    """Send ``tensordicts[i]`` from rank ``src`` to the ``i``-th rank of the group; every rank
    calls it and gets its own (this tensordict is not used).

    Args:
        src: the global rank that holds the tensordicts.
        tensordicts: on ``src``, one tensordict per rank of the group (ignored elsewhere).
        group: the process group (default: the default group).
        device: the device of the result (default: the CPU).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        This rank's tensordict, new and consolidated.

    Raises:
        ValueError: on ``src``, not one tensordict per rank.

    Examples:
        .. code-block:: python

            tds = [TensorDict(a=torch.full((3,), float(i))) for i in range(2)]
            td = TensorDict().scatter(src=0, tensordicts=tds if rank == 0 else None)
            td["a"]                                  # tensor([r, r, r]) on rank r
    """
    with wire.translated("scatter"):
        deadline, doing, world = Deadline(timeout), f"scatter from rank {src}", _world(group)
        outs: list[Outgoing] = []
        if dist.get_rank() == src:
            if tensordicts is None or len(tensordicts) != world:
                got = "none" if tensordicts is None else len(tensordicts)
                raise ValueError(
                    f"scatter on the source rank needs tensordicts=, one per rank of the group "
                    f"({world}); got {got}."
                )
            outs = [Outgoing(td) for td in tensordicts]
        widest = (
            max((o.envelope.numel() for o in outs), default=0),
            max((o.total for o in outs), default=0),
        )
        heads = [torch.tensor([MAGIC, o.envelope.numel(), o.total, *widest]) for o in outs]
        head = torch.zeros(5, dtype=torch.int64)
        work = dist.scatter(head, heads or None, src=src, group=group, async_op=True)
        deadline.wait(work, doing)
        _check_heads([head], doing)
        envelope = torch.empty(int(head[3]), dtype=torch.uint8)
        storage = torch.empty(int(head[4]), dtype=torch.uint8, device=device or "cpu")
        envelopes, storages = [], []
        for o in outs:
            envelopes.append(torch.zeros_like(envelope))
            envelopes[-1][: o.envelope.numel()] = o.envelope
            storages.append(torch.empty_like(storage))
            o.place(storages[-1])
        works = [
            dist.scatter(envelope, envelopes or None, src=src, group=group, async_op=True),
            dist.scatter(storage, storages or None, src=src, group=group, async_op=True),
        ]
        for work in works:
            deadline.wait(work, doing)
        return _rebuild_all([head], [envelope], [storage])[0]


def _lossless(td: Any) -> bool:
    """Whether ``td``'s consolidated storage and metadata rebuild it exactly (else it is
    pickled): dense tensordicts, lazy stacks and tensorclasses of plain CPU tensors."""
    if getattr(type(td), "_is_tensorclass", False):
        td = td._tensordict
    if isinstance(td, LazyStackedTensorDict) and not is_non_tensor(td):
        return all(_lossless(m) for m in td.tensordicts)
    if type(td) is not TensorDict:
        return False
    for _, value in td._own_items():
        if is_non_tensor(value):
            continue
        if isinstance(value, torch.Tensor):
            plain = type(value) in (torch.Tensor, MemoryMappedTensor)
            if not plain or value.requires_grad or value.device.type != "cpu":
                return False
            if value.layout is not torch.strided:
                return False
        elif not _lossless(value):
            return False
    return True


def gather_and_stack(self: Any, dst: int, group: Any = None, *, timeout: Timeout = None) -> Any:
    """Stack the tensordicts of the other ranks into this one, on rank ``dst``, in place.

    Every rank calls it. On ``dst`` this tensordict has one row per other rank (its first batch
    dimension is the group's size minus one; its own data is not part of the result). Each other
    rank sends its consolidated storage and metadata, or its pickle when it cannot be
    consolidated exactly (tensors that require grad, are not on the CPU, not strided, or
    tensordicts other than dense ones, lazy stacks and tensorclasses): trusted ranks only.

    Args:
        dst: the global rank that receives the stack.
        group: the process group (default: the default group).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        This tensordict on ``dst``, None elsewhere.

    Examples:
        .. code-block:: python

            if rank == 0:
                out = TensorDict(a=torch.zeros(1, 3), batch_size=[1])
                out.gather_and_stack(dst=0)    # out["a"] == 1 (rank 1's)
            else:
                TensorDict(a=torch.ones(3), batch_size=[3]).gather_and_stack(dst=0)
    """
    with wire.translated("gather_and_stack"):
        deadline, doing, world = Deadline(timeout), f"gather_and_stack to rank {dst}", _world(group)
        here = dist.get_rank() == dst
        kind, envelope, out = _NOTHING, torch.empty(0, dtype=torch.uint8), None
        if not here:
            if _lossless(self):
                kind, out = _STORAGE, Outgoing(self)
                envelope = out.envelope
            else:
                kind, envelope = _PICKLE, wire.pack_object(self)
        total = 0 if out is None else out.total
        head = torch.tensor([MAGIC, kind, envelope.numel(), total])
        heads = [torch.zeros_like(head) for _ in range(world)]
        deadline.wait(dist.all_gather(heads, head, group=group, async_op=True), doing)
        _check_heads(heads, doing)
        width = max(int(h[2]) + int(h[3]) for h in heads)
        buffer = torch.zeros(width, dtype=torch.uint8)
        if out is not None:  # the storage first, where its views are aligned; the envelope after
            out.place(buffer[: out.total])
        buffer[total : total + envelope.numel()] = envelope
        gathered = [torch.empty_like(buffer) for _ in range(world)] if here else None
        work = dist.gather(buffer, gathered, dst=dst, group=group, async_op=True)
        deadline.wait(work, doing)
        if not here:
            return None
        assert gathered is not None
        me = dist.get_rank(group=group)
        rows = []
        for i, (h, got) in enumerate(zip(heads, gathered)):
            if i == me:
                continue
            size, total = int(h[2]), int(h[3])
            envelope = wire.unpack_object(got[total : total + size])
            stored = int(h[1]) == _STORAGE
            rows.append(payload.rebuild(envelope, got[:total]) if stored else envelope)
        self.update(torch.stack(rows, 0), inplace=True)
        return self
