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
import time
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["Watchdog", "report_start"]

_MSG = struct.Struct("<q")
#: this worker's connection to the current job's watchdog: (address, socket, worker id)
_connection: list[Any] = []


def report_start(address: str | None, k: int) -> int | None:
    """In a worker: announce that chunk ``k`` starts here. Returns this worker's id in the job."""
    if address is None:
        return None
    if not _connection or _connection[0] != address:
        if _connection:  # a new job: the previous one's watchdog is gone
            _connection[1].close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(address)
        sock.sendall(_MSG.pack(os.getpid()))
        wid = _MSG.unpack(_recv_exact(sock, _MSG.size))[0]
        _connection[:] = [address, sock, wid]
    _connection[1].sendall(_MSG.pack(k))
    return int(_connection[2])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("the parent process closed the watchdog connection")
        data += part
    return data


class _Peer:
    __slots__ = ("buf", "id", "pid", "process", "running", "sock")

    def __init__(self, sock: socket.socket, wid: int) -> None:
        self.sock = sock
        self.id = wid
        self.pid: int | None = None
        self.process: Any = None  # the pool's own Process object for this pid, when known
        self.buf = b""
        self.running: set[int] = set()


class Watchdog:
    """The parent's end: which chunk runs in which process, and which processes have died."""

    def __init__(self, find_process: Callable[[int], Any] | None = None) -> None:
        #: finds the pool's Process object for a worker pid (for its exit status)
        self.find_process = find_process
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
        #: [chunks still running, pid, exit status] of workers whose connection closed
        self.dead: list[list[Any]] = []

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
                peer.process = self.find_process(value) if self.find_process else None
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
        # the connection closes while the process exits: give it a moment to become a zombie,
        # whose status can be read before the pool reaps it
        self.dead.append([peer.running, peer.pid, self._status(peer, wait=0.05)])

    def _status(self, peer: _Peer, wait: float = 0.0) -> int | None:
        """The exit status of a dead peer: from the pool's Process object when there is one (the
        pool may reap the process before we can; the status stays on that object, and reading it
        there never steals it from the pool), else straight from the kernel."""
        deadline = time.monotonic() + wait
        while peer.process is not None:
            with contextlib.suppress(ValueError, OSError):
                code = peer.process.exitcode
                if code is not None:
                    return int(code)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.001)
        return _exit_status(peer.pid, wait)

    def lost(self) -> tuple[int, int | None, int | None] | None:
        """(chunk, pid, exit status) of a chunk whose worker died, if any."""
        for entry in self.dead:
            running, pid, status = entry
            if running:
                if status is None:
                    status = entry[2] = _exit_status(pid)
                return min(running), pid, status
        return None

    def close(self) -> None:
        self.selector.close()
        for peer in self.peers.values():
            peer.sock.close()
        self.peers.clear()
        self.listener.close()


def _exit_status(pid: int | None, wait: float = 0.0) -> int | None:
    """The exit code (negative: signal) of a child that has exited and not been reaped yet,
    polling for up to ``wait`` seconds while it finishes exiting."""
    if pid is None:
        return None
    deadline = time.monotonic() + wait
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except (ChildProcessError, OSError):
            return None
        if info is not None:
            return int(info.si_status) if info.si_code == os.CLD_EXITED else -int(info.si_status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.001)
