"""Workers never outlive the program: interpreter exit, a killed parent, threads that end.

Each test runs ``lifecycle_harness`` in a subprocess whose workers block in ``fn`` (ignoring
SIGTERM), then ends the harness one way or another and waits on the workers' pidfds.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

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
