"""Workers never outlive the process that started them, and starting one never loses a Ctrl-C.

Five guarantees, each for workers of pools ``map_iter`` creates:

- **Interpreter exit.** Open pools are closed (SIGTERM, then SIGKILL after 0.5 s) by a
  ``multiprocessing`` finaliser, which runs at exit *before* ``multiprocessing`` joins its
  children: a generator left open, whose ``fn`` ignores SIGTERM, cannot hang the exit.
- **Owner killed** (SIGKILL, OOM killer, ``os._exit``): a worker started from the owner's main
  thread asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``). The kernel sends
  it when the *thread* that forked the worker ends, so a worker started from any other thread (or
  by a fork server) watches its owner instead: a thread waits on a pidfd of the owner and kills
  the worker when it becomes readable (the owner exited). That thread needs the GIL to act, so a
  ``fn`` that holds the GIL in C code delays it until it lets go.
- **Ctrl-C while a worker is forked.** CPython runs ``fork`` hooks in Python (logging's, among
  others); a KeyboardInterrupt raised inside one is printed and dropped, and logging's lock stays
  held. :func:`sigint_held` keeps SIGINT from the Python handler while a worker starts and
  delivers it right after, once the worker is registered (so it is stopped with the others).
  A KeyboardInterrupt raised inside a weakref callback is dropped the same way, so no object of
  the machinery is freed with a callback pending: the pools to close at exit are held by weak
  references without one, and a worker's ``Process`` leaves multiprocessing's weak set of them
  (:func:`untrack_process`).
- **Ctrl-C while workers are stopped.** A second Ctrl-C (the first is often why they are
  being stopped) never leaves a worker running, which would keep the interpreter from exiting
  (``multiprocessing`` joins its children): the pool's close holds SIGINT back until every
  worker is stopped, and the iterator runs its closing again when one lands just before.
- **Nesting.** Workers are not daemonic, so ``fn`` may call ``map_iter`` itself, up to
  :data:`MAX_DEPTH` levels; inside a daemonic process (a ``multiprocessing.Pool`` worker) it raises
  :class:`~tensordict.errors.NestedWorkersError` instead of multiprocessing's bare assertion.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import multiprocessing.process
import multiprocessing.util
import os
import select
import signal
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from tensordict.errors import NestedWorkersError
from tensordict.parallel.startup import report_if_bootstrapping

__all__ = [
    "MAX_DEPTH",
    "Lifeline",
    "check_can_start_workers",
    "close_at_exit",
    "depth",
    "sigint_held",
    "untrack_process",
]

#: how many levels of pools a process may start: the main program's workers (1) may start
#: their own (2), which may not
MAX_DEPTH = 2
_PR_SET_PDEATHSIG = 1
#: at interpreter exit, how long workers get to exit on SIGTERM before SIGKILL
EXIT_GRACE_SECONDS = 0.5
#: how often a watcher without pidfd support checks that its owner is alive
_POLL_SECONDS = 0.5

#: this process's pool level: 0 in the main program, n in a worker started at level n - 1
_depth = 0


def depth() -> int:
    """The level of pools this process is at (0: not a worker)."""
    return _depth


def check_can_start_workers() -> None:
    """Raise :class:`NestedWorkersError` if this process cannot start worker processes (a
    spawned worker still importing the user's script reports the missing main guard instead:
    see ``startup``)."""
    report_if_bootstrapping()
    if mp.current_process().daemon:
        raise NestedWorkersError(
            "map_iter/map cannot start worker processes here: this process is daemonic (a "
            "worker of a multiprocessing.Pool, or a daemon Process), and daemonic processes "
            "cannot have children. Call map_iter from the main program or from fn of a "
            "map_iter that started its own workers (they may nest), or pass pool= a pool "
            "created outside."
        )
    if _depth >= MAX_DEPTH:
        raise NestedWorkersError(
            f"map_iter/map cannot start worker processes here: this worker is {_depth} levels "
            f"deep, and pools nest at most {MAX_DEPTH} levels (each level multiplies the "
            "processes). Process the chunk in this worker, or pass pool= a pool created outside."
        )


# ---------------------------------------------------------------------- exit
#: the pools to close at exit, by id: weak references without a callback (a callback would run
#: wherever this thread is when a pool is freed, and a Ctrl-C landing in it is dropped)
_open_pools: dict[int, weakref.ref[Any]] = {}
_registered_pid: int | None = None


def close_at_exit(pool: Any) -> None:
    """Close ``pool`` (``pool.close(abort=True, grace=...)``) at interpreter exit if still open."""
    global _open_pools, _registered_pid
    if _registered_pid != os.getpid():  # first pool of this process (or of a forked child)
        _open_pools = {}
        # runs inside multiprocessing's exit function, before it joins the children
        multiprocessing.util.Finalize(None, _close_open_pools, exitpriority=100)
        _registered_pid = os.getpid()
    for key in [key for key, ref in _open_pools.items() if ref() is None]:
        del _open_pools[key]  # pools freed since (an id can be reused)
    _open_pools[id(pool)] = weakref.ref(pool)


def _close_open_pools() -> None:
    for ref in list(_open_pools.values()):
        pool = ref()
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.close(abort=True, grace=EXIT_GRACE_SECONDS)


# ---------------------------------------------------------------------- Ctrl-C around fork
@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Hold SIGINT back from the Python handler inside the block; deliver it after.

    In the main thread only (signal handlers run nowhere else): the signal is blocked for this
    thread, and a SIGINT another thread receives is recorded by a stand-in handler instead of
    raising inside a fork hook. Both are delivered when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    swap = callable(previous)  # a Python handler (default_int_handler included)
    if swap:
        signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if swap:
            signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a blocked SIGINT is delivered here
        if caught:
            signal.raise_signal(signal.SIGINT)


def untrack_process(process: Any) -> None:
    """Take a started worker's ``Process`` out of ``multiprocessing.process._dangling``.

    multiprocessing keeps every ``Process`` object in that weak set (for CPython's own test
    suite); freeing one runs the set's callback, in the main thread for a worker retired or
    reaped there, and a Ctrl-C landing in a weakref callback is printed and dropped: with
    ``max_tasks_per_child=1`` one in a few hundred was lost under load. Private and optional: a
    Python without it is left alone.
    """
    dangling = getattr(multiprocessing.process, "_dangling", None)
    if isinstance(dangling, weakref.WeakSet):
        dangling.discard(process)


# ---------------------------------------------------------------------- dying with the owner
class Lifeline:
    """What a worker needs to die with its owner; made in the owner, used in the worker.

    Args:
        start_method: the multiprocessing start method of the worker.
    """

    def __init__(self, start_method: str) -> None:
        self.owner = os.getpid()
        #: the worker's parent is the owner (not a fork server)
        self.direct = start_method in ("fork", "spawn")
        #: the worker is started by the owner's main thread, which lives as long as the owner
        self.main_thread = threading.current_thread() is threading.main_thread()
        self.depth = _depth + 1

    def attach(self) -> None:
        """In the worker: arrange to be killed when the owner dies (exit now if it already has)."""
        global _depth
        _depth = self.depth
        if self.direct and self.main_thread and _set_parent_death_signal(signal.SIGKILL):
            if os.getppid() != self.owner:  # the owner died before the request took effect
                os._exit(1)
            return
        try:
            fd: int | None = os.pidfd_open(self.owner)
        except (AttributeError, OSError):  # gone already, or no pidfd: poll
            fd = None
        if (self.direct and os.getppid() != self.owner) or not _alive(self.owner):
            os._exit(1)
        threading.Thread(
            target=_watch,
            args=(self.owner, fd, self.direct),
            name="tensordict-lifeline",
            daemon=True,
        ).start()


def _set_parent_death_signal(signum: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch(owner: int, fd: int | None, direct: bool) -> None:
    """The watcher thread: wait for the owner to exit, then kill this worker."""
    if fd is not None:
        select.select([fd], [], [])  # a pidfd becomes readable when its process exits
    else:
        while _alive(owner) and (not direct or os.getppid() == owner):
            time.sleep(_POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGKILL)
