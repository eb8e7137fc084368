"""``send`` / ``recv`` / ``isend`` / ``irecv``: a tensordict to a rank holding one of the same
structure, leaf by leaf or as one consolidated storage.

One transfer, between a sender S and a receiver R (tags: :mod:`~tensordict.distributed.wire`)::

    S: post the control message (what it will send) and the receive of R's answer
    R: receive the control message and compare it with its own tensordict:
       - they fit:  post one receive per data message, straight into its leaves (or its
                    consolidated storage), then answer "go"
       - they don't: answer why, and raise
    S: read the answer: raise, or post every data message (the leaves, or the chunks of the
       consolidated storage, each filled just before it is sent) and wait for them

No data message exists before R has checked, so tensordicts that do not fit leave both ranks
and the group as they were. R's receives are all posted when S sends: every message of the
transfer is in flight at once (upstream waits for each leaf in turn), and gloo writes each
straight into its leaf. ``isend(return_early=True)`` and ``irecv(return_premature=True)`` run
their side's steps in a helper thread and return at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from tensordict.core.behaviour.consolidate import Layout
from tensordict.distributed import control, payload, schema, wire
from tensordict.distributed.control import LEAVES, STORAGE, Announce, Answer, Side
from tensordict.distributed.pipe import TensorDictPipe
from tensordict.distributed.wire import Deadline, Timeout
from tensordict.errors import DistributedTimeoutError, NotConsolidatedError, TransferMismatchError

__all__ = ["TransferWork", "irecv", "isend", "recv", "send"]

#: the size of the messages a consolidated storage travels in (the last one is smaller)
CHUNK_BYTES = payload.CHUNK_BYTES


class _Plan:
    """One end's data messages: a :class:`Side`, the buffers and their tags, and what to do once
    each buffer is received (copy a contiguous stand-in back into its leaf, ...)."""

    def __init__(
        self,
        side: Side,
        buffers: list[torch.Tensor],
        tags: list[int],
        names: list[str],
        after: list[Callable[[], None] | None] | None = None,
        fill: tuple[Layout, torch.Tensor] | None = None,
    ) -> None:
        self.side, self.buffers, self.tags, self.names = side, buffers, tags, names
        self.after = after or [None] * len(buffers)
        self.fill = fill  # (layout, storage): a storage to fill as its chunks are sent


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def leaf_plan(td: Any, init_tag: int, pseudo_rand: bool, receiving: bool) -> _Plan:
    """The data messages of a leaf-by-leaf transfer of ``td``."""
    found = schema.leaves(td)
    buffers, after = [], []
    for leaf in found:
        t = leaf.tensor
        if schema.direct(t):
            buf = t
        elif receiving:
            buf = torch.empty(t.shape, dtype=t.dtype, device=t.device)
        else:
            buf = t.detach().contiguous()
        buffers.append(buf)
        after.append(schema.write_back(leaf, buf) if receiving else None)
    recs = schema.records([leaf.tensor for leaf in found])
    sizes = [_nbytes(b) for b in buffers]
    side = Side(
        LEAVES, len(buffers), sum(sizes), max(sizes, default=0), schema.fingerprint(recs),
        pseudo_rand, recs, len(found),
    )  # fmt: skip
    tags = list(wire.leaf_tags(init_tag, len(buffers), pseudo_rand))
    return _Plan(side, buffers, tags, control.names_of(found), after)


def storage_plan(td: Any, init_tag: int, receiving: bool) -> _Plan | None:
    """The data messages of a consolidated transfer of ``td`` (None: a receiver that is not
    consolidated). A sender that is not consolidated is laid out and filled as it sends."""
    cons = getattr(td, "_consolidated", None)
    layout = None
    if cons is not None:
        storage, meta = cons["storage"], cons["metadata"]
    elif receiving:
        return None
    else:
        layout = Layout(td)
        device = td.device if td.device is not None else "cpu"
        storage, meta = payload.POOL.take(layout.size, device), layout.metadata
    recs, extra = schema.consolidated_layout(meta)
    total = storage.numel()
    chunks = [storage[a : a + CHUNK_BYTES] for a in range(0, total, CHUNK_BYTES)]
    side = Side(
        STORAGE, len(chunks), total, min(total, CHUNK_BYTES), schema.fingerprint(recs, extra),
        False, recs, len(schema.split_records(recs)),
    )  # fmt: skip
    tags = [wire.control_tag(init_tag, wire.STORAGE)] * len(chunks)
    return _Plan(side, chunks, tags, [], fill=None if layout is None else (layout, storage))


class _Sending:
    """The sender's side of a transfer (see the module docstring)."""

    def __init__(self, pg: Any, peer: int, init_tag: int, plan: _Plan, doing: str) -> None:
        self.pg, self.peer, self.plan, self.doing = pg, peer, plan, doing
        self.answer = Answer.buffer()
        self.control = [
            pg.send([Announce.build(plan.side)], peer, wire.control_tag(init_tag, wire.CTRL)),
            pg.recv([self.answer], peer, wire.control_tag(init_tag, wire.ACK)),
        ]
        self.works: list[Any] = []

    def start(self, deadline: Deadline) -> _Sending:
        """Read the receiver's answer: raise if the tensordicts do not fit, else post the data
        messages (a storage being laid out is filled chunk by chunk just before)."""
        for work in self.control:
            deadline.wait(work, self.doing)
        answer = Answer.parse(self.answer)
        if answer.status != control.OK:
            message = control.mismatch_message(
                self.doing, answer, here=self.plan.side, there=None,
                names=self.plan.names, peer=self.peer, sender=True,
            )  # fmt: skip
            if answer.status == control.NOT_CONSOLIDATED:
                raise NotConsolidatedError(message)
            raise TransferMismatchError(message)
        plan, end = self.plan, 0
        for buf, tag in zip(plan.buffers, plan.tags):
            end += buf.numel()
            if plan.fill is not None:
                plan.fill[0].fill(plan.fill[1], end)
            self.works.append(self.pg.send([buf], self.peer, tag))
        return self

    def wait(self, index: int | None, deadline: Deadline) -> None:
        for work in self.works if index is None else self.works[index : index + 1]:
            deadline.wait(work, self.doing)


