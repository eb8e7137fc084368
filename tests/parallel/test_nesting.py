"""fn may call map_iter/map itself (workers are not daemonic), one level deep; where processes
cannot be started, a clear NestedWorkersError says why and what to do."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import NestedWorkersError
from tests.parallel import helpers
from tests.parallel.lifecycle import Harness, wait_gone


def source() -> TensorDict:
    return TensorDict({"x": torch.arange(8.0)}, [8])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_fn_may_run_map_itself(method):
    out = source().map(
        helpers.nested_map,
        num_workers=2,
        chunksize=4,
        mp_start_method=method,
        generator=torch.Generator(),
    )
    assert torch.equal(out["y"], source()["x"] + 1)


def test_pools_nest_at_most_two_levels():
    with pytest.raises(NestedWorkersError, match="nest at most 2 levels"):
        source().map(helpers.nested_twice, num_workers=1, generator=torch.Generator())


@pytest.mark.keeps_children
def test_map_inside_a_daemonic_pool_worker_raises_a_clear_error():
    with (
        mp.get_context("fork").Pool(1) as pool,
        pytest.raises(NestedWorkersError, match="daemonic"),
    ):
        pool.apply(helpers.nested_map, (source(),))


def test_nested_error_is_the_assertion_error_multiprocessing_raised():
    assert issubclass(NestedWorkersError, AssertionError)
    assert issubclass(NestedWorkersError, RuntimeError)


def test_nested_workers_die_when_the_program_is_killed(tmp_path):
    h = Harness("nested", "fork", str(tmp_path / "stderr.txt"))
    try:
        h.expect("ready", running=4)  # every inner worker is inside its fn
        h.snapshot()
        everyone = sorted(h.seen)
        assert len(everyone) >= 6, "2 outer workers and 4 inner ones"
        os.kill(h.proc.pid, signal.SIGKILL)
        assert wait_gone(everyone) == [], "workers outlived the program"
    finally:
        h.close()
