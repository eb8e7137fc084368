"""The persistent pool and the reaper under hostile timing and input: workers read what the
caller's tensordict holds (never a prefix overwritten since), the pool caps its workers as
map_iter does, the reaper survives a worker closed under it, and bad arguments get clear errors."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
from typing import Any

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import WorkerCountWarning
from tensordict.parallel import WorkerPool, persistent, reaper
from tests.parallel import helpers


# ====================================================================== a stale prefix
def _old_and_new(tmp_path) -> TensorDict:
    """A tensordict loaded from a prefix, which another writer then overwrites."""
    TensorDict({"x": torch.arange(8.0)}, [8]).memmap(tmp_path / "p")
    old = TensorDict.load_memmap(tmp_path / "p")
    TensorDict({"x": torch.arange(8.0) + 100}, [8]).memmap(tmp_path / "p")  # switched in
    return old


def test_a_pool_reads_what_the_callers_tensordict_holds(tmp_path):
    old = _old_and_new(tmp_path)
    with WorkerPool(2, generator=torch.Generator()) as pool:
        out = torch.cat([r["y"] for r in old.map_iter(helpers.add_one, chunksize=3, pool=pool)])
    assert torch.equal(out, old["x"] + 1) and torch.equal(old["x"], torch.arange(8.0))


def test_spawned_workers_read_what_the_callers_tensordict_holds(tmp_path):
    old = _old_and_new(tmp_path)
    kw = {"num_workers": 1, "chunksize": 4, "mp_start_method": "spawn"}
    out = old.map(helpers.add_one, generator=torch.Generator(), **kw)
    assert torch.equal(out["y"], old["x"] + 1)


def test_an_out_whose_prefix_was_overwritten_is_written_where_the_caller_sees_it(tmp_path):
    TensorDict({"y": torch.zeros(6)}, [6]).memmap(tmp_path / "out")
    out = TensorDict.load_memmap(tmp_path / "out")
    TensorDict({"y": torch.full((6,), -1.0)}, [6]).memmap(tmp_path / "out")  # switched in
    td = TensorDict({"x": torch.arange(6.0)}, [6])
    with WorkerPool(2, generator=torch.Generator()) as pool:
        td.map(helpers.fill_out, chunksize=2, out=out, pool=pool)
    assert torch.equal(out["y"], td["x"] * 10)


# ====================================================================== worker count
def test_a_pool_caps_its_workers_as_map_iter_does(monkeypatch):
    monkeypatch.setattr(persistent, "usable_cpus", lambda: 1)
    with pytest.warns(WorkerCountWarning, match=r"num_workers=64 .* starting 4 workers"):
        pool = WorkerPool(64, generator=torch.Generator())
    with pool:
        assert pool.num_workers == 4


# ====================================================================== argument types
@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"num_workers": "2"}, r"num_workers must be an int, got str '2'"),
        ({"num_workers": 2.0}, r"num_workers must be an int, got float"),
        ({"chunksize": 2.5}, r"chunksize must be an int, got float 2\.5"),
        ({"chunksize": True}, r"chunksize must be an int, got bool True"),
        ({"num_chunks": "3"}, r"num_chunks must be an int"),
        ({"worker_threads": 1.5}, r"worker_threads must be an int"),
        ({"max_tasks_per_child": "1"}, r"max_tasks_per_child must be an int"),
        ({"generator": "x"}, r"generator must be a torch\.Generator or None, got str 'x'"),
        ({"generator": 0}, r"generator must be a torch\.Generator"),
    ],
)
def test_arguments_of_the_wrong_type_are_refused_naming_them(kw, message):
    td = TensorDict({"x": torch.arange(4.0)}, [4])
    kw = {"generator": torch.Generator(), **kw}
    with pytest.raises(TypeError, match=message):
        td.map_iter(helpers.add_one, **kw)
    with pytest.raises(TypeError, match=message):
        td.map(helpers.add_one, **kw)


@pytest.mark.parametrize(
    "kw",
    [
        {"num_workers": "2"},
        {"generator": "x"},
        {"worker_threads": 1.0},
        {"max_tasks_per_child": True},
    ],
)
def test_a_pool_refuses_arguments_of_the_wrong_type(kw):
    with pytest.raises(TypeError, match="must be"):
        WorkerPool(**{"num_workers": 1, "generator": torch.Generator(), **kw})


# ====================================================================== the reaper
class _Worker:
    """What the reaper handles of an engine worker: a process, its exit descriptor."""

    def __init__(self, process: Any) -> None:
        self.process = process

    @property
    def exit_fd(self) -> int:
        return int(self.process.sentinel)

    def close_process(self) -> None:
        with contextlib.suppress(ValueError):  # already closed
            self.process.close()


def _started() -> _Worker:
    process = mp.get_context("fork").Process(target=int)  # exits at once
    process.start()
    return _Worker(process)


def test_the_reaper_survives_a_worker_closed_under_it(monkeypatch):
    """The thread polls exit codes outside its lock; close() (at exit, wait_reaped) may close a
    process meanwhile. Forced here: close() runs while the thread waits in select."""
    own = reaper.Reaper()
    closed_under_it = threading.Event()
    select = reaper.select.select

    def close_then_wait(rlist: Any, *args: Any) -> Any:
        # own's thread only (the package's reaper may be reaping earlier tests' workers)
        if threading.current_thread() is own._thread and not closed_under_it.is_set():
            closed_under_it.set()
            own.close(grace=5.0)  # joins and closes the process the thread is about to poll
        return select(rlist, *args)

    monkeypatch.setattr(reaper.select, "select", close_then_wait)
    own.adopt([_started()], grace=5.0)
    assert own.wait_idle(10.0) and closed_under_it.is_set()
    later = _started()
    own.adopt([later], grace=5.0)  # a dead thread would never reap this one
    assert own.wait_idle(10.0)
    with pytest.raises(ValueError, match="closed"):
        later.process.exitcode  # reaped, then closed by the reaper  # noqa: B018


def test_wait_idle_waits_until_the_processes_taken_off_are_closed():
    """The thread takes reaped workers off its list, then closes their processes outside its
    lock: wait_idle() answered True in between, and a caller found a process not closed yet
    (a flaky check in the test below). Forced here: the close blocks until released."""
    entered, release = threading.Event(), threading.Event()

    class SlowClose(_Worker):
        def close_process(self) -> None:
            entered.set()
            release.wait(10.0)
            super().close_process()

    own = reaper.Reaper()
    worker = SlowClose(mp.get_context("fork").Process(target=int))
    worker.process.start()
    own.adopt([worker], grace=5.0)
    assert entered.wait(10.0)  # reaped and off the list, its process being closed
    assert not own.wait_idle(0.05)
    release.set()
    assert own.wait_idle(10.0)
    with pytest.raises(ValueError, match="closed"):
        worker.process.exitcode  # noqa: B018


def test_a_worker_handed_over_as_the_thread_goes_idle_is_reaped():
    """The thread going idle races adopt(): forced here, workers are handed over after the thread
    decided it had nothing left to do and before it ended. A thread that still counted as
    running then would start no new one, and those workers would never be reaped."""
    handed_over = threading.Event()
    later = _started()

    class Racing(reaper.Reaper):
        def _loop(self) -> None:
            super()._loop()  # returned: idle
            if not handed_over.is_set():
                adopter = threading.Thread(target=self.adopt, args=([later], 5.0))
                adopter.start()
                adopter.join()
                handed_over.set()

    own = Racing()
    own.adopt([_started()], grace=5.0)
    assert handed_over.wait(10.0)  # the first thread went idle, then `later` was handed over
    assert own.wait_idle(10.0)  # and a new thread reaped it
    with pytest.raises(ValueError, match="closed"):
        later.process.exitcode  # noqa: B018
