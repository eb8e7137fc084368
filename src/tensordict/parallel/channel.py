"""A message channel between the parent and one worker: pickles in, pickles out, big data by shm.

Each message is ``header | pickle | buffer table`` on a Unix stream socket. Objects are pickled
with protocol 5: tensors (alone or in a tensordict) present their bytes as
:class:`pickle.PickleBuffer` (``core.serial.pickling``). Buffers smaller than
:data:`OUT_OF_BAND_BYTES` stay in the pickle; larger ones are copied once into a reusable
shared-memory segment (``shm.SegmentPool``), whose file descriptor travels once (``SCM_RIGHTS``).
The receiver builds the tensors on its mapping of the segment, which returns to the pool when they
are freed: one copy per large result, no named shared memory to leak (the segments are anonymous
memory files, gone with the last process using them).
"""

from __future__ import annotations

import array
import copyreg
import errno
import io
import math
import os
import pickle
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tensordict.core.dense import TensorDict
from tensordict.core.serial.pickling import (
    _DEVICES,
    _packable,
    pack_flat,
    pack_tensor,
    unpack_flat,
    unpack_tensor,
)
from tensordict.core.serial.upstream_pickle import _DTYPES, _NumpyLeaf
from tensordict.parallel.coalesce import BATCH_TAG, unpack_groups
from tensordict.parallel.shm import DATA_OFFSET, SegmentCache, SegmentPool, _Segment

__all__ = ["OUT_OF_BAND_BYTES", "Channel", "ChannelClosed"]

#: buffers at least this large travel out of band, through shared memory
OUT_OF_BAND_BYTES = 64 * 1024
#: at most this many buffer bytes travel inside one message (the rest out of band)
INLINE_BUDGET = 64 * 1024
# payload length (pickle + buffer table), out-of-band buffers, segment id, flags (_FD, _FLAT)
_HEADER = struct.Struct("<QIiI")
_LEN = struct.Struct("<Q")
#: header flags: a segment's descriptor travels with the message; the message is a flat result
#: whose body is its chunk number (``_K``), then its layout's pickle unless it repeats the last
_FD, _FLAT = 1, 2
_K = struct.Struct("<q")
_MAX_FDS = 64
_ANC_SIZE = socket.CMSG_SPACE(_MAX_FDS * 4)
_READ_SIZE = 1 << 18
# plain ints: the socket module's flags are enums, whose operators cost ~1 us per call
_DONTWAIT, _CTRUNC = int(socket.MSG_DONTWAIT), int(socket.MSG_CTRUNC)
#: how long a receiver polls before it blocks. A blocked receiver must be woken by the sender,
#: which costs ~30 us per message on a VM (an inter-processor interrupt); polling for a short while
#: catches a message that is about to arrive. The poll never calls ``sched_yield``: on a loaded
#: machine that hands the core to another process for a whole time slice (~1 ms measured, 2,600
#: tiny chunks/s), and a long spin burns the core the peer needs: it stays short.
SPIN_SECONDS = 20e-6
#: how long a receiver waits before it counts as idle (see :meth:`Channel.recv`)
IDLE_SECONDS = 0.02


#: the tag of an ``("ok", k, result)`` message whose result travels as ``pack_flat``'s layout,
#: with its leaves' bytes inline (a ``bytes`` object) or out of band (``None``)
_FLAT_OK = "ok:flat"
_FLAT_ALIGN = 16
_ITEMSIZE = {name: dtype.itemsize for name, dtype in _DTYPES.items()}


class ChannelClosed(EOFError):
    """The other end of the channel closed (normally because that process exited)."""


_ALIGN = 64


def _layout(lengths: list[int]) -> tuple[list[int], int]:
    """Offsets of the buffers in a segment, each aligned to 64 bytes (torch kernels like it)."""
    offsets, end = [], 0
    for n in lengths:
        offsets.append(end)
        end += (n + _ALIGN - 1) // _ALIGN * _ALIGN
    return offsets, end


def _reduce_tensor(t: torch.Tensor) -> Any:
    if _packable(t) or (t.__class__ is torch.Tensor and t.untyped_storage().is_shared()):
        return (unpack_tensor, pack_tensor(t, 5))
    return t.__reduce_ex__(5)


