"""``init_remote`` / ``from_remote_init`` and ``broadcast``: a tensordict to ranks that do not know
its structure, as an envelope and one consolidated storage (:mod:`~tensordict.distributed.payload`).

Point to point, the sender posts the header (fixed size), the envelope and the storage's chunks
at once; the receiver reads the header, then posts the receive of the envelope and of every chunk
into a new storage. A broadcast runs the same three steps as collectives. The storage of a
tensordict that is not consolidated is filled chunk by chunk while the first chunks travel.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from tensordict.core.dense import TensorDict
from tensordict.distributed import payload, wire
from tensordict.distributed.payload import Outgoing
from tensordict.distributed.wire import Deadline, Timeout
from tensordict.errors import PeerArgumentError

__all__ = ["broadcast", "from_remote_init", "init_remote"]


def _is_tc(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def init_remote(
    self: Any,
    dst: int | None = None,
    group: Any = None,
    device: Any = None,
    use_broadcast: bool = False,
    _tensorclass_type: str | None = None,
    *,
    timeout: Timeout = None,
) -> None:
    """Send this tensordict, structure and values, to a rank that calls
    :meth:`from_remote_init`.

    The receiver gets a new consolidated tensordict (of this tensorclass, for a tensorclass):
    send it the next values with ``send(consolidated=True)``, which it receives in place with
    ``recv(consolidated=True)``. The metadata is pickled: use it between trusted ranks only.

    Args:
        dst: the global rank of the receiver (not used with ``use_broadcast``).
        group: the process group (default: the default group).
        device: with ``use_broadcast``, the device of the storage (see :meth:`broadcast`).
        use_broadcast: send to every rank of the group with :meth:`broadcast`; they call
            ``from_remote_init(src=..., use_broadcast=True)``.
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Raises:
        PeerArgumentError: no ``dst`` without ``use_broadcast`` (a ``ValueError``).
        DistributedTimeoutError: not done within the timeout.
        PeerLostError: the receiver's process went away.

    Examples:
        .. code-block:: python

            td = TensorDict(obs=torch.ones(2, 84), batch_size=[2])
            td.init_remote(dst=1)                  # rank 0
            td["obs"].add_(1)
            td.send(dst=1, consolidated=True)
            # rank 1: td = TensorDict.from_remote_init(src=0)
            #         td.recv(src=0, consolidated=True)
    """
    with wire.translated("init_remote"):
        if use_broadcast:
            src = dist.get_rank()
            broadcast(
                self, src, group=group, device=device, _tensorclass_type=_tensorclass_type,
                timeout=timeout,
            )  # fmt: skip
            return
        if dst is None:
            raise PeerArgumentError(
                "init_remote needs dst=, the global rank of the receiver (or use_broadcast=True to "
                "send to every rank of the group)."
            )
        pg, peer = wire.peer_of(dst, None, group, ("dst", "group_dst"))
        out = Outgoing(self, tensorclass=_tensorclass_type)
        deadline, doing = Deadline(timeout), f"init_remote to rank {peer} (of the group)"
        works = [pg.send([out.head(padded=False)], peer, wire.control_tag(0, wire.HEADER))]
        if not out.envelope_inline():
            works.append(pg.send([out.envelope], peer, wire.control_tag(0, wire.META)))
        works += [pg.send([c], peer, wire.control_tag(0, wire.CHUNK)) for c in out.chunks()]
        for work in works:
            deadline.wait(work, doing)


def from_remote_init(
    src: int,
    group: Any = None,
    device: Any = None,
    use_broadcast: bool = False,
    *,
    timeout: Timeout = None,
) -> Any:
    """The tensordict a rank sends with :meth:`init_remote`: new, consolidated (receive the
    next values into it with ``recv(consolidated=True)``), of the sender's tensorclass if this
    process can import it. The metadata is unpickled: use it between trusted ranks only.

    Args:
        src: the global rank of the sender.
        group: the process group (default: the default group).
        device: the device of the result (default: the CPU; with ``use_broadcast``, the
            sender's).
        use_broadcast: receive with :meth:`broadcast` (the sender passes the same).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        The received tensordict (or tensorclass instance).

    Examples:
        .. code-block:: python

            td = TensorDict.from_remote_init(src=0)   # rank 1, while rank 0 calls init_remote
            td.is_consolidated()                      # True
    """
    with wire.translated("from_remote_init"):
        if use_broadcast:
            return broadcast(TensorDict(), src, group=group, device=device, timeout=timeout)
        pg, peer = wire.peer_of(src, None, group, ("src", "group_src"))
        deadline, doing = Deadline(timeout), f"from_remote_init from rank {peer} (of the group)"
        head = torch.empty(payload.HEAD_BYTES, dtype=torch.uint8)
        deadline.wait(pg.recv([head], peer, wire.control_tag(0, wire.HEADER)), doing)
        size, total, chunk, envelope = payload.read_head(head, doing)
        if envelope is None:
            envelope = torch.empty(size, dtype=torch.uint8)
            deadline.wait(pg.recv([envelope], peer, wire.control_tag(0, wire.META)), doing)
        unpacked = wire.unpack_object(envelope)
        storage = payload.POOL.take(total, device or "cpu")
        tag = wire.control_tag(0, wire.CHUNK)
        cut = payload.pieces(storage, chunk)
        works = [pg.recv([piece], peer, tag) for piece in cut]
        for work in works:
            deadline.wait(work, doing)
        return payload.rebuild(unpacked, storage)


def broadcast(
    self: Any,
    src: int,
    *,
    group: Any = None,
    device: Any = None,
    _tensorclass_type: str | None = None,
    timeout: Timeout = None,
) -> Any:
    """Send the tensordict of rank ``src`` to every rank of the group; every rank calls it and
    gets it back.

    The other ranks need not know the structure (they may call it on an empty tensordict).
    Rank ``src`` sends its metadata (pickled: trusted ranks only) and its consolidated storage,
    copying its leaves into that storage while the first chunks travel if it is not
    consolidated yet.

    Args:
        src: the global rank that sends.
        group: the process group (default: the default group).
        device: on ``src``, the device of the consolidated storage if the tensordict is not
            consolidated; elsewhere, the device of the result (default: the sender's).
        timeout: seconds (or a ``timedelta``) for the whole call; None: the process group's.

    Returns:
        Rank ``src``'s tensordict, consolidated (on ``src``: itself if it was consolidated,
        else a consolidated copy; elsewhere a new one), of its tensorclass for a tensorclass.

    Examples:
        .. code-block:: python

            td = TensorDict(a=torch.arange(3.0), batch_size=[3]) if rank == 0 else TensorDict()
            td = td.broadcast(src=0)       # tensor([0., 1., 2.]) on every rank
    """
    with wire.translated("broadcast"):
        deadline = Deadline(timeout)
        doing = f"broadcast from rank {src}"
        if dist.get_rank() == src:
            out = Outgoing(self, device, _tensorclass_type)
            works = [dist.broadcast(out.head(padded=True), src, group=group, async_op=True)]
            if not out.envelope_inline():
                works.append(dist.broadcast(out.envelope, src, group=group, async_op=True))
            works += [dist.broadcast(c, src, group=group, async_op=True) for c in out.chunks()]
            for work in works:
                deadline.wait(work, doing)
            return out.result()
        head = torch.empty(payload.HEAD_BYTES, dtype=torch.uint8)
        deadline.wait(dist.broadcast(head, src, group=group, async_op=True), doing)
        size, total, chunk, envelope = payload.read_head(head, doing)
        if envelope is None:
            envelope = torch.empty(size, dtype=torch.uint8)
            deadline.wait(dist.broadcast(envelope, src, group=group, async_op=True), doing)
        unpacked = wire.unpack_object(envelope)
        storage = payload.POOL.take(total, device or unpacked["device"])
        cut = payload.pieces(storage, chunk)
        works = [dist.broadcast(p, src, group=group, async_op=True) for p in cut]
        for work in works:
            deadline.wait(work, doing)
        result = payload.rebuild(unpacked, storage)
        if _is_tc(self) and not isinstance(result, type(self)):
            return type(self)._from_tensordict(result)
        return result
