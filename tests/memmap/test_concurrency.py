"""Two processes writing the same prefix: an exclusive lock serialises them, so the result is
always one complete version; readers never see a mix either."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from tensordict import TensorDict
from tests.stress import stress_count

from . import writers


def lock_waiters() -> set[int]:
    """Pids blocked on a flock (``/proc/locks`` lists waiters with ``->``)."""
    pids = set()
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if "->" in fields and "FLOCK" in fields:
                pids.add(int(fields[fields.index("->") + 4]))
    return pids


def wait_for(condition, what: str, deadline: float = 120.0) -> None:
    """Poll ``condition`` (a fact of the system, not a time) until true or the deadline."""
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_second_writer_waits_for_the_first(tmp_path: Path) -> None:
    prefix = str(tmp_path / "p")
    resume = mp.get_context("fork").Event()
    first, first_conn = writers.start(writers.write_paused, prefix, 1, resume)
    try:
        assert first_conn.poll(120) and first_conn.recv()[0] == "paused"
        barrier = mp.get_context("fork").Barrier(1)
        second, second_conn = writers.start(writers.write_once, prefix, 2, barrier)
        # the second writer is blocked on the prefix's lock while the first is mid-write
        wait_for(lambda: second.pid in lock_waiters(), "the second writer to wait on the lock")
        assert not second_conn.poll()
        resume.set()
        assert first_conn.recv() == ("done", 1)
        assert second_conn.poll(120) and second_conn.recv() == ("done", 2)
    finally:
        resume.set()
        writers.kill(first)
    second.join(60)
    assert first.exitcode == 0 and second.exitcode == 0
    assert writers.versions_in(TensorDict.load_memmap(prefix)) == {2}


@pytest.mark.stress
def test_concurrent_writers_never_mix_their_versions(tmp_path: Path) -> None:
    runs = stress_count(3, 20)
    ctx = mp.get_context("fork")
    mixed = 0
    for run in range(runs):
        prefix = str(tmp_path / f"p{run}")
        barrier = ctx.Barrier(2)
        procs = [writers.start(writers.write_once, prefix, v, barrier) for v in (1, 2)]
        done = []
        for proc, conn in procs:
            assert conn.poll(300), "a writer did not finish"
            done.append(conn.recv())
            proc.join(60)
            assert proc.exitcode == 0
        assert sorted(done) == [("done", 1), ("done", 2)]
        found = writers.versions_in(TensorDict.load_memmap(prefix))
        mixed += len(found) != 1
        assert not [n for n in os.listdir(tmp_path) if n.startswith(f".p{run}.")]
    assert mixed == 0
    print(f"{runs} concurrent-writer runs: {mixed} mixed")


def test_lock_file_lives_beside_the_prefix_and_is_removed(tmp_path: Path) -> None:
    from tensordict.memmap import transaction as tx

    prefix = tmp_path / "p"
    with tx.prefix_lock(str(prefix)) as path:
        assert path == str(tmp_path / ".p.tdlock") and os.path.exists(path)
    assert not os.path.exists(path)


def test_reader_during_a_switch_sees_one_version(tmp_path: Path, monkeypatch) -> None:
    from tensordict.memmap import load

    prefix = tmp_path / "p"
    writers.version(1, rows=8).memmap(prefix)
    real = load._load_node
    switched = [False]

    def switch_mid_load(*args, **kwargs):
        if not switched[0]:
            switched[0] = True
            writers.version(2, rows=8).memmap(prefix)  # another writer switches meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(load, "_load_node", switch_mid_load)
    td = TensorDict.load_memmap(prefix)
    assert switched[0] and writers.versions_in(td) == {2}
