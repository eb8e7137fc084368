"""Workers of a finished call exit in the background: reaped (no zombie), or killed if stuck."""

from __future__ import annotations

import psutil
import torch

from tensordict import TensorDict
from tensordict.parallel.reaper import wait_reaped
from tests.parallel import helpers


def _gone(pid: int) -> bool:
    try:
        psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    return False  # running, or a zombie nobody reaped


def test_workers_of_a_finished_call_are_reaped_without_leaving_zombies():
    td = TensorDict({"x": torch.arange(8.0)}, [8])
    out = td.map_iter(
        helpers.pid_of_worker, num_workers=2, chunksize=2, generator=torch.Generator()
    )
    pids = set(torch.cat(list(out)).tolist())
    assert wait_reaped(10)
    assert all(_gone(pid) for pid in pids)  # reaped: not even a zombie is left


def test_a_worker_that_cannot_exit_is_killed_after_the_grace_period():
    td = TensorDict({"x": torch.arange(4.0)}, [4])
    kw = {"num_workers": 1, "chunksize": 4, "generator": torch.Generator()}
    pids = set(torch.cat(list(td.map_iter(helpers.pid_leaving_a_thread, **kw))).tolist())
    assert not all(_gone(pid) for pid in pids)  # still running: its thread keeps it alive
    assert wait_reaped(10)
    assert all(_gone(pid) for pid in pids)
