"""Workers never outlive the program: interpreter exit, a killed parent, threads that end.

Each test runs ``lifecycle_harness`` in a subprocess whose workers block in ``fn`` (ignoring
SIGTERM), then ends the harness one way or another and waits on the workers' pidfds.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
import torch

from tensordict import TensorDict
from tests.parallel import helpers
from tests.parallel.lifecycle import DEADLINE, Harness, wait_gone


@pytest.fixture
def harness(tmp_path):
    made: list[Harness] = []

    def start(scenario: str, method: str) -> Harness:
        made.append(Harness(scenario, method, str(tmp_path / "stderr.txt")))
        return made[-1]

    yield start
    for h in made:
        h.close()


def test_interpreter_exit_with_an_open_iterator_stops_workers_that_ignore_sigterm(harness):
    # the exit path closes pools whatever their start method: fork is enough here
    h = harness("exit", "fork")
    h.expect("ready", running=2)
    h.send()
    try:
        code = h.proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail("the interpreter did not exit: something joined a worker stuck in fn")
    assert code == 0, h.errors()
    assert wait_gone(h.workers) == []


def test_worker_pool_workers_die_when_the_parent_is_killed(harness):
    h = harness("pool_block", "fork")
    h.expect("ready", running=2)
    os.kill(h.proc.pid, signal.SIGKILL)
    assert wait_gone(h.workers) == [], "workers outlived their parent"


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_workers_die_when_the_parent_is_killed(harness, method):
    h = harness("block", method)
    h.expect("ready", running=2)
    os.kill(h.proc.pid, signal.SIGKILL)
    assert wait_gone(h.workers) == [], "workers outlived their parent"


def test_workers_die_when_the_parent_calls_os_exit(harness):
    h = harness("os_exit", "fork")
    h.expect("ready", running=2)
    h.send()
    assert h.proc.wait(timeout=DEADLINE) == 0
    assert wait_gone(h.workers) == [], "workers outlived their parent"


def test_workers_started_from_a_thread_outlive_it_and_die_with_the_parent(harness):
    h = harness("thread", "fork")
    h.expect("survived")  # the second chunk came after the thread that forked the workers ended
    h.expect("ready", running=2)
    os.kill(h.proc.pid, signal.SIGKILL)
    assert wait_gone(h.workers) == [], "workers outlived their parent"


def test_workers_do_not_inherit_the_parents_sigterm_handler():
    # TorchRL's replay buffers install such a handler: a worker keeping it would survive close()'s
    # SIGTERM until the SIGKILL fallback
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        td = TensorDict({"x": torch.zeros(4)}, [4])
        out = list(
            td.map_iter(
                helpers.sigterm_is_default,
                num_workers=2,
                chunksize=2,
                generator=torch.Generator(),
                mp_start_method="fork",
            )
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert [int(o) for o in out] == [1, 1]