class _Receiving:
    """The receiver's side of a transfer whose receives are posted."""

    def __init__(self, works: list[Any], answer: Any, plan: _Plan, doing: str) -> None:
        self.works, self.answer, self.plan, self.doing = works, answer, plan, doing
        self.done = [False] * len(works)
        self.lock = threading.Lock()
        self.answered = False

    def wait(self, index: int | None, deadline: Deadline) -> None:
        with self.lock:
            if not self.answered:
                deadline.wait(self.answer, self.doing)
                self.answered = True
        for i in range(len(self.works)) if index is None else range(index, index + 1):
            if i >= len(self.works):  # (a work returned for a transfer without data)
                break
            deadline.wait(self.works[i], self.doing)
            with self.lock:
                if not self.done[i]:
                    self.done[i] = True
                    after = self.plan.after[i]
                    if after is not None:
                        after()


def _receive(
    pg: Any, peer: int, init_tag: int, plan: _Plan | None, deadline: Deadline, doing: str
) -> _Receiving:
    """The receiver's side: read the announce, check, post the receives, answer."""
    announce = Announce.buffer()
    deadline.wait(pg.recv([announce], peer, wire.control_tag(init_tag, wire.CTRL)), doing)
    theirs, complete = Announce.parse(announce, doing)
    answer = control.compare(None if plan is None else plan.side, theirs, complete)
    ack = wire.control_tag(init_tag, wire.ACK)
    if answer.status == control.OK and plan is not None:
        works = [pg.recv([b], peer, tag) for b, tag in zip(plan.buffers, plan.tags)]
        return _Receiving(works, pg.send([answer.build()], peer, ack), plan, doing)
    deadline.wait(pg.send([answer.build()], peer, ack), doing)
    message = control.mismatch_message(
        doing, answer, here=None if plan is None else plan.side, there=theirs,
        names=[] if plan is None else plan.names, peer=peer, sender=False,
    )  # fmt: skip
    if answer.status == control.NOT_CONSOLIDATED:
        raise NotConsolidatedError(message)
    raise TransferMismatchError(message)


