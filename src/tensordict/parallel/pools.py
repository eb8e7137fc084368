"""Pools the user passes as ``pool=``: the stdlib / ``torch.multiprocessing`` pool, and Ray's.

The pool is used as it is: its workers are not re-seeded, it is never closed here, and it stays
usable after an error or an early close. Each adapter turns the pool into a
:class:`~tensordict.parallel.window.Backend` so the same window and ordering logic drives it.
Ray is imported only when a Ray pool is passed.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import selectors
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tensordict.errors import WorkerDiedError
from tensordict.parallel.channel import dumps
from tensordict.parallel.engine import exit_description
from tensordict.parallel.watchdog import Watchdog
from tensordict.parallel.window import Backend
from tensordict.parallel.worker import encode_error, run_external_task

__all__ = ["external_backend", "is_ray_pool", "pool_size"]

#: how long a chunk whose worker died may still deliver its result through the pool's pipe
GRACE_SECONDS = 1.0


def is_ray_pool(pool: Any) -> bool:
    """Whether ``pool`` is a ``ray.util.multiprocessing.Pool`` (without importing ray)."""
    module = sys.modules.get("ray.util.multiprocessing.pool")
    return module is not None and isinstance(pool, module.Pool)


def pool_size(pool: Any) -> int:
    """The number of workers of a pool, for sizing the window."""
    if is_ray_pool(pool):
        from tensordict.parallel.ray_pool import ray_pool_size

        return ray_pool_size(pool)
    size = getattr(pool, "_processes", None)  # multiprocessing.pool.Pool keeps no public count
    if isinstance(size, int) and size > 0:
        return size
    return os.cpu_count() or 1


def external_backend(pool: Any, job: dict[str, Any]) -> Backend:
    """The backend for a user's pool."""
    if is_ray_pool(pool):
        from tensordict.parallel.ray_pool import RayPoolBackend

        return RayPoolBackend(pool, job)
    if not hasattr(pool, "apply_async"):
        raise TypeError(
            f"pool must be a multiprocessing.Pool (stdlib or torch.multiprocessing) or a "
            f"ray.util.multiprocessing.Pool, got {type(pool).__name__}."
        )
    return StdlibPoolBackend(pool, job)


def _pool_process(pool: Any, pid: int) -> Any:
    """The stdlib pool's Process object for ``pid`` (its only record of a worker's exit status
    once its maintenance thread has reaped it); None if the pool's layout is not the stdlib's."""
    for process in getattr(pool, "_pool", ()) or ():
        if getattr(process, "pid", None) == pid:
            return process
    return None


def run_pool_task(job: dict[str, Any], k: int, payload: bytes) -> bytes:
    """What a stdlib pool's worker runs: the chunk, with the result serialised here.

    The payload arrives pickled by plain ``pickle`` (a chunk's own rows): the pool's
    ``ForkingPickler`` would move a plain source's whole storage into shared memory to send one
    chunk of it.

    Tensors in the result travel as their bytes (like a tensordict's leaves): torch's own
    reduction for pool pipes shares storage by file descriptor, which needs this worker alive
    when the parent unpickles; if it died first, the pool's result thread would die with it.
    """
    return dumps(run_external_task(job, k, pickle.loads(payload)))


def portable_job(job: dict[str, Any], num_workers: int) -> dict[str, Any]:
    """The job as sent with every task to a pool's workers (fn pickled once, here)."""
    out = {k: v for k, v in job.items() if k not in ("fn", "chunks")}
    out["fn_bytes"] = pickle.dumps(job["fn"])
    out["num_workers"] = num_workers
    return out


class StdlibPoolBackend(Backend):
    """``multiprocessing.pool.Pool`` (and ``torch.multiprocessing.Pool``) through apply_async."""

    def __init__(self, pool: Any, job: dict[str, Any]) -> None:
        self.pool = pool
        self.num_workers = pool_size(pool)
        self.watchdog = Watchdog(lambda pid: _pool_process(pool, pid))
        self.job = portable_job(job, self.num_workers)
        self.job["watch"] = self.watchdog.address
        self.results: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        self.selector.register(self.watchdog, selectors.EVENT_READ, None)
        self.closed = False
        self._lock = threading.Lock()
        #: where chunks that failed ran (recorded before the watchdog forgets them)
        self.failed_where: dict[int, str] = {}

    def _push(self, event: tuple[Any, ...]) -> None:
        # runs in the pool's result-handler thread, possibly after close() (tasks already in the
        # pool finish in the background): the lock keeps it off descriptors closed meanwhile
        with self._lock:
            if self.closed:
                return
            self.results.put(event)
            with contextlib.suppress(OSError):
                os.write(self.wake_w, b"x")

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        for k in ks:
            self.pool.apply_async(
                run_pool_task,
                (self.job, k, pickle.dumps(payload(k), protocol=5)),
                callback=lambda r, k=k: self._push(("ok", k, r)),
                error_callback=lambda e, k=k: self._push(("err", k, *encode_error(e))),
            )
        return len(ks)

    def where(self, k: int) -> str:
        return self.failed_where.get(k) or self.watchdog.where(k)

    def wait(self) -> list[tuple[Any, ...]]:
        died_at: float | None = None
        while True:
            events = self._drain()
            if events:
                return events
            lost = self.watchdog.lost()
            if lost is not None:
                died_at = died_at if died_at is not None else time.monotonic()
                if time.monotonic() - died_at >= GRACE_SECONDS:
                    k, pid, status = lost
                    raise WorkerDiedError(
                        f"a worker of the pool (pid {pid}) died while processing chunk {k}: it "
                        f"exited {exit_description(status)}. The pool replaced it, but the chunk "
                        "is lost; the remaining chunks were cancelled.",
                        chunk=k,
                        pid=pid,
                        exitcode=status,
                    )
            timeout = None if lost is None else 0.05
            for key, _ in self.selector.select(timeout):
                if key.fileobj is self.watchdog:
                    self.watchdog.poll()
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)

    def _drain(self) -> list[tuple[Any, ...]]:
        events: list[tuple[Any, ...]] = []
        while True:
            try:
                event = self.results.get_nowait()
            except queue.Empty:
                return events
            k = event[1]
            if event[0] == "err":
                self.failed_where[k] = self.watchdog.where(k)
            else:
                event = ("ok", k, pickle.loads(event[2]))
            self.watchdog.finished(k)
            events.append(event)

    def close(self, abort: bool) -> None:
        # Tasks already handed to the pool cannot be withdrawn from a stdlib pool: they finish
        # in the background (at most the window's worth) and their results are dropped.
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.selector.close()
        self.watchdog.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
