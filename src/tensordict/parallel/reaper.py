"""Waiting for finished workers to exit, in the background, so that a call returns at once.

When every chunk of a call is done, the workers are told to stop (their channels close) and
have nothing left to do but exit. Exiting still takes a worker tens of milliseconds (the kernel
tears down an address space shared copy-on-write with this process), which a call used to wait
for. The :class:`Reaper` waits instead, in a daemon thread: it reaps each worker as it exits
(no zombie stays), kills one that has not exited by its deadline (e.g. ``fn`` left a non-daemon
thread running), and at interpreter exit finishes the job before ``multiprocessing`` joins its
children (``lifeline.close_at_exit``). Workers stopped early (an error, ``break``) are still
stopped and joined by the call itself.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from typing import Any

from tensordict.parallel.lifeline import close_at_exit

__all__ = ["reap_later", "wait_reaped"]

#: how often the thread looks for workers handed over while it waits
POLL_SECONDS = 0.05
#: how long it waits for a killed worker to be reaped (instant unless the machine is overloaded)
KILLED_SECONDS = 5.0


class Reaper:
    """Joins (and, past a deadline, kills) worker processes in a daemon thread."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # a forked child starts with no workers to reap and no thread (nor a lock it might hold)
        self._cond = threading.Condition()
        self._pending: list[tuple[Any, float]] = []
        self._thread: threading.Thread | None = None
        #: workers taken off _pending whose process the thread is closing (not reaped until done)
        self._closing = 0

    def adopt(self, workers: list[Any], grace: float) -> None:
        """Reap ``workers`` (``engine._Worker``) as they exit; kill those alive after ``grace``."""
        deadline = time.monotonic() + grace
        with self._cond:
            self._pending += [(w, deadline) for w in workers]
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tensordict-reaper", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        close_at_exit(self)

    def _run(self) -> None:
        try:
            self._loop()
        finally:  # an unexpected error too: a later adopt() starts a new thread
            with self._cond:
                if self._thread is threading.current_thread():
                    self._thread = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._pending:
                    self._cond.wait(1.0)
                if not self._pending:
                    self._thread = None  # idle (under the lock): a later adopt() starts one
                    return
                items = list(self._pending)
            done = self._poll(items)
            with self._cond:  # close() may have taken some meanwhile: those are its to close
                ours = [w for w in done if any(w is p for p, _ in self._pending)]
                self._pending = [item for item in self._pending if item[0] not in done]
                self._closing += len(ours)
            try:
                for w in ours:
                    w.close_process()
            finally:
                if ours:
                    with self._cond:
                        self._closing -= len(ours)
                        self._cond.notify_all()

    @staticmethod
    def _poll(items: list[tuple[Any, float]]) -> list[Any]:
        timeout = max(0.0, min(deadline for _, deadline in items) - time.monotonic())
        with contextlib.suppress(OSError, ValueError):
            select.select([w.exit_fd for w, _ in items], [], [], min(timeout, POLL_SECONDS))
        done = []
        now = time.monotonic()
        for w, deadline in items:
            try:
                if w.process.exitcode is not None:  # reaps it
                    done.append(w)
                elif now >= deadline:
                    with contextlib.suppress(OSError, AttributeError):
                        w.process.kill()
                    w.process.join(KILLED_SECONDS)
                    done.append(w)
            except ValueError:  # "process object is closed": close() reaped it meanwhile
                done.append(w)
        return done

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every worker handed over has been reaped; False if some remain."""
        deadline = time.monotonic() + timeout
        with self._cond:  # (reaped: off the list and its process closed)
            while (self._pending or self._closing) and time.monotonic() < deadline:
                self._cond.wait(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            return not (self._pending or self._closing)

    def close(self, abort: bool = True, grace: float = 0.5) -> None:
        """Reap every pending worker now: wait ``grace`` seconds, then kill what is left."""
        with self._cond:
            items, self._pending = self._pending, []
        deadline = time.monotonic() + grace
        for w, _ in items:
            with contextlib.suppress(ValueError):
                w.process.join(max(0.0, deadline - time.monotonic()))
                if w.process.is_alive():
                    with contextlib.suppress(OSError, AttributeError):
                        w.process.kill()
                    w.process.join(KILLED_SECONDS)
            w.close_process()


_REAPER = Reaper()


def reap_later(workers: list[Any], grace: float) -> None:
    """Hand over workers whose channels are closed: they are reaped as they exit."""
    _REAPER.adopt(workers, grace)


def wait_reaped(timeout: float = 10.0) -> bool:
    """Wait until the workers of finished calls have exited; False if some remain after
    ``timeout`` seconds. Benchmarks call it between timed runs, so that one run's workers
    exiting in the background do not slow the next run down.

    Examples:
        >>> wait_reaped(0.1)
        True
    """
    return _REAPER.wait_idle(timeout)
