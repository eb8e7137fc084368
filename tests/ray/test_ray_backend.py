"""RayPoolBackend against stand-in pools: the failure paths a real pool rarely takes."""

from __future__ import annotations

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


def test_cancel_skips_handles_without_ray_private_attributes(ray_cluster):
    unfinished = types.SimpleNamespace(ready=lambda: False)  # no _result_thread
    ray_pool._cancel(ray_cluster, unfinished)  # must not raise
