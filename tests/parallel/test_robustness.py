"""Regressions found in review: deadlock, descriptor leaks, stray writes, lingering processes."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import WorkerDiedError
from tests.parallel import helpers


def test_many_small_leaves_under_spawn_do_not_deadlock():
    # 16 leaves of 64,000 bytes per chunk: each under the out-of-band threshold, ~1 MB together
    n = 1000 * 12
    td = TensorDict({f"k{i}": torch.randn(n, 16) for i in range(16)}, [n])
    out = list(
        td.map_iter(
            helpers.clone_chunk,
            num_workers=1,
            chunksize=1000,
            mp_start_method="spawn",
            generator=torch.Generator(),
        )
    )
    assert torch.equal(torch.cat([o["k3"] for o in out]), td["k3"])


def test_max_tasks_per_child_does_not_leak_descriptors():
    td = TensorDict({"x": torch.ones(120, 4)}, [120])
    counts = []
    it = td.map_iter(
        helpers.as_tensor,
        num_workers=2,
        chunksize=1,
        max_tasks_per_child=1,
        generator=torch.Generator(),
    )
    for i, _ in enumerate(it):
        if i in (10, 110):
            counts.append(helpers.count_fds())
    # 100 workers were replaced between the two counts: a leak of even one descriptor per worker
    # shows as +100. A few belong to replacements still in flight when counted (the old worker's
    # socket and pidfd until it is reaped in the background, the new one's), hence the slack.
    assert counts[1] <= counts[0] + 16, f"descriptors grew from {counts[0]} to {counts[1]}"


def test_holding_many_large_results_does_not_exhaust_descriptors(tmp_path):
    script = tmp_path / "hold.py"
    script.write_text(
        textwrap.dedent(
            """
            import resource, torch
            from tensordict import TensorDict
            from tests.parallel import helpers

            if __name__ == "__main__":
                resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
                td = TensorDict({"x": torch.randn(300 * 64, 1024)}, [300 * 64])
                kept = list(td.map_iter(helpers.add_one, num_workers=2, chunksize=64,
                                        generator=torch.Generator()))
                print(len(kept), bool(torch.equal(kept[-1]["y"], td["x"][-64:] + 1)))
            """
        )
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(root, "src"), root])}
    res = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["300", "True"]


@pytest.mark.keeps_children
def test_results_finishing_after_close_never_write_to_reused_descriptors(tmp_path):
    td = TensorDict({"x": torch.ones(40, 4)}, [40])
    with mp.get_context("fork").Pool(2) as pool:
        it = td.map_iter(helpers.busy_sum, chunksize=1, pool=pool)
        next(it)
        it.close()  # chunks are still running in the pool
        files = [open(tmp_path / f"victim{i}.txt", "w") for i in range(8)]  # noqa: SIM115
        pool.close()
        pool.join()  # every callback of the chunks still running has run
        for f in files:
            f.close()
    assert all((tmp_path / f"victim{i}.txt").read_text() == "" for i in range(8))


@pytest.mark.keeps_children
def test_repeated_calls_do_not_leak_descriptors_in_a_user_pool():
    with mp.get_context("fork").Pool(1) as pool:
        td = TensorDict({"x": torch.ones(4, 2)}, [4])
        list(td.map_iter(helpers.as_tensor, chunksize=2, pool=pool))
        before = pool.apply(helpers.count_fds)
        for _ in range(30):
            list(td.map_iter(helpers.as_tensor, chunksize=2, pool=pool))
        assert pool.apply(helpers.count_fds) <= before + 2


@pytest.mark.keeps_children
def test_dead_worker_with_tensor_results_leaves_a_torch_pool_usable():
    import torch.multiprocessing as tmp

    with tmp.get_context("fork").Pool(2) as pool:
        td = TensorDict({"x": torch.arange(8.0)}, [8])
        with pytest.raises(WorkerDiedError) as info:
            list(td.map_iter(helpers.exit_on_three_tensor, chunksize=1, pool=pool))
        assert info.value.chunk == 3 and info.value.exitcode == 3
        assert torch.equal(pool.apply(helpers.as_tensor, (td,)), td["x"] * 2)


def test_map_iter_keeps_the_users_frozen_objects_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        td = TensorDict({"x": torch.ones(8)}, [8])
        list(
            td.map_iter(helpers.as_tensor, num_workers=2, chunksize=2, generator=torch.Generator())
        )
        # gc.unfreeze() would empty the permanent generation; frozen objects that are freed
        # meanwhile (caches of a long test session) leave it one by one, hence the margin
        assert gc.get_freeze_count() >= frozen * 0.9
    finally:
        gc.unfreeze()


def test_dead_worker_is_reported_while_its_grandchild_still_runs(tmp_path, monkeypatch):
    marker = tmp_path / "grandchild.pid"
    monkeypatch.setenv("TD_TEST_GRANDCHILD", str(marker))
    td = TensorDict({"x": torch.arange(4.0)}, [4])
    try:
        with pytest.raises(WorkerDiedError, match="chunk 1"):
            list(
                td.map_iter(
                    helpers.orphan_grandchild_then_exit,
                    num_workers=2,
                    chunksize=1,
                    generator=torch.Generator(),
                )
            )
        grandchild = int(marker.read_text())
        assert psutil.pid_exists(grandchild), "the error came only after the grandchild exited"
    finally:
        if marker.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(marker.read_text()), signal.SIGKILL)


def test_retired_workers_that_cannot_exit_do_not_block_the_job():
    td = TensorDict({"x": torch.arange(6.0)}, [6])
    out = list(
        td.map_iter(
            helpers.leave_a_thread,
            num_workers=2,
            chunksize=1,
            max_tasks_per_child=1,
            generator=torch.Generator(),
        )
    )
    assert torch.equal(torch.cat([o["y"] for o in out]), td["x"] + 1)
