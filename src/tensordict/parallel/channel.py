"""A message channel between the parent and one worker: pickles in, pickles out, big data by memfd.

Each message is ``header | pickle`` on a Unix stream socket. Objects are pickled with protocol 5:
tensors (alone or in a tensordict) present their bytes as :class:`pickle.PickleBuffer`
(``core.pickling``). Buffers smaller than :data:`OUT_OF_BAND_BYTES` stay in the pickle; larger
ones are copied once into an
anonymous memory file (``memfd``) whose descriptor travels with the message (``SCM_RIGHTS``). The
receiver maps it and builds the tensors on the mapping: one copy per large result, no named
shared-memory segment to leak, and the memory is freed as soon as the last tensor using it is.
"""

from __future__ import annotations

import array
import copyreg
import io
import mmap
import os
import pickle
import socket
import struct
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import torch

from tensordict.core.pickling import _packable, pack_tensor, unpack_tensor

__all__ = ["OUT_OF_BAND_BYTES", "Channel", "ChannelClosed"]

#: buffers at least this large travel out of band, through shared memory
OUT_OF_BAND_BYTES = 64 * 1024
# payload length, number of out-of-band buffers
_HEADER = struct.Struct("<QI")
_LEN = struct.Struct("<Q")
_MAX_FDS = 64
_ANC_SIZE = socket.CMSG_SPACE(_MAX_FDS * 4)
_READ_SIZE = 1 << 18
#: how long a receiver polls before it blocks. A blocked receiver must be woken by the sender,
#: which costs ~30 us per message on a VM (an inter-processor interrupt); polling for a short while
#: keeps a busy pipeline of small chunks free of wakeups, and yields the CPU to other work.
SPIN_SECONDS = 100e-6


class ChannelClosed(EOFError):
    """The other end of the channel closed (normally because that process exited)."""


_ALIGN = 64


def _layout(lengths: list[int]) -> tuple[list[int], int]:
    """Offsets of the buffers in the memfd, each aligned to 64 bytes (torch kernels like it)."""
    offsets, end = [], 0
    for n in lengths:
        offsets.append(end)
        end += (n + _ALIGN - 1) // _ALIGN * _ALIGN
    return offsets, end


def _pack_buffers(buffers: list[pickle.PickleBuffer]) -> tuple[int, bytes]:
    """Copy buffers into one memfd; returns (fd, lengths table)."""
    views = [b.raw() for b in buffers]
    lengths = [v.nbytes for v in views]
    offsets, total = _layout(lengths)
    fd = os.memfd_create("tensordict-chunk", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, total)
        for v, offset in zip(views, offsets):
            written = 0
            while written < v.nbytes:
                written += os.pwrite(fd, v[written:], offset + written)
    except BaseException:
        os.close(fd)
        raise
    return fd, b"".join(_LEN.pack(n) for n in lengths)


def _unpack_buffers(fd: int, table: bytes, count: int) -> list[memoryview]:
    lengths = [_LEN.unpack_from(table, i * _LEN.size)[0] for i in range(count)]
    offsets, total = _layout(lengths)
    try:
        if total == 0:
            return [memoryview(bytearray()) for _ in lengths]
        mm = mmap.mmap(fd, total, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    finally:
        os.close(fd)
    view = memoryview(mm)
    return [view[o : o + n] for o, n in zip(offsets, lengths)]


def _reduce_tensor(t: torch.Tensor) -> Any:
    if _packable(t) or (t.__class__ is torch.Tensor and t.untyped_storage().is_shared()):
        return (unpack_tensor, pack_tensor(t, 5))
    return t.__reduce_ex__(5)


class _Pickler(pickle.Pickler):
    """Plain tensors (results of ``fn``, chunk indices) travel as their bytes, like a tensordict's
    leaves: torch's own pickling costs ~0.1 ms and copies views' whole storage."""

    dispatch_table = {**copyreg.dispatch_table, torch.Tensor: _reduce_tensor}


class Channel:
    """One end of a parent <-> worker connection.

    Args:
        sock: a connected ``AF_UNIX`` stream socket.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()
        self._pos = 0
        self._fds: deque[int] = deque()
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    # ------------------------------------------------------------------ sending
    def send(self, obj: Any) -> None:
        """Send one object (blocking until the kernel takes it)."""
        oob: list[pickle.PickleBuffer] = []

        def keep_inline(buf: pickle.PickleBuffer) -> bool:
            if buf.raw().nbytes >= OUT_OF_BAND_BYTES:
                oob.append(buf)
                return False
            return True

        f = io.BytesIO()
        _Pickler(f, protocol=5, buffer_callback=keep_inline).dump(obj)
        body = f.getbuffer()
        if not oob:
            self.sock.sendall(_HEADER.pack(len(body), 0) + body)
            return
        fd, table = _pack_buffers(oob)
        try:
            header = _HEADER.pack(len(body) + len(table), len(oob))
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
            sent = self.sock.sendmsg([header, body, table], anc)
        finally:
            os.close(fd)
        rest = header + body + table
        if sent < len(rest):
            self.sock.sendall(rest[sent:])

    # ------------------------------------------------------------------ receiving
    def fill(self, block: bool = True) -> bool:
        """Read what is available (one system call). Returns False at end of stream.

        With ``block=False``, raises :class:`BlockingIOError` when nothing is available.
        """
        flags = 0 if block else socket.MSG_DONTWAIT
        data, anc, _flags, _addr = self.sock.recvmsg(_READ_SIZE, _ANC_SIZE, flags)
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
        """Decode every complete message received so far."""
        buf = self._buf
        while True:
            pos = self._pos
            if len(buf) - pos < _HEADER.size:
                break
            length, n_oob = _HEADER.unpack_from(buf, pos)
            end = pos + _HEADER.size + length
            if len(buf) < end:
                break
            start = pos + _HEADER.size
            self._pos = end
            if n_oob:
                table_start = end - n_oob * _LEN.size
                table = bytes(buf[table_start:end])
                buffers = _unpack_buffers(self._fds.popleft(), table, n_oob)
                with memoryview(buf) as view:
                    obj = pickle.loads(view[start:table_start], buffers=buffers)
            else:
                with memoryview(buf) as view:
                    obj = pickle.loads(view[start:end])
            yield obj
        if self._pos > _READ_SIZE:
            del buf[: self._pos]
            self._pos = 0

    def recv(self) -> Any:
        """Wait until one message arrives and return it (polling briefly, then blocking).

        Raises:
            ChannelClosed: the other end closed before a whole message arrived.
        """
        deadline = 0.0
        while True:
            for msg in self.messages():
                return msg
            try:
                more = self.fill(block=False)
            except BlockingIOError:
                now = time.perf_counter()
                if not deadline:
                    deadline = now + SPIN_SECONDS
                if now < deadline:
                    os.sched_yield()
                    continue
                more = self.fill()
            if not more:
                raise ChannelClosed("the other end of the channel closed")

    def close(self) -> None:
        self.closed = True
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        self.sock.close()
