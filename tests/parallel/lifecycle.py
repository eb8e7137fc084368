"""Driving ``lifecycle_harness`` from the tests: start it, read its lines, wait for pids to go.

No sleeps: every wait is on an event (a line, a process exit) with a generous deadline, so that
the tests hold on a loaded machine and fail (instead of hanging) when the event never comes.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import subprocess
import sys
import threading
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: deadline for anything that must happen (process start-up imports torch; the machine is shared)
DEADLINE = float(os.environ.get("TD_TEST_DEADLINE", "120"))


class Harness:
    """``python -m tests.parallel.lifecycle_harness SCENARIO METHOD`` in a subprocess."""

    def __init__(self, scenario: str, method: str, stderr_path: str) -> None:
        self.stderr_path = stderr_path
        self.stderr = open(stderr_path, "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.parallel.lifecycle_harness", scenario, method],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            cwd=ROOT,
            # this tree's tensordict (src/) and tests, not the one the venv has installed
            env={**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.workers: list[int] = []
        #: every descendant seen, killed at close() if still there (when a test failed); psutil
        #: checks that a pid was not reused before it signals it
        self.seen: dict[int, psutil.Process] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def next_line(self, timeout: float = DEADLINE) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the harness within {timeout} s") from None
        if line is None:
            raise AssertionError(f"the harness ended early:\n{self.errors()}")
        return line

    def expect(self, word: str, running: int = 0) -> None:
        """Read until ``word`` and ``running`` lines ``running <pid>`` have come (any order)."""
        seen = False
        deadline = time.monotonic() + DEADLINE
        while not seen or len(self.workers) < running:
            self.snapshot()
            line = self.next_line(max(0.0, deadline - time.monotonic()))
            if line.startswith("running "):
                self.workers.append(int(line.split()[1]))
                self.snapshot()
            elif line == word:
                seen = True

    def snapshot(self) -> None:
        """Remember the harness's descendants (to clean up after a failed test)."""
        with contextlib.suppress(psutil.NoSuchProcess):
            self.seen.update((p.pid, p) for p in psutil.Process(self.proc.pid).children(True))

    def send(self, text: str = "\n") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def errors(self) -> str:
        self.stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()[-3000:]

    def close(self) -> None:
        self.snapshot()
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        for p in self.seen.values():  # only left when a test failed
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        self.stderr.close()


def wait_gone(pids: list[int], timeout: float = DEADLINE) -> list[int]:
    """Wait until every process in ``pids`` has exited; returns those still running."""
    fds = {}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            fds[os.pidfd_open(pid)] = pid
    deadline = time.monotonic() + timeout
    try:
        while fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select(list(fds), [], [], remaining)
            for fd in ready:
                os.close(fd)
                fds.pop(fd)
        return sorted(fds.values())
    finally:
        for fd in fds:
            os.close(fd)