class _Background:
    """One side of a transfer whose steps a helper thread runs, so that
    ``isend(return_early=True)`` and ``irecv(return_premature=True)`` return at once."""

    def __init__(self, start: Callable[[], _Sending | _Receiving], doing: str) -> None:
        self.handle: _Sending | _Receiving | None = None
        self.error: BaseException | None = None
        self.doing = doing
        self.ready = threading.Event()
        threading.Thread(target=self._run, args=(start,), daemon=True, name=doing).start()

    def _run(self, start: Callable[[], _Sending | _Receiving]) -> None:
        try:
            self.handle = start()
        except BaseException as err:  # (raised by the works' wait)
            self.error = wire.translate(err, self.doing)
        finally:
            self.ready.set()

    def wait(self, index: int | None, deadline: Deadline) -> None:
        left = deadline.left()
        if not self.ready.wait(None if left is None else left.total_seconds()):
            raise DistributedTimeoutError(
                f"{self.doing}: the other rank has not answered within "
                f"timeout={deadline.seconds:g} s. Check that it makes the matching call with the "
                "same group and init_tag, or pass a larger timeout=."
            )
        if self.error is not None:
            raise self.error
        assert self.handle is not None
        self.handle.wait(index, deadline)


class TransferWork:
    """A message of a transfer started with ``isend(return_early=True)`` or
    ``irecv(return_premature=True)``: call :meth:`wait` (as on ``torch.distributed``'s ``Work``)
    before you change (isend) or read (irecv) the tensordict.

    Waiting raises the transfer's errors (tensordicts that do not fit, a timeout, a lost peer).
    """

    def __init__(self, handle: _Background, index: int, deadline: Deadline) -> None:
        self._handle, self._index, self._deadline = handle, index, deadline
        self._done = False

    def wait(self, timeout: Timeout = None) -> bool:
        """Wait until this message is sent (received and written); ``timeout`` defaults to the
        call's."""
        deadline = self._deadline if timeout is None else Deadline(timeout)
        self._handle.wait(self._index, deadline)
        self._done = True
        return True

    def is_completed(self) -> bool:
        """Whether :meth:`wait` returned."""
        return self._done


def _doing(verb: str, peer: int) -> str:
    return f"{verb} rank {peer} (of the group)"


def _start_send(
    td: Any, dst: Any, group: Any, group_dst: int | None, init_tag: int, pseudo_rand: bool,
    consolidated: bool,
) -> _Sending:  # fmt: skip
    pg, peer = wire.peer_of(dst, group_dst, group, ("dst", "group_dst"))
    plan = storage_plan(td, init_tag, False) if consolidated else None
    if plan is None:
        plan = leaf_plan(td, init_tag, pseudo_rand, receiving=False)
    return _Sending(pg, peer, init_tag, plan, _doing("send to", peer))


