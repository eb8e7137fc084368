"""RayPoolBackend against stand-in pools: the failure paths a real pool rarely takes."""

from __future__ import annotations

import queue
import types

import pytest

from tensordict.errors import WorkerDiedError
from tensordict.parallel import ray_pool
from tests.parallel import helpers

pytest.importorskip("ray")

JOB = {"fn": helpers.add_one, "dim": 0, "lock": False}


class SilentHandle:
    """An AsyncResult whose result thread ended without calling back (e.g. Ray shut down)."""

    def ready(self):
        return True


class SilentPool:
    def apply_async(self, func, args=None, kwargs=None, callback=None, error_callback=None):
        return SilentHandle()


class ClosedPool:
    def apply_async(self, func, args=None, kwargs=None, callback=None, error_callback=None):
        raise ValueError("Pool not running")


class DyingActorPool:
    """One actor that dies on chunk 3 after chunk 2's reply was lost too: chunk 2's failure is
    reported at once, chunk 3's only once the backend waits for more (``LateReports``)."""

    def __init__(self, late: list) -> None:
        self.late = late

    def apply_async(self, func, args=None, kwargs=None, callback=None, error_callback=None):
        ray = pytest.importorskip("ray")
        k = args[2]
        if k == 2:
            error_callback(ray.exceptions.ActorDiedError())
        elif k == 3:
            self.late.append(("failed", 3, ray.exceptions.ActorDiedError()))
        else:
            callback(("ok", k))
        return types.SimpleNamespace(ready=lambda: False)


class LateReports:
    """The backend's event queue, holding some reports back until the backend blocks on it."""

    def __init__(self, late: list) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.late = late

    def put(self, item) -> None:
        self.queue.put(item)

    def get_nowait(self):
        return self.queue.get_nowait()

    def get(self, timeout=None):
        while self.late:
            self.queue.put(self.late.pop(0))
        return self.queue.get(timeout=timeout)


def test_a_dead_actor_lists_the_chunks_lost_with_it_even_when_reported_late(ray_cluster):
    # under load the failure of each task lost with a dead actor comes through its own result
    # thread, some after the first: the error waited only for chunks before the first reported
    late: list = []
    backend = ray_pool.RayPoolBackend(DyingActorPool(late), JOB)
    backend.events = LateReports(late)  # type: ignore[assignment]
    backend.submit(range(4), lambda k: None)
    with pytest.raises(WorkerDiedError) as info:
        backend.wait()
    assert info.value.chunk == 2 and "chunks [3] queued on it were lost too" in str(info.value)
    backend.close(abort=True)


def test_task_that_ends_without_a_callback_raises_instead_of_hanging(ray_cluster, monkeypatch):
    monkeypatch.setattr(ray_pool, "CHECK_SECONDS", 0.01)
    backend = ray_pool.RayPoolBackend(SilentPool(), JOB)
    backend.submit(range(1), lambda k: None)
    with pytest.raises(WorkerDiedError, match="chunk 0 ended without a result") as info:
        backend.wait()
    assert info.value.chunk == 0
    backend.close(abort=True)


def test_closed_ray_pool_is_reported_with_what_to_pass(ray_cluster):
    backend = ray_pool.RayPoolBackend(ClosedPool(), JOB)
    with pytest.raises(ValueError, match=r"pass an open ray\.util\.multiprocessing\.Pool"):
        backend.submit(range(1), lambda k: None)
