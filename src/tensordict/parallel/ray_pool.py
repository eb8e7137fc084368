"""Ray's ``ray.util.multiprocessing.Pool`` as a ``map_iter`` backend (imported only for a Ray pool).

Ray is the engine here: this module writes no scheduler, it feeds the user's pool through its public
``apply_async`` and turns what comes back into the engine's events. Data flow::

    parent (driver)                                 actors of the user's Ray pool
    job = fn (cloudpickle: by reference when its     run_ray_task(token, job_ref, k, payload):
          module imports, else by value), source       job = cache[token], else ray.get(job_ref)
          (memory-mapped: file references), out        (opened once per actor, last 4 jobs kept)
    ray.put(job) once -> job_ref                       ("ok", fn(chunk))
    apply_async(run_ray_task,                          ("err", exception, traceback text, pid)
      (token, job_ref, k, payload)) ------------>      (every exception, even SystemExit, comes
      payload: ("index", slice | array) for a           home as a value: the actor survives)
      memmap source, ("chunk", its own rows) else
    Ray's result thread -> callback / error_callback -> queue -> wait() -> drive() reorders

What Ray's pool does and does not allow, and what is done about it:

* No public actor count: the window is sized from the private ``_actor_pool`` list when it is there,
  else from the cluster's CPU count (public, and the pool's own default size).
* A task's exception comes back wrapped (``PoolTaskError``) and without its traceback: the worker
  function catches it and returns it as a value with its formatted traceback, so the engine
  re-raises the original type with the remote traceback as ``__cause__`` and the chunk in a note.
* A dead actor (``os._exit``, OOM killer, ``ray.kill``) fails its tasks with ``RayActorError``
  within milliseconds; it is turned into :class:`~tensordict.errors.WorkerDiedError` naming the
  chunk. Ray does not replace the actor: that pool stays broken unless it was created with
  ``ray_remote_args={"max_restarts": -1}``.
* Stopping early: ``AsyncResult`` has no ``cancel()`` and no public ``ObjectRef``; ``ray.cancel``
  with ``force=True`` is refused for actor tasks, and ``ray.kill`` would leave the pool with a dead
  actor that it never replaces. Plain ``ray.cancel`` is not used either: measured with ray 2.60,
  cancelling an actor task that Ray has not sent to its actor yet (it resolves a task's arguments
  in the background first, which takes a while on a loaded machine) leaves a hole in the actor's
  task sequence numbers, so the actor holds every later task from this process for 30 s and then
  fails them ("actor unavailable: timed out waiting for seq_no"): the user's pool is unusable for
  half a minute. On an early close or an error the unfinished tasks therefore run to their end
  (at most the window: about two per actor) and their results are discarded. Actors are never
  killed, so the user's pool stays usable.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from types import ModuleType
from typing import Any

from tensordict.errors import MissingDependencyError, WorkerDiedError
from tensordict.parallel.pools import portable_job
from tensordict.parallel.window import Backend
from tensordict.parallel.worker import encode_error, run_external_task

__all__ = ["RayPoolBackend", "ray_pool_size", "require_ray", "run_ray_task"]

#: how often wait() checks that every task it waits for can still report (Ray's own result threads)
CHECK_SECONDS = 1.0
#: after an actor died: how long the chunks in flight may take to report (naming the chunk it was
#: running and those lost with it); healthy actors answer in the time of one chunk
DEAD_GRACE_SECONDS = 5.0
#: jobs an actor keeps resolved (fn unpickled, source mapped), most recent first
JOBS_PER_ACTOR = 4


def require_ray(feature: str = "a Ray pool") -> ModuleType:
    """Import ray, or explain how to install it.

    Raises:
        MissingDependencyError: ray is not installed.
    """
    try:
        import ray
    except ImportError as err:
        raise MissingDependencyError(
            f"{feature} needs the `ray` package, which is not installed. Install it with "
            "`pip install 'tensordict[ray]'` (or `pip install ray`)."
        ) from err
    return ray


def ray_pool_size(pool: Any) -> int:
    """The number of actors of a ``ray.util.multiprocessing.Pool``, for sizing the window."""
    # Ray's Pool has no public actor count. ``_actor_pool`` (a list of (actor, tasks) pairs in ray
    # 2.x) is private: read it only if it still has that shape, else fall back to the cluster's CPU
    # count, which is public and is the pool's own default size.
    actors = getattr(pool, "_actor_pool", None)
    if isinstance(actors, list) and actors:
        return len(actors)
    ray = require_ray()
    try:
        cpus = int(ray.cluster_resources().get("CPU", 0))
    except Exception:
        cpus = 0
    return max(cpus, 1)


# ---------------------------------------------------------------------- in the actors
_jobs: OrderedDict[str, dict[str, Any]] = OrderedDict()


def _job(token: str, job_ref: Any) -> dict[str, Any]:
    job = _jobs.get(token)
    if job is not None:
        _jobs.move_to_end(token)
        return job
    import ray

    job = dict(ray.get(job_ref))
    try:
        job["fn"] = pickle.loads(job.pop("fn_bytes"))
    except ImportError as err:
        add_note = getattr(err, "add_note", None)  # Python >= 3.11
        if add_note is not None:
            add_note(
                "Ray actors import fn's module by name: install it on every node, or put its "
                "directory on the workers' path: ray.init(runtime_env={'env_vars': "
                "{'PYTHONPATH': ...}})."
            )
        raise
    _jobs[token] = job
    while len(_jobs) > JOBS_PER_ACTOR:
        _jobs.popitem(last=False)
    return job


def run_ray_task(token: str, job_ref: Any, k: int, payload: Any) -> tuple[Any, ...]:
    """What an actor of the user's Ray pool runs for chunk ``k``.

    Returns ``("ok", result)``, or ``("err", exception or None, traceback text, pid)``: errors
    travel as values so that their traceback survives and the actor survives ``SystemExit``.
    """
    try:
        return ("ok", run_external_task(_job(token, job_ref), k, payload))
    except BaseException as err:  # everything fn raises goes home, even SystemExit
        exc, text = encode_error(err)
        return ("err", exc, text, os.getpid())


# ---------------------------------------------------------------------- in the driver
class RayPoolBackend(Backend):
    """A ``ray.util.multiprocessing.Pool`` driven through ``apply_async`` and its callbacks."""

    def __init__(self, pool: Any, job: dict[str, Any]) -> None:
        self.ray = require_ray()
        from ray import cloudpickle

        self.pool = pool
        self.num_workers = ray_pool_size(pool)
        portable = portable_job(job, self.num_workers)
        # cloudpickle sends a function defined in ``__main__`` by value (actors cannot import it)
        portable["fn_bytes"] = cloudpickle.dumps(job["fn"])
        self.token = uuid.uuid4().hex
        self.job_ref: Any = self.ray.put(portable)
        self.events: queue.SimpleQueue[tuple[str, int, Any]] = queue.SimpleQueue()
        self.backlog: list[tuple[str, int, Any]] = []
        self.in_flight: dict[int, Any] = {}
        self.pids: dict[int, int] = {}
        self.closed = False

    def task_args(self, k: int, payload: Any) -> tuple[Any, ...]:
        """The arguments sent with chunk ``k`` (the job travels once, as an object reference)."""
        return (self.token, self.job_ref, k, payload)

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        for k in ks:
            task_payload = payload(k)
            try:
                handle = self.pool.apply_async(
                    run_ray_task,
                    self.task_args(k, task_payload),
                    callback=lambda r, k=k: self.events.put(("done", k, r)),
                    error_callback=lambda e, k=k: self.events.put(("failed", k, e)),
                )
            except ValueError as err:  # "Pool not running"
                raise ValueError(
                    f"the Ray pool cannot take tasks ({err}): pass an open "
                    "ray.util.multiprocessing.Pool (not closed or terminated)."
                ) from err
            self.in_flight[k] = handle
        return len(ks)

    def where(self, k: int) -> str:
        pid = self.pids.get(k)
        return "an actor of the Ray pool" + (f" (pid {pid})" if pid is not None else "")

    # ------------------------------------------------------------------ results
    def wait(self) -> list[tuple[Any, ...]]:
        while True:
            items = self._drain()
            if not items:
                try:
                    items = [self.events.get(timeout=CHECK_SECONDS)]
                except queue.Empty:
                    self._check_lost()
                    continue
                items += self._drain()
            items = [it for it in items if it[1] in self.in_flight]
            dead = {k: v for kind, k, v in items if kind == "failed" and self._is_dead(v)}
            if dead:
                for it in items:
                    del self.in_flight[it[1]]
                self._actor_died(dead)
            return [self._event(*it) for it in items]

    def _drain(self) -> list[tuple[str, int, Any]]:
        items, self.backlog = self.backlog, []
        with contextlib.suppress(queue.Empty):
            while True:
                items.append(self.events.get_nowait())
        return items

    def _is_dead(self, err: Any) -> bool:
        return isinstance(err, self.ray.exceptions.RayActorError)

    def _event(self, kind: str, k: int, value: Any) -> tuple[Any, ...]:
        del self.in_flight[k]
        if kind == "failed":
            return ("err", k, *_unwrap(self.ray, value))
        if value[0] == "ok":
            return ("ok", k, value[1])
        _, exc, text, pid = value
        self.pids[k] = pid
        return ("err", k, exc, text)

    def _actor_died(self, lost: dict[int, BaseException]) -> None:
        """Name the chunk a dead actor was running, and the others lost with it, and raise.

        Every task queued on a dead actor fails; the one it was running is the lowest of them. The
        error waits until every chunk in flight has reported (bounded by a grace period: never a
        hang): each failure comes through its own result thread, later on a loaded machine, and
        the chunks lost with the actor are all listed, not only those already reported.
        """
        deadline = time.monotonic() + DEAD_GRACE_SECONDS
        while self.in_flight and time.monotonic() < deadline:
            try:
                kind, j, value = self.events.get(
                    timeout=max(0.0, min(0.1, deadline - time.monotonic()))
                )
            except queue.Empty:
                continue
            self.in_flight.pop(j, None)
            if kind == "failed" and self._is_dead(value):
                lost[j] = value
        first = min(lost)
        pid = _actor_pid(lost[first])
        others = sorted(j for j in lost if j != first and _actor_pid(lost[j]) == pid)
        raise WorkerDiedError(
            f"the Ray actor running chunk {first}"
            + (f" (pid {pid})" if pid is not None else "")
            + f" died ({type(lost[first]).__name__})"
            + (f"; chunks {others} queued on it were lost too" if others else "")
            + ". The remaining chunks were cancelled. Ray does not replace a dead actor of a "
            "ray.util.multiprocessing.Pool: create a new pool, or create it with "
            "ray_remote_args={'max_restarts': -1}.",
            chunk=first,
            pid=pid,
        ) from lost[first]

    def _check_lost(self) -> None:
        """A task whose result thread ended without a callback (e.g. Ray was shut down) is lost."""
        ended = [k for k, handle in self.in_flight.items() if handle.ready()]
        if not ended:
            return
        self.backlog = self._drain()  # a callback runs before its thread ends: its event is here
        reported = {item[1] for item in self.backlog}
        lost = [k for k in ended if k not in reported]
        if lost:
            raise WorkerDiedError(
                f"the Ray task for chunk {lost[0]} ended without a result or an error: is the Ray "
                "runtime still up (ray.shutdown() or a lost connection to the cluster)?",
                chunk=lost[0],
            )

    # ------------------------------------------------------------------ shutdown
    def close(self, abort: bool) -> None:
        if self.closed:
            return
        self.closed = True
        # unfinished tasks run to their end, never ray.cancel-ed (see the module docstring):
        # their results, and errors, go to an event queue nobody reads any more
        self.in_flight.clear()
        self.job_ref = None  # actors that still need the job hold their own reference


def _actor_pid(err: BaseException) -> int | None:
    """The pid in Ray's message about a dead actor, if it gives one."""
    match = re.search(r"\bpid[=:]\s*(\d+)", str(err))
    return int(match.group(1)) if match else None


def _unwrap(ray: ModuleType, err: BaseException) -> tuple[Any, str]:
    """(the original exception, its traceback text) from what Ray's error_callback received."""
    import traceback

    underlying = getattr(err, "underlying", None)  # ray's PoolTaskError
    if isinstance(underlying, BaseException):
        err = underlying
    elif isinstance(err, ray.exceptions.RayTaskError):
        cause = getattr(err, "cause", None)
        if isinstance(cause, BaseException):
            return cause, str(err)
    return err, "".join(traceback.format_exception(type(err), err, err.__traceback__))
