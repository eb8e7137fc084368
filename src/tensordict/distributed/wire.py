"""What the transfers of the package share: the process group and the peer, the tags, waiting with
a deadline, and gloo's failures turned into errors that say what happened and what to do.

Tags. The leaves of ``send``/``recv`` use upstream's tags: ``init_tag``, ``init_tag + 1``, ... or,
with ``pseudo_rand=True``, the chain of :func:`int_generator` seeded by ``init_tag``. The control
messages and the consolidated storages use tags of their own, from ``2**30`` up
(:func:`control_tag`), derived from ``init_tag`` too, so that transfers given distinct
``init_tag`` ranges can run at the same time.

Timeouts. Every wait goes through :class:`Deadline`: with ``timeout=None`` it is the process
group's timeout (``init_process_group(timeout=...)``, 30 minutes by default with gloo), else the
number of seconds (or the ``timedelta``) given to the method, for the whole call.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import pickle
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from tensordict.errors import DistributedTimeoutError, PeerArgumentError, PeerLostError

__all__ = [
    "Deadline",
    "Timeout",
    "control_tag",
    "group_of",
    "translated",
    "int_generator",
    "leaf_tags",
    "pack_object",
    "peer_of",
    "translate",
    "unpack_object",
]

#: what ``timeout=`` accepts: seconds, a ``timedelta``, or None for the process group's timeout
Timeout = float | datetime.timedelta | None

#: the first tag of the package's own messages (gloo takes tags up to ``2**31 - 1``)
CONTROL_BASE = 1 << 30
#: the kinds of control tags
CTRL, ACK, STORAGE, HEADER, META, CHUNK = range(6)

_PEER_LOST = ("closed by peer", "reset by peer", "broken pipe", "read error", "write error")
_TIMED_OUT = ("timed out", "timeout")


def group_of(group: Any) -> Any:
    """``group``, or the default process group (a clear error when there is none)."""
    if group is not None:
        return group
    world = dist.group.WORLD if dist.is_available() and dist.is_initialized() else None
    if world is None:
        raise RuntimeError(
            "torch.distributed is not initialised in this process: call "
            "torch.distributed.init_process_group(...) on every rank first, or pass group=."
        )
    return world


def peer_of(
    peer: int | None, group_peer: int | None, group: Any, names: tuple[str, str]
) -> tuple[Any, int]:
    """The process group and the rank in it of a point-to-point method's peer.

    ``peer`` is a global rank (``dst``/``src``), ``group_peer`` a rank in ``group``
    (``group_dst``/``group_src``, for groups that ``torch.distributed`` never registered):
    exactly one of them is given.

    Raises:
        PeerArgumentError: both or neither are given, or ``group_peer`` without ``group``.
    """
    name, group_name = names
    if group_peer is not None:
        if group is None:
            raise PeerArgumentError(
                f"`{group_name}` requires `group` to be passed: it is a rank in that group. "
                f"Pass group=..., or give the global rank as `{name}` instead."
            )
        if peer is not None:
            raise PeerArgumentError(
                f"`{name}` and `{group_name}` are mutually exclusive: got {name}={peer} and "
                f"{group_name}={group_peer}. Pass the global rank as `{name}` or the rank in "
                f"`group` as `{group_name}`, not both."
            )
        return group, int(group_peer)
    if peer is None:
        raise PeerArgumentError(
            f"Exactly one of `{name}` and `{group_name}` must be provided: the global rank of "
            f"the other process as `{name}` (e.g. {name}=1), or its rank in `group` as "
            f"`{group_name}`."
        )
    if group is None:
        return group_of(None), int(peer)
    return group, dist.get_group_rank(group, int(peer))


def int_generator(seed: int) -> int:
    """The next tag of a ``pseudo_rand=True`` transfer (upstream's chain, so the same tags).

    Examples:
        >>> tags = [10]
        >>> for _ in range(3):
        ...     tags.append(int_generator(tags[-1]))
        >>> tags[1:]
        [6756, 1717, 4410]
    """
    rng = np.random.default_rng(seed)
    return int.from_bytes(rng.bytes(8), "big") % 10_000


@functools.lru_cache(maxsize=64)
def _chain(init_tag: int, n: int) -> tuple[int, ...]:
    tags, tag = [], init_tag - 1
    for _ in range(n):
        tag = int_generator(tag + 1)
        tags.append(tag)
    return tuple(tags)


def leaf_tags(init_tag: int, n: int, pseudo_rand: bool) -> tuple[int, ...]:
    """The tags of the ``n`` leaf messages of a transfer (as upstream numbers them).

    Examples:
        >>> leaf_tags(5, 3, False)
        (5, 6, 7)
        >>> leaf_tags(0, 2, True) == leaf_tags(0, 3, True)[:2]
        True
    """
    if not pseudo_rand:
        return tuple(range(init_tag, init_tag + n))
    return _chain(init_tag, n)


def control_tag(init_tag: int, kind: int) -> int:
    """The tag of the package's own message ``kind`` for a transfer started at ``init_tag``.

    Examples:
        >>> control_tag(0, CTRL) == 2**30, control_tag(1, CTRL) - control_tag(0, CTRL)
        (True, 16)
    """
    return CONTROL_BASE + ((init_tag % (1 << 24)) << 4) + kind


def _seconds(timeout: Timeout) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(
            f"timeout must be a positive number of seconds or a timedelta, got {timeout!r}. "
            "Pass None to use the process group's timeout."
        )
    return seconds


class Deadline:
    """The end of a call's ``timeout`` (None: each wait uses the process group's timeout)."""

    def __init__(self, timeout: Timeout) -> None:
        self.seconds = _seconds(timeout)
        self.end = None if self.seconds is None else time.monotonic() + self.seconds

    def left(self) -> datetime.timedelta | None:
        """The time left, for ``Work.wait`` (at least a millisecond: gloo then reports)."""
        if self.end is None:
            return None
        return datetime.timedelta(seconds=max(self.end - time.monotonic(), 1e-3))

    def wait(self, work: Any, doing: Callable[[], str] | str) -> None:
        """Wait for ``work``; gloo's timeout and lost-peer errors raised as the package's.

        ``doing`` says what the work was (a string, or a function giving it, called only to
        write an error message).
        """
        try:
            left = self.left()
            if left is None:
                work.wait()
            else:
                work.wait(left)
        except RuntimeError as err:
            raise self.translate(err, doing) from err

    def translate(self, err: BaseException, doing: Callable[[], str] | str) -> BaseException:
        """The error to raise for gloo's ``err`` (see :func:`translate`)."""
        return translate(err, doing, self.seconds)