def _reduce_leaf(leaf: _NumpyLeaf) -> Any:
    return _reduce_tensor(leaf.tensor)


class _Pickler(pickle.Pickler):
    """Plain tensors (results of ``fn``, chunk indices, a tensordict's leaves) travel as their
    bytes: torch's own pickling costs ~0.1 ms and copies views' whole storage."""

    dispatch_table = {
        **copyreg.dispatch_table,
        torch.Tensor: _reduce_tensor,
        _NumpyLeaf: _reduce_leaf,
    }


def dumps(obj: Any) -> bytes:
    """Pickle with the channel's tensor packing, everything in band (``pickle.loads`` reads it)."""
    f = io.BytesIO()
    _Pickler(f, protocol=5).dump(obj)
    return f.getvalue()


def _unpack_flat_inline(layout: tuple[Any, ...], data: bytes) -> Any:
    """A flat result whose leaves came inline: one writable copy of their bytes, shared."""
    buf = memoryview(bytearray(data))
    buffers, offset = [], 0
    for name, shape in zip(layout[4], layout[5]):
        n = math.prod(shape) * _ITEMSIZE[name]
        buffers.append(buf[offset : offset + n])
        offset += -(-n // _FLAT_ALIGN) * _FLAT_ALIGN
    return unpack_flat(layout, buffers)


class _FlatLayout:
    """A flat result's layout (``pack_flat``) as a receiver reuses it while it repeats: the
    dtypes, sizes and buffer offsets looked up once, not per result."""

    __slots__ = ("batch_size", "device", "leaves", "locked", "spans", "total")

    def __init__(self, layout: tuple[Any, ...], lengths: list[int]) -> None:
        batch_size, self.locked, where, keys, dtypes, shapes = layout
        self.batch_size = torch.Size(batch_size)
        self.device = None if where is None else _DEVICES.get(where) or torch.device(where)
        self.leaves = [
            (key, _DTYPES[name], tuple(shape), len(shape) == 1)
            for key, name, shape in zip(keys, dtypes, shapes)
        ]
        offsets, _ = _layout(lengths)
        #: (offset, length) of each buffer in the segment
        self.spans = list(zip(offsets, lengths))
        self.total = sum(lengths)

    def build(self, buffers: list[Any]) -> Any:
        """The tensordict ``unpack_flat`` builds, on ``buffers``."""
        source: dict[str, torch.Tensor] = {}
        for (key, dtype, shape, flat), buf in zip(self.leaves, buffers):
            if not len(buf):
                source[key] = torch.empty(shape, dtype=dtype)
                continue
            t = torch.frombuffer(buf, dtype=dtype)
            source[key] = t if flat else t.view(shape)
        return TensorDict._new_unsafe(source, self.batch_size, self.device, lock=self.locked)


class _Repeat:
    """A flat layout a channel sent through a segment (``_sent_flat``), as the tensordict it
    came from shows it: the results of a stream mostly repeat it, and checking that one does
    costs a third of building its layout (``pack_flat``) and comparing the two, right after
    ``fn`` has streamed its chunk through the caches. ``leaves`` is None when a leaf does not
    take ``pack_flat``'s NumPy path (its results are then always packed in full).

    Examples:
        >>> td = TensorDict({"y": torch.zeros(4)}, [4])
        >>> repeat = _Repeat(("layout",), td)
        >>> repeat.leaves[0][0], repeat.leaves[0][2], repeat.batch_size
        ('y', (4,), torch.Size([4]))
    """

    __slots__ = ("batch_size", "device", "leaves", "locked", "sent")

    def __init__(self, sent: tuple[Any, ...], td: Any) -> None:
        self.sent = sent
        self.batch_size, self.locked, self.device = td._batch_size, td._is_locked, td._device
        self.leaves: list[tuple[str, Any, tuple[int, ...]]] | None = []
        for key, t in td._tensordict.items():
            try:
                array = t.numpy()
            except (TypeError, RuntimeError):
                self.leaves = None
                return
            self.leaves.append((key, array.dtype, array.shape))


class Channel:
    """One end of a parent <-> worker connection.

    Args:
        sock: a connected ``AF_UNIX`` stream socket.
        send_warm: segments this end may send into that the other end already maps.
        recv_warm: the other end's ``send_warm`` (the same mappings, in the same order).
    """

    def __init__(
        self,
        sock: socket.socket,
        send_warm: list[Any] = (),  # type: ignore[assignment]
        recv_warm: list[Any] = (),  # type: ignore[assignment]
    ) -> None:
        self.sock = sock
        self._buf = bytearray()
        self._pos = 0
        self._fds: deque[int] = deque()
        self._outbox: deque[list[Any]] = deque()
        self._pool = SegmentPool(send_warm)
        self._cache = SegmentCache(recv_warm)
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)
        self.closed = False
        #: the last flat layout sent through segments: (layout, its pickle, buffer lengths,
        #: offsets, total, table); and the receiver's ``_FlatLayout`` of the last one received
        self._sent_flat: tuple[Any, ...] | None = None
        self._recv_flat: _FlatLayout | None = None
        #: what a result must match to be sent with ``_sent_flat``'s layout without building it
        self._repeat: _Repeat | None = None
        #: bytes that travelled out of band in the last message received (result sizes)
        self.last_oob_bytes = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    # ------------------------------------------------------------------ sending
    def _encode(self, obj: Any, plain: bool) -> tuple[bytes, _Segment | None]:
        """The bytes of one message, and the segment whose descriptor must travel with it."""
        if not plain and obj.__class__ is tuple and len(obj) == 3 and obj[0] == "ok":
            repeat = self._repeat
            if repeat is not None and repeat.sent is self._sent_flat:
                msg = self._encode_repeat(repeat, obj[1], obj[2])
                if msg is not None:
                    return msg
            # a flat tensordict result: its layout as builtins, its leaves' bytes as they are
            # (2-3x cheaper both ways than pickling the tensordict)
            flat = pack_flat(obj[2])
            if flat is not None:
                msg = self._encode_flat(obj[1], *flat)
                sent = self._sent_flat
                if sent is not None and (repeat is None or repeat.sent is not sent):
                    self._repeat = _Repeat(sent, obj[2])
                return msg
        if plain:  # holds no tensors (task lists): the plain pickler is faster
            body: Any = pickle.dumps(obj, protocol=5)
            return _HEADER.pack(len(body), 0, -1, 0) + body, None
        oob: list[memoryview] = []
        inline = [0]

        def keep_inline(buf: pickle.PickleBuffer) -> bool:
            raw = buf.raw()
            # large buffers, and everything past an inline budget, go through shared memory:
            # messages stay small, so neither end ever waits long for the other to read
            if raw.nbytes >= OUT_OF_BAND_BYTES or inline[0] + raw.nbytes > INLINE_BUDGET:
                oob.append(raw)
                return False
            inline[0] += raw.nbytes
            return True

        f = io.BytesIO()
        _Pickler(f, protocol=5, buffer_callback=keep_inline).dump(obj)
        body = f.getbuffer()
        if not oob:
            return _HEADER.pack(len(body), 0, -1, 0) + body, None
        lengths = [v.nbytes for v in oob]
        offsets, total = _layout(lengths)
        seg = self._segment_with(oob, offsets, total)
        table = b"".join(_LEN.pack(n) for n in lengths)
        header = _HEADER.pack(len(body) + len(table), len(oob), seg.id, 0 if seg.sent else _FD)
        return b"".join((header, body, table)), (None if seg.sent else seg)

    def _encode_flat(
        self, k: Any, layout: tuple[Any, ...], buffers: list[memoryview]
    ) -> tuple[bytes, _Segment | None]:
        """A flat tensordict result (``pack_flat``): ~3x cheaper to encode and decode than the
        tensordict's pickle. Its leaves travel inline (16-byte aligned) when they hold fewer
        than :data:`OUT_OF_BAND_BYTES` in all, else together through one segment."""
        lengths = [b.nbytes for b in buffers]
        if sum(lengths) < OUT_OF_BAND_BYTES:
            parts: list[Any] = []
            for b in buffers:
                parts.append(b)
                if b.nbytes % _FLAT_ALIGN:
                    parts.append(bytes(_FLAT_ALIGN - b.nbytes % _FLAT_ALIGN))
            body = pickle.dumps((_FLAT_OK, k, layout, b"".join(parts)), protocol=5)
            return _HEADER.pack(len(body), 0, -1, 0) + body, None
        if k.__class__ is not int or not -(1 << 63) <= k < 1 << 63:
            seg = self._segment_with(buffers, *_layout(lengths))
            body = pickle.dumps((_FLAT_OK, k, layout, None), protocol=5)
            table = b"".join(_LEN.pack(n) for n in lengths)
            header = _HEADER.pack(len(body) + len(table), len(lengths), seg.id, not seg.sent)
            return b"".join((header, body, table)), (None if seg.sent else seg)
        # The layout of a stream of results mostly repeats (same keys, dtypes and shapes): it
        # travels once, and the next results that repeat it carry their chunk number only.
        # Messages reach the receiver in the order they were encoded (``send``, ``encode`` then
        # ``send_encoded``), so the receiver's last layout is the one this last encoded.
        sent = self._sent_flat
        if sent is not None and sent[0] == layout:
            _, pickled, _, offsets, total, table = sent
        else:
            pickled = pickle.dumps(layout, protocol=5)
            offsets, total = _layout(lengths)
            table = b"".join([_LEN.pack(n) for n in lengths])
            sent = (layout, pickled, lengths, offsets, total, table)
        return self._flat_in_segment(k, sent, buffers)

    def _flat_in_segment(
        self, k: int, sent: tuple[Any, ...], buffers: list[Any]
    ) -> tuple[bytes, _Segment | None]:
        """The message of flat result ``k`` whose leaves (``buffers``) go through a segment laid
        out as ``sent`` says: its chunk number, then the layout's pickle unless ``sent`` is the
        last layout sent (which ``sent`` becomes)."""
        _, pickled, lengths, offsets, total, table = sent
        seg = self._segment_with(buffers, offsets, total)
        body = _K.pack(k) if sent is self._sent_flat else _K.pack(k) + pickled
        flags = _FLAT | (0 if seg.sent else _FD)
        header = _HEADER.pack(len(body) + len(table), len(lengths), seg.id, flags)
        self._sent_flat = sent
        return b"".join((header, body, table)), (None if seg.sent else seg)

    def _segment_with(self, buffers: list[Any], offsets: list[int], total: int) -> _Segment:
        """A free segment holding ``buffers`` at ``offsets`` (``_layout``) after its flag."""
        seg = self._pool.acquire(total)
        view = seg.view
        for b, offset in zip(buffers, offsets):
            start = DATA_OFFSET + offset
            view[start : start + b.nbytes] = b
        return seg

    def _encode_repeat(
        self, repeat: _Repeat, k: Any, td: Any
    ) -> tuple[bytes, _Segment | None] | None:
        """A flat result whose layout repeats the last one sent through a segment
        (:class:`_Repeat`), encoded as ``_encode_flat`` would, without building its layout;
        None when it does not repeat it exactly."""
        leaves = repeat.leaves
        if leaves is None or k.__class__ is not int or td.__class__ is not TensorDict:
            return None
        if (
            td._batch_size != repeat.batch_size
            or td._is_locked is not repeat.locked
            or td._device != repeat.device
            or td._names is not None
            or td._is_memmap
            or getattr(td, "_consolidated", None) is not None
            or len(td._tensordict) != len(leaves)
            or not -(1 << 63) <= k < 1 << 63
        ):
            return None
        buffers = []
        for (key, dtype, shape), (name, t) in zip(leaves, td._tensordict.items()):
            if name != key or t.__class__ is not torch.Tensor:
                return None
            try:  # one call checks what pack_flat's leaves need (CPU, strided, no grad)
                array = t.numpy()
            except (TypeError, RuntimeError):
                return None
            if array.dtype is not dtype or array.shape != shape or not array.flags.c_contiguous:
                return None
            buffers.append(array.data.cast("B"))
        return self._flat_in_segment(k, repeat.sent, buffers)

    def _write(self, view: memoryview, seg: _Segment | None, flags: int) -> int:
        if seg is None:
            return self.sock.send(view, flags)
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [seg.fd]))]
        sent = self.sock.sendmsg([view], anc, flags)
        seg.delivered()  # the receiver has its own descriptor now
        return sent

    def send(self, obj: Any, *, plain: bool = False, block: bool = True) -> None:
        """Send one object.

        With ``block=False`` the message is queued when the socket is full, and :meth:`flush`
        writes the rest later: the parent never waits on a worker, so a worker that is itself
        blocked sending a result can never deadlock with it. ``plain=True`` for objects that
        hold no tensors.
        """
        data, seg = self._encode(obj, plain)
        if not self._outbox:
            view = memoryview(data)
            if block:
                sent = self._write(view, seg, 0)
                while sent < len(view):
                    sent += self.sock.send(view[sent:])
                return
            try:  # the common case: the socket takes it all at once
                sent = self._write(view, seg, _DONTWAIT)
            except BlockingIOError:
                sent = 0
            else:
                seg = None  # its descriptor went with the first byte
            if sent == len(view):
                return
            self._outbox.append([view[sent:], seg])
            return
        self._outbox.append([memoryview(data), seg])
        self.flush()

    def encode(self, obj: Any) -> tuple[bytes, _Segment | None]:
        """One message's bytes (large buffers copied into a segment now), to send later with
        :meth:`send_encoded`: the object itself need not be kept."""
        return self._encode(obj, False)

    def send_encoded(self, messages: list[tuple[bytes, _Segment | None]]) -> None:
        """Send messages made by :meth:`encode`, in order, in one system call (blocking): the
        descriptors of new segments travel with the first byte, in the order the receiver reads
        them."""
        if not messages:
            return
        data = b"".join([m[0] for m in messages])
        segs = [m[1] for m in messages if m[1] is not None]
        while not self.flush():  # bytes queued by a non-blocking send go first
            select.select([], [self.sock], [])
        view = memoryview(data)
        if segs:
            fds = array.array("i", [seg.fd for seg in segs])
            sent = self.sock.sendmsg([view], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            for seg in segs:
                seg.delivered()
        else:
            sent = self.sock.send(view)
        while sent < len(view):
            sent += self.sock.send(view[sent:])

    def send_plain(self, obj: Any, *, block: bool = True) -> None:
        """Send an object that holds no tensors (task lists)."""
        self.send(obj, plain=True, block=block)

    @property
    def pending(self) -> bool:
        """Whether queued bytes wait for the socket to accept them."""
        return bool(self._outbox)

    def flush(self) -> bool:
        """Write queued messages without blocking; True once nothing is left."""
        while self._outbox:
            entry = self._outbox[0]
            view, seg = entry
            try:
                sent = self._write(view, seg, _DONTWAIT)
            except BlockingIOError:
                return False
            entry[1] = None
            if sent < len(view):
                entry[0] = view[sent:]
                continue
            self._outbox.popleft()
        return True

    # ------------------------------------------------------------------ receiving
    def fill(self, block: bool = True) -> bool:
        """Read what is available (one system call). Returns False at end of stream.

        With ``block=False``, raises :class:`BlockingIOError` when nothing is available. A peer
        that died with messages it never read resets the connection: that too is end of stream.
        """
        flags = 0 if block else _DONTWAIT
        try:
            data, anc, msg_flags, _addr = self.sock.recvmsg(_READ_SIZE, _ANC_SIZE, flags)
        except ConnectionResetError:
            data, anc, msg_flags = b"", [], 0
        if msg_flags & _CTRUNC:
            raise OSError(
                errno.EMFILE,
                "a shared-memory descriptor from a worker was dropped by the kernel (too many open "
                "files?): raise the limit (ulimit -n) or keep fewer results alive",
            )
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                self._fds.extend(fds)
        if not data:
            self.closed = True
            return False
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data
        return True

    def messages(self) -> Iterator[Any]:
        """Decode every complete message received so far.

        Several results sent at once (``coalesce``) come as one ``(BATCH_TAG, ks, results)``.
        """
        buf = self._buf
        while True:
            pos = self._pos
            if len(buf) - pos < _HEADER.size:
                break
            length, n_oob, seg_id, flags = _HEADER.unpack_from(buf, pos)
            start = pos + _HEADER.size
            end = start + length
            if len(buf) < end:
                break
            self._pos = end
            self.last_oob_bytes = 0
            if n_oob:
                if flags & _FD:
                    self._cache.add(seg_id, self._fds.popleft())
                if flags & _FLAT:  # a flat result (``_encode_flat``)
                    k = _K.unpack_from(buf, start)[0]
                    yield ("ok", k, self._flat_result(buf, seg_id, start, n_oob))
                    continue
                table_at = end - n_oob * _LEN.size
                lengths = [_LEN.unpack_from(buf, table_at + i * _LEN.size)[0] for i in range(n_oob)]
                offsets, _ = _layout(lengths)
                buffers = self._cache.buffers(seg_id, list(zip(offsets, lengths)))
                self.last_oob_bytes = sum(lengths)
                with memoryview(buf) as view:
                    obj = pickle.loads(view[start:table_at], buffers=buffers)
                if obj.__class__ is tuple and obj[0] == _FLAT_OK:
                    obj = ("ok", obj[1], unpack_flat(obj[2], buffers))
            else:
                with memoryview(buf) as view:
                    obj = pickle.loads(view[start:end])
                if obj.__class__ is tuple:
                    if obj[0] == _FLAT_OK:
                        obj = ("ok", obj[1], _unpack_flat_inline(obj[2], obj[3]))
                    elif obj[0] == BATCH_TAG:  # several results of tiny chunks (``coalesce``)
                        obj = (BATCH_TAG, obj[1], unpack_groups(obj[2]))
            yield obj
        if self._pos > _READ_SIZE:
            del buf[: self._pos]
            self._pos = 0

    def _flat_result(self, buf: bytearray, seg_id: int, start: int, n_oob: int) -> Any:
        """The tensordict of a flat result message (its body at ``start``: the chunk number,
        then the layout's pickle unless it repeats the last one), built on the segment."""
        table_at = self._pos - n_oob * _LEN.size
        flat = self._recv_flat
        if table_at > start + _K.size:  # a new layout
            lengths = [_LEN.unpack_from(buf, table_at + i * _LEN.size)[0] for i in range(n_oob)]
            with memoryview(buf) as view:
                layout = pickle.loads(view[start + _K.size : table_at])
            flat = self._recv_flat = _FlatLayout(layout, lengths)
        elif flat is None:
            raise RuntimeError("a flat result repeats a layout this channel never received")
        self.last_oob_bytes = flat.total
        return flat.build(self._cache.buffers(seg_id, flat.spans))

    def recv(
        self, on_idle: Callable[[], None] | None = None, idle_seconds: float = IDLE_SECONDS
    ) -> Any:
        """Wait until one message arrives and return it (polling briefly, then blocking).

        ``on_idle`` runs once if nothing arrived for ``idle_seconds`` (0: as soon as polling
        ends): a peer that keeps us busy never triggers it, one that makes us wait does.

        Raises:
            ChannelClosed: the other end closed before a whole message arrived.
        """
        deadline = 0.0
        while True:
            for msg in self.messages():
                return msg
            if not self._poll.poll(0):
                now = time.perf_counter()
                if not deadline:
                    deadline = now + SPIN_SECONDS
                if now < deadline:
                    continue
                if on_idle is not None:
                    if idle_seconds <= 0 or not self._poll.poll(int(idle_seconds * 1000)):
                        on_idle()
                    on_idle = None
                    continue  # a message may have arrived meanwhile
            if not self.fill():
                raise ChannelClosed("the other end of the channel closed")

    def recv_nowait(self) -> Any:
        """The next message if the whole of it has arrived, else None (never blocks).

        Raises:
            ChannelClosed: the other end closed.
        """
        for msg in self.messages():
            return msg
        while self._poll.poll(0):
            if not self.fill():
                raise ChannelClosed("the other end of the channel closed")
            for msg in self.messages():
                return msg
        return None

    def received_segments(self) -> list[Any]:
        """The mappings of every segment the other end sent into (for ``shm.STOCK``)."""
        return self._cache.mappings()

    def close(self) -> None:
        self.closed = True
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        self._outbox.clear()
        self._pool.close()
        self._cache.close()
        self.sock.close()
