"""One local Ray cluster for the Ray tests of a session, and nothing of it left running afterwards.

The cluster is package-scoped: started by the first Ray test, stopped after the last one, so the
tests that run later never see Ray's processes (``tests/parallel`` checks for leftover children).

The workers import test helpers by module name (``tests.parallel.helpers``, ``tests.ray.helpers``),
so the repository root goes on their ``PYTHONPATH`` through ``runtime_env``, after ``src`` (the
actors run this tree's tensordict, not the one the venv has installed). The ``tests`` directory
itself must not: its ``ray`` package would shadow the real one in the workers.

At the end, ``ray.shutdown()`` stops the cluster. Every process Ray started for us (the whole tree
below this process, recorded after ``ray.init`` and again before the shutdown) that is still alive
then is killed by pid; ``ray stop`` is never used, as it kills other users' Ray processes by name.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _descendants() -> set[tuple[int, float]]:
    """(pid, start time) of every live process below this one (the start time guards pid reuse)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            out.add((p.pid, p.create_time()))
    return out


def _kill_survivors(started: set[tuple[int, float]]) -> list[int]:
    alive = []
    for pid, created in started:
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    alive = _wait_exited(alive, timeout=5)  # a grace period for Ray's own shutdown
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    _wait_exited(alive, timeout=5)
    return [p.pid for p in alive]


def _wait_exited(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """The processes still running after ``timeout`` seconds. Polls their status: waiting on
    them (``psutil.wait_procs``) would reap our children behind the back of their owners
    (``subprocess``, ``multiprocessing``, tensordict's background reaper)."""
    deadline = time.monotonic() + timeout
    left = [p for p in procs if _running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [p for p in left if _running(p)]
    return left


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(scope="package")
def ray_cluster():
    """A local Ray cluster with 2 CPUs (``address="local"``: never someone else's cluster)."""
    ray = pytest.importorskip("ray")
    before = _descendants()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}},
    )
    started = _descendants() - before
    try:
        yield ray
    finally:
        started |= _descendants() - before
        ray.shutdown()
        killed = _kill_survivors(started)
        if killed:
            warnings.warn(f"killed Ray processes left after ray.shutdown(): {killed}", stacklevel=1)


@pytest.fixture(scope="package")
def pool(ray_cluster):
    """A pool of 2 actors shared by the tests that do not break it."""
    from ray.util.multiprocessing import Pool

    p = Pool(2)
    yield p
    p.terminate()


@pytest.fixture
def one_actor_pool(ray_cluster):
    """A pool of 1 actor for a test that kills it."""
    from ray.util.multiprocessing import Pool

    p = Pool(1)
    yield p
    p.terminate()