def send(
    self: Any,
    dst: int | TensorDictPipe | None = None,
    *,
    group: Any = None,
    group_dst: int | None = None,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    consolidated: bool = False,
    timeout: Timeout = None,
) -> None:
    """Send the tensors of this tensordict to another rank, which calls :meth:`recv`.

    The receiver holds a tensordict with the same leaves (dtypes and shapes, in the order of the
    sorted keys; lazy stacks member by member); the values are written into its tensors. A small
    control exchange first checks that the two fit: if they do not, both ranks raise
    :class:`~tensordict.errors.TransferMismatchError` and nothing is written. Then every leaf is
    in flight at once. To send to a rank that does not know the structure, use
    :meth:`init_remote`.

    Args:
        dst: the global rank of the receiver, or a :class:`~tensordict._ucxx.TensorDictPipe` to
            send through (the other arguments are then ignored). Exclusive with ``group_dst``.
        group: the process group (default: the default group).
        group_dst: the rank of the receiver in ``group`` (which is then required and may be a
            process group that ``torch.distributed`` never registered). Exclusive with ``dst``.
        init_tag: the tag of the first leaf; the next ones use ``init_tag + 1``, ... The
            receiver passes the same value. Transfers running at the same time between the same
            ranks take distinct tag ranges.
        pseudo_rand: tags drawn from a pseudo-random chain seeded by ``init_tag`` (the receiver
            passes the same value).
        consolidated: send every leaf as one storage (the tensordict is consolidated on the way,
            unless it is); the receiver calls ``recv(consolidated=True)`` on a consolidated
            tensordict of the same layout (from :meth:`from_remote_init` for instance).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Raises:
        PeerArgumentError: both or neither of ``dst`` and ``group_dst``, or ``group_dst`` without
            ``group`` (a ``ValueError``).
        TransferMismatchError: the receiver's tensordict does not fit this one.
        DistributedTimeoutError: not done within the timeout.
        PeerLostError: the receiver's process went away.

    Examples:
        In two processes (see :meth:`recv`):

        .. code-block:: python

            td = TensorDict(a=torch.ones(4), b=torch.ones(4, 3), batch_size=[4])
            td.send(dst=1)                  # rank 0
            # rank 1: td = TensorDict(a=torch.zeros(4), b=torch.zeros(4, 3), batch_size=[4])
            #         td.recv(src=0)        # td["b"].sum() == 12

        The peer is checked before anything is sent:

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(2)).send()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tensordict.errors.PeerArgumentError: Exactly one of `dst` and `group_dst` must be ...
    """
    with wire.translated("send"):
        if isinstance(dst, TensorDictPipe):
            _pipe_alone(group_dst, "group_dst", "dst")
            dst.send(self)
            return
        deadline = Deadline(timeout)
        sending = _start_send(self, dst, group, group_dst, init_tag, pseudo_rand, consolidated)
        sending.start(deadline).wait(None, deadline)


def isend(
    self: Any,
    dst: int | None = None,
    *,
    group: Any = None,
    group_dst: int | None = None,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    return_early: bool = False,
    consolidated: bool = False,
    timeout: Timeout = None,
) -> int | list[TransferWork] | None:
    """Send the tensors of this tensordict to another rank, every leaf in flight at once.

    As :meth:`send` (same arguments, same checks); the receiver calls :meth:`irecv` or
    :meth:`recv`. With ``return_early=True`` the call returns at once with one
    :class:`~tensordict.distributed.p2p.TransferWork` per message: wait for each before you
    change the tensordict (waiting raises the transfer's errors).

    Returns:
        With ``return_early=True``, the works; otherwise the tag of the last leaf sent (None with
        ``consolidated=True``).

    Examples:
        .. code-block:: python

            works = td.isend(dst=1, return_early=True)  # rank 0
            ...  # work that does not change td
            for work in works:
                work.wait()
    """
    with wire.translated("isend"):
        deadline = Deadline(timeout)
        sending = _start_send(self, dst, group, group_dst, init_tag, pseudo_rand, consolidated)
        if return_early:
            background = _Background(lambda: sending.start(deadline), sending.doing)
            count = max(len(sending.plan.buffers), 1)
            return [TransferWork(background, i, deadline) for i in range(count)]
        sending.start(deadline).wait(None, deadline)
        return None if consolidated else _last_tag(sending.plan, init_tag)


def _last_tag(plan: _Plan, init_tag: int) -> int:
    return plan.tags[-1] if plan.tags else init_tag - 1


def _recv_plan(td: Any, init_tag: int, pseudo_rand: bool, consolidated: bool) -> _Plan | None:
    if consolidated:
        return storage_plan(td, init_tag, receiving=True)
    return leaf_plan(td, init_tag, pseudo_rand, receiving=True)


