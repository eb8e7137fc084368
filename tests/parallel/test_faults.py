"""Faults: dead workers, errors in fn, unpicklable results, early close, interrupts."""

from __future__ import annotations

import gc
import os

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import NotPicklableError, WorkerDiedError
from tensordict.parallel.worker import RemoteTraceback
from tests.parallel import helpers
from tests.parallel.conftest import live_children


def source(n: int = 12) -> TensorDict:
    return TensorDict({"x": torch.arange(float(n))}, [n])


def iterate(fn, **kw):
    kw.setdefault("num_workers", 2)
    kw.setdefault("chunksize", 1)
    return list(source().map_iter(fn, generator=torch.Generator(), **kw))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_calling_os_exit_raises_worker_died_naming_chunk_pid_and_code(method):
    with pytest.raises(WorkerDiedError) as info:
        iterate(helpers.exit_on_three, mp_start_method=method)
    err = info.value
    assert err.chunk == 3 and err.exitcode == 3 and err.pid > 0
    assert "chunk 3" in str(err) and str(err.pid) in str(err) and "exit code 3" in str(err)


def test_worker_killed_by_sigkill_names_the_signal():
    with pytest.raises(WorkerDiedError, match="SIGKILL") as info:
        iterate(helpers.sigkill_on_three)
    assert info.value.chunk == 3 and info.value.exitcode == -9


def test_worker_died_error_is_a_runtime_error():
    assert issubclass(WorkerDiedError, RuntimeError)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_exception_in_fn_is_reraised_with_its_type_traceback_and_chunk(method):
    with pytest.raises(ValueError, match="bad chunk three") as info:
        iterate(helpers.raise_on_three, mp_start_method=method)
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "raise_on_three" in cause.tb and "helpers.py" in cause.tb
    assert any("chunk 3" in note for note in info.value.__notes__)


def test_results_before_the_failing_chunk_are_yielded():
    got = []
    with pytest.raises(ValueError):
        for r in source().map_iter(
            helpers.raise_on_three, num_workers=2, chunksize=1, generator=torch.Generator()
        ):
            got.append(float(r["y"][0]))
    assert got == [1.0, 2.0, 3.0]


def test_unpicklable_result_raises_not_picklable_naming_the_chunk():
    with pytest.raises(NotPicklableError, match="chunk 0"):
        iterate(helpers.return_lambda)


def test_break_stops_workers_at_once():
    td = source(400)
    it = td.map_iter(helpers.add_one, num_workers=2, chunksize=1, generator=torch.Generator())
    pids = None
    for _ in it:
        pids = [p.pid for p in live_children()]
        break
    it.close()
    assert pids, "workers were running"
    assert not [p for p in live_children() if p.pid in pids]


def test_garbage_collected_iterator_stops_its_workers():
    it = source(400).map_iter(
        helpers.add_one, num_workers=2, chunksize=1, generator=torch.Generator()
    )
    next(it)
    assert live_children()
    del it
    gc.collect()
    assert not live_children()


def test_exception_in_the_consumer_loop_stops_the_workers():
    def consume():
        for _ in source(400).map_iter(
            helpers.add_one, num_workers=2, chunksize=1, generator=torch.Generator()
        ):
            raise KeyError("consumer failed")

    with pytest.raises(KeyError):
        consume()
    gc.collect()
    assert not live_children()


def test_ctrl_c_while_waiting_raises_keyboard_interrupt_and_cleans_up():
    with pytest.raises(KeyboardInterrupt):
        iterate(helpers.interrupt_parent, chunksize=None, num_chunks=2)
    assert not live_children()


def test_error_cancels_the_remaining_chunks(tmp_path, monkeypatch):
    n = 200
    marks = torch.zeros(n + 2, dtype=torch.int64)
    path = str(tmp_path / "marks.memmap")
    from tensordict import MemoryMappedTensor

    MemoryMappedTensor.from_tensor(marks, filename=path)
    monkeypatch.setenv("TD_TEST_MARKS", path)
    monkeypatch.setenv("TD_TEST_N", str(n))
    td = TensorDict({"idx": torch.arange(n), "x": torch.arange(float(n))}, [n])
    it = td.map_iter(helpers.record_start, num_workers=2, chunksize=1, generator=torch.Generator())
    next(it)
    it.close()
    started = int(MemoryMappedTensor.from_filename(path, torch.int64, [n + 2])[:n].sum())
    assert started <= 2 * 2 + 2, f"{started} chunks ran after the iterator was closed"


def test_dead_worker_under_max_tasks_per_child_is_still_reported():
    with pytest.raises(WorkerDiedError, match="chunk 3"):
        iterate(helpers.exit_on_three, max_tasks_per_child=2)


def test_os_getpid_workers_are_not_the_parent():
    rows = list(
        source(4).map_iter(
            helpers.worker_identity, num_workers=2, chunksize=1, generator=torch.Generator()
        )
    )
    assert all(int(r["info"][0, 3]) != os.getpid() for r in rows)
