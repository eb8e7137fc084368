"""pool=: a stdlib or torch.multiprocessing pool is used as is and stays usable."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch
import torch.multiprocessing as tmp

from tensordict import TensorDict
from tensordict.errors import WorkerDiedError
from tests.parallel import helpers

pytestmark = pytest.mark.keeps_children


@pytest.fixture(params=["stdlib", "torch"])
def pool(request):
    ctx = mp.get_context("fork") if request.param == "stdlib" else tmp.get_context("fork")
    p = ctx.Pool(2)
    yield p
    p.terminate()
    p.join()


def source(n: int = 12) -> TensorDict:
    return TensorDict({"x": torch.arange(float(n))}, [n])


def test_results_in_order_through_a_user_pool(pool):
    out = list(source().map_iter(helpers.add_one, chunksize=3, pool=pool))
    assert torch.equal(torch.cat([o["y"] for o in out]), source()["x"] + 1)


def test_memmap_source_through_a_user_pool(pool, memmap_td):
    out = list(memmap_td.map_iter(helpers.describe_chunk, chunksize=5, pool=pool))
    assert torch.cat([o["flags"] for o in out])[:, :3].all()


def test_shuffle_through_a_user_pool_covers_every_element(pool, memmap_td):
    out = list(memmap_td.map_iter(helpers.add_one, chunksize=3, shuffle=True, pool=pool))
    assert sorted((torch.cat([o["y"] for o in out]) - 1).tolist()) == memmap_td["x"].tolist()


def test_user_pool_workers_are_left_unseeded_but_know_their_info(pool):
    out = list(source(4).map_iter(helpers.worker_identity, chunksize=1, pool=pool))
    rows = torch.cat([o["info"] for o in out])
    assert (rows[:, 1] == -1).all(), "no seed is set in a user's pool"
    assert (rows[:, 2] == 2).all() and set(rows[:, 0].tolist()) <= {0, 1}


def test_user_pool_needs_no_generator_and_does_not_warn(pool, recwarn):
    list(source().map_iter(helpers.add_one, chunksize=6, pool=pool))
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)]


def test_exception_in_fn_through_a_user_pool_names_the_chunk(pool):
    with pytest.raises(ValueError, match="bad chunk three") as info:
        list(source().map_iter(helpers.raise_on_three, chunksize=1, pool=pool))
    assert any("chunk 3" in n for n in info.value.__notes__)
    assert pool.apply(abs, (-3,)) == 3, "the pool stays usable"


def test_dead_worker_in_a_user_pool_raises_instead_of_hanging(pool):
    with pytest.raises(WorkerDiedError, match="chunk 3") as info:
        list(source().map_iter(helpers.exit_on_three, chunksize=1, pool=pool))
    assert info.value.chunk == 3
    assert info.value.exitcode == 3 and "exit code 3" in str(info.value)
    assert pool.apply(abs, (-3,)) == 3, "the pool replaced the worker and stays usable"


def test_worker_killed_by_a_signal_in_a_user_pool_names_the_signal(pool):
    with pytest.raises(WorkerDiedError, match="SIGKILL") as info:
        list(source().map_iter(helpers.sigkill_on_three, chunksize=1, pool=pool))
    assert info.value.chunk == 3 and info.value.exitcode == -9


def test_early_close_leaves_the_user_pool_open(pool):
    it = source(100).map_iter(helpers.add_one, chunksize=1, pool=pool)
    next(it)
    it.close()
    assert pool.apply(abs, (-4,)) == 4


def test_map_with_a_user_pool(pool):
    out = source().map(helpers.add_one, chunksize=5, pool=pool)
    assert torch.equal(out["y"], source()["x"] + 1)


def test_map_with_a_user_pool_writes_memmap_out(pool, memmap_td, tmp_path):
    out = TensorDict({"y": torch.zeros(20)}, [20]).memmap_like(tmp_path / "out")
    memmap_td.map(helpers.fill_out, out=out, chunksize=4, pool=pool)
    assert torch.equal(out["y"], memmap_td["x"] * 10)


def test_spawn_pool_with_plain_source():
    with mp.get_context("spawn").Pool(2) as p:
        out = list(source().map_iter(helpers.add_one, chunksize=4, pool=p))
    assert torch.equal(torch.cat([o["y"] for o in out]), source()["x"] + 1)


def test_a_plain_source_is_not_moved_into_shared_memory_by_a_users_pool(pool):
    # each task carries its chunk's own rows (plain pickle), not the source's storage through
    # torch's sharing reduction
    td = source(12)
    out = list(td.map_iter(helpers.add_one, chunksize=3, pool=pool, index_with_generator=True))
    assert torch.equal(torch.cat([o["y"] for o in out]), td["x"] + 1)
    assert not td["x"].is_shared()