def recv(
    self: Any,
    src: int | TensorDictPipe | None = None,
    *,
    group: Any = None,
    group_src: int | None = None,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    consolidated: bool = False,
    timeout: Timeout = None,
) -> Any:
    """Receive what :meth:`send` (or :meth:`isend`) sends, into the tensors of this tensordict.

    This tensordict holds the keys, dtypes and shapes the sender sends: the values are written
    in place (contiguous leaves directly, others through a contiguous buffer; views and
    file-backed tensordicts through their entries). If the two do not fit, both ranks raise
    :class:`~tensordict.errors.TransferMismatchError` and nothing is written.

    Args:
        src: the global rank of the sender, or a :class:`~tensordict._ucxx.TensorDictPipe` to
            receive from (the other arguments are then ignored). Exclusive with ``group_src``.
        group: the process group (default: the default group).
        group_src: the rank of the sender in ``group`` (then required). Exclusive with ``src``.
        init_tag: the sender's ``init_tag``.
        pseudo_rand: the sender's ``pseudo_rand``.
        consolidated: receive one storage, sent by ``send(consolidated=True)``, into this
            tensordict's consolidated storage (which updates every leaf). This tensordict must be
            consolidated (else :class:`~tensordict.errors.NotConsolidatedError`, an
            ``AttributeError``, on both ranks).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        With a pipe, the received tensordict (``self`` only if it is consolidated with the
        data's layout); with ``consolidated=True``, None; otherwise the tag of the last leaf.

    Raises:
        PeerArgumentError: both or neither of ``src`` and ``group_src``, or ``group_src`` without
            ``group`` (a ``ValueError``).
        TransferMismatchError: the sender's tensordict does not fit this one.
        DistributedTimeoutError: not done within the timeout.
        PeerLostError: the sender's process went away.

    Examples:
        .. code-block:: python

            td = TensorDict(a=torch.zeros(4), b=torch.zeros(4, 3), batch_size=[4])
            td.recv(src=0)                   # rank 1, while rank 0 calls td.send(dst=1)
            print(td["b"].sum())             # tensor(12.)
    """
    with wire.translated("recv"):
        if isinstance(src, TensorDictPipe):
            _pipe_alone(group_src, "group_src", "src")
            return src.recv(self)
        pg, peer = wire.peer_of(src, group_src, group, ("src", "group_src"))
        deadline = Deadline(timeout)
        plan = _recv_plan(self, init_tag, pseudo_rand, consolidated)
        _receive(pg, peer, init_tag, plan, deadline, _doing("recv from", peer)).wait(None, deadline)
        return None if consolidated or plan is None else _last_tag(plan, init_tag)


def irecv(
    self: Any,
    src: int | None = None,
    *,
    group: Any = None,
    group_src: int | None = None,
    return_premature: bool = False,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    consolidated: bool = False,
    timeout: Timeout = None,
) -> list[TransferWork] | None:
    """Receive what :meth:`isend` (or :meth:`send`) sends, every leaf in flight at once.

    As :meth:`recv` (same arguments, same checks). With ``return_premature=True`` the call
    returns at once with one :class:`~tensordict.distributed.p2p.TransferWork` per message (a
    helper thread reads the sender's control message and posts the receives): wait for each
    before you read the tensordict; waiting raises the transfer's errors.

    Returns:
        With ``return_premature=True``, the works; otherwise None.

    Examples:
        .. code-block:: python

            works = td.irecv(src=0, return_premature=True)  # rank 1
            ...  # work that does not read td
            for work in works:
                work.wait()
    """
    with wire.translated("irecv"):
        pg, peer = wire.peer_of(src, group_src, group, ("src", "group_src"))
        deadline = Deadline(timeout)
        plan = _recv_plan(self, init_tag, pseudo_rand, consolidated)
        doing = _doing("irecv from", peer)
        if not return_premature:
            _receive(pg, peer, init_tag, plan, deadline, doing).wait(None, deadline)
            return None
        background = _Background(lambda: _receive(pg, peer, init_tag, plan, deadline, doing), doing)
        count = max(len(plan.buffers), 1) if plan is not None else 1
        return [TransferWork(background, i, deadline) for i in range(count)]


def _pipe_alone(group_peer: int | None, name: str, pipe_name: str) -> None:
    if group_peer is not None:
        raise ValueError(
            f"`{name}` cannot be used when `{pipe_name}` is a TensorDictPipe: the pipe is the "
            f"peer. Drop `{name}`."
        )