def translate(
    err: BaseException, doing: Callable[[], str] | str, seconds: float | None = None
) -> BaseException:
    """The error to raise for gloo's ``err``: a :class:`~tensordict.errors.PeerLostError` or a
    :class:`~tensordict.errors.DistributedTimeoutError` that says what to do, else ``err``.

    Examples:
        >>> err = translate(RuntimeError("Connection closed by peer [::1]:5"), "recv from rank 1")
        >>> type(err).__name__, str(err)[:42]
        ('PeerLostError', 'recv from rank 1: the other rank went away')
    """
    if isinstance(err, (DistributedTimeoutError, PeerLostError)):
        return err
    text = str(err)
    low = text.lower()
    what = doing() if callable(doing) else doing
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    if any(word in low for word in _PEER_LOST):
        return PeerLostError(
            f"{what}: the other rank went away (its process ended, or it destroyed its "
            "process group); the tensordict may hold part of the data. Check that rank's "
            f"log for its error; restart both ranks to go on. (gloo: {first})"
        )
    if any(word in low for word in _TIMED_OUT):
        limit = "the process group's timeout" if seconds is None else f"timeout={seconds:g} s"
        return DistributedTimeoutError(
            f"{what}: not done within {limit}. The other rank has not made the matching "
            "call (check its method, group and init_tag, and that it still runs), or it is "
            "slower than that: pass a larger timeout=. After a timeout, gloo closes the "
            "connection between the two ranks: create a new process group to talk again. "
            f"(gloo: {first})"
        )
    return err


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Within the block, gloo's errors raised while posting the messages of ``what`` (a
    connection already closed, an earlier timeout) come out as :func:`translate` says.

    Examples:
        >>> with translated("recv"):
        ...     pass
    """
    try:
        yield
    except RuntimeError as err:
        new = translate(err, what)
        if new is err:
            raise
        raise new from err


def pack_object(obj: Any) -> torch.Tensor:
    """``obj`` pickled, as a ``uint8`` tensor (metadata travels this way; see
    :func:`unpack_object`)."""
    data = bytearray(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    return torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def unpack_object(data: torch.Tensor) -> Any:
    """The object :func:`pack_object` packed (unpickled: use only with ranks you trust).

    Examples:
        >>> unpack_object(pack_object({"a": [1, 2]}))
        {'a': [1, 2]}
    """
    return pickle.loads(data.numpy().tobytes())
