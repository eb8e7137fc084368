"""Noticing dead workers of a pool we did not create (``multiprocessing.Pool`` and friends).

The stdlib pool replaces a killed worker silently and the task it held never completes, so a plain
``imap`` waits forever. Here, every worker connects once to a Unix socket the parent listens on (an
abstract address, nothing on disk), says its pid, and reports each chunk it starts. The kernel
closes that connection when the worker dies, however it dies: the parent sees end-of-stream at
once. A chunk whose worker is gone and whose result has not arrived within a short grace period
(the result may still be in the pool's own pipe) is lost: the caller raises
:class:`~tensordict.errors.WorkerDiedError` naming it, the pid and the exit status.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import struct
import uuid

__all__ = ["Watchdog", "report_start"]

_MSG = struct.Struct("<q")
_connections: dict[str, tuple[socket.socket, int]] = {}


def report_start(address: str | None, k: int) -> int | None:
    """In a worker: announce that chunk ``k`` starts here. Returns this worker's id in the job."""
    if address is None:
        return None
    entry = _connections.get(address)
    if entry is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(address)
        sock.sendall(_MSG.pack(os.getpid()))
        wid = _MSG.unpack(_recv_exact(sock, _MSG.size))[0]
        entry = (sock, wid)
        _connections[address] = entry
    entry[0].sendall(_MSG.pack(k))
    return entry[1]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("the parent process closed the watchdog connection")
        data += part
    return data


class _Peer:
    __slots__ = ("buf", "id", "pid", "running", "sock")

    def __init__(self, sock: socket.socket, wid: int) -> None:
        self.sock = sock
        self.id = wid
        self.pid: int | None = None
        self.buf = b""
        self.running: set[int] = set()


class Watchdog:
    """The parent's end: which chunk runs in which process, and which processes have died."""

    def __init__(self) -> None:
        self.address = f"\0tensordict-{os.getpid()}-{uuid.uuid4().hex}"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.address)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.peers: dict[int, _Peer] = {}
        self.next_id = 0
        #: chunks whose results arrived (their start reports may still be in the socket)
        self.done: set[int] = set()
        #: (chunks still running, pid, exit status) of workers whose connection closed
        self.dead: list[tuple[set[int], int | None, int | None]] = []

    def fileno(self) -> int:
        """A descriptor that becomes readable when :meth:`poll` has something to do."""
        return self.selector.fileno()

    def poll(self) -> None:
        """Handle new connections, chunk reports and closed connections (never blocks)."""
        for key, _ in self.selector.select(0):
            if key.fileobj is self.listener:
                self._accept()
            else:
                self._read(key.data)

    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError):
            conn, _ = self.listener.accept()
            conn.setblocking(True)
            peer = _Peer(conn, self.next_id)
            self.next_id += 1
            self.peers[conn.fileno()] = peer
            self.selector.register(conn, selectors.EVENT_READ, peer)

    def _read(self, peer: _Peer) -> None:
        try:
            data = peer.sock.recv(4096)
        except OSError:
            data = b""
        if not data:
            self._closed(peer)
            return
        peer.buf += data
        while len(peer.buf) >= _MSG.size:
            (value,) = _MSG.unpack_from(peer.buf)
            peer.buf = peer.buf[_MSG.size :]
            if peer.pid is None:
                peer.pid = value
                peer.sock.sendall(_MSG.pack(peer.id))
            elif value not in self.done:  # a result can overtake its own start report
                peer.running.add(value)

    def finished(self, k: int) -> None:
        """A chunk's result arrived."""
        self.done.add(k)
        for peer in self.peers.values():
            peer.running.discard(k)
        for running, _pid, _status in self.dead:
            running.discard(k)

    def where(self, k: int) -> str:
        for peer in self.peers.values():
            if k in peer.running:
                return f"worker pid {peer.pid}"
        return "a pool worker"

    def _closed(self, peer: _Peer) -> None:
        self.selector.unregister(peer.sock)
        self.peers.pop(peer.sock.fileno(), None)
        peer.sock.close()
        self.dead.append((peer.running, peer.pid, _exit_status(peer.pid)))

    def lost(self) -> tuple[int, int | None, int | None] | None:
        """(chunk, pid, exit status) of a chunk whose worker died, if any."""
        for running, pid, status in self.dead:
            if running:
                if status is None:
                    status = _exit_status(pid)
                return min(running), pid, status
        return None

    def close(self) -> None:
        self.selector.close()
        for peer in self.peers.values():
            peer.sock.close()
        self.peers.clear()
        self.listener.close()


def _exit_status(pid: int | None) -> int | None:
    """The exit code (negative: signal) of a child that has exited and not been reaped yet."""
    if pid is None:
        return None
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
    except (ChildProcessError, OSError):
        return None
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return int(info.si_status)
    return -int(info.si_status)
