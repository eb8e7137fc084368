"""map_iter / map through a user's ``ray.util.multiprocessing.Pool`` on a local Ray cluster."""

from __future__ import annotations

import functools
import os

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import ChunkError, WorkerDiedError
from tensordict.parallel.worker import RemoteTraceback
from tests.parallel import helpers
from tests.ray import helpers as ray_helpers

ray = pytest.importorskip("ray")


def ys(results):
    return torch.cat([r["y"] for r in results])


def test_memmap_source_results_come_in_chunk_order(pool, memmap_td):
    out = list(memmap_td.map_iter(helpers.add_one, chunksize=3, pool=pool))
    assert torch.equal(ys(out), memmap_td["x"] + 1)


def test_plain_source_results_come_in_chunk_order(pool, plain_td):
    out = list(plain_td.map_iter(helpers.add_one, chunksize=3, pool=pool))
    assert torch.equal(ys(out), plain_td["x"] + 1)


def test_memmap_chunks_reach_fn_as_locked_memmap_views(pool, memmap_td):
    out = list(memmap_td.map_iter(helpers.describe_chunk, chunksize=5, pool=pool))
    assert torch.cat([o["flags"] for o in out])[:, :3].all()


def test_shuffle_covers_every_element_once(pool, memmap_td):
    out = list(memmap_td.map_iter(helpers.add_one, chunksize=3, shuffle=True, pool=pool))
    assert sorted((ys(out) - 1).tolist()) == memmap_td["x"].tolist()


def test_chunksize_zero_passes_elements_one_by_one(pool, memmap_td):
    out = list(memmap_td.map_iter(helpers.add_one, chunksize=0, pool=pool))
    assert [tuple(o.batch_size) for o in out] == [()] * 20
    assert torch.equal(torch.stack([o["y"] for o in out]), memmap_td["x"] + 1)


def test_num_chunks_gives_balanced_chunks(pool, plain_td):
    out = list(plain_td.map_iter(helpers.add_one, num_chunks=3, pool=pool))
    assert [o.batch_size[0] for o in out] == [7, 7, 6]


def test_map_concatenates_the_results(pool, plain_td):
    out = plain_td.map(helpers.add_one, chunksize=6, pool=pool)
    assert torch.equal(out["y"], plain_td["x"] + 1)


def test_map_with_memmap_out_is_written_by_the_actors(pool, memmap_td, tmp_path):
    out = TensorDict({"y": torch.zeros(20)}, [20]).memmap_like(tmp_path / "out")
    returned = memmap_td.map(helpers.fill_out, out=out, chunksize=4, pool=pool)
    assert returned is out
    assert torch.equal(out["y"], memmap_td["x"] * 10)


def test_get_worker_info_answers_inside_fn_unseeded(pool, plain_td):
    out = list(plain_td.map_iter(helpers.worker_identity, chunksize=5, pool=pool))
    rows = torch.cat([o["info"] for o in out])
    assert (rows[:, 0] == -1).all(), "a Ray actor has no id in the job"
    assert (rows[:, 1] == -1).all(), "workers of a user's pool are left unseeded"
    assert (rows[:, 2] == 2).all(), "num_workers is the pool's actor count"
    assert os.getpid() not in rows[:, 3].tolist(), "fn runs in the actors"


def test_pbar_counts_every_chunk(pool, plain_td, capsys):
    pytest.importorskip("tqdm")
    list(plain_td.map_iter(helpers.add_one, chunksize=5, pool=pool, pbar=True))
    assert "4/4" in capsys.readouterr().err


def test_exception_in_fn_keeps_its_type_and_message(pool, plain_td):
    with pytest.raises(ValueError, match="bad chunk three"):
        list(plain_td.map_iter(helpers.raise_on_three, chunksize=1, pool=pool))


def test_exception_in_fn_carries_the_remote_traceback(pool, plain_td):
    with pytest.raises(ValueError) as info:
        list(plain_td.map_iter(helpers.raise_on_three, chunksize=1, pool=pool))
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in raise_on_three" in cause.tb


def test_exception_in_fn_names_the_chunk_in_a_note(pool, memmap_td):
    with pytest.raises(ValueError) as info:
        list(memmap_td.map_iter(helpers.raise_on_three, chunksize=1, pool=pool))
    assert any("chunk 3" in n and "Ray" in n for n in info.value.__notes__)


def test_pool_stays_usable_after_an_exception_in_fn(pool, plain_td):
    with pytest.raises(ValueError):
        list(plain_td.map_iter(helpers.raise_on_three, chunksize=1, pool=pool))
    assert pool.apply(abs, (-3,)) == 3


def test_exception_that_does_not_unpickle_becomes_chunk_error(pool, plain_td):
    with pytest.raises(ChunkError, match="cannot travel"):
        list(plain_td.map_iter(ray_helpers.raise_unpicklable, chunksize=5, pool=pool))


def test_system_exit_in_fn_is_an_error_and_the_actor_survives(pool, plain_td):
    with pytest.raises(SystemExit, match=r"fn called sys\.exit"):
        list(plain_td.map_iter(ray_helpers.exit_via_system_exit, chunksize=1, pool=pool))
    assert pool.map(abs, [-1, -2, -3, -4]) == [1, 2, 3, 4], "both actors still answer"


def test_early_close_leaves_the_pool_usable(pool, memmap_td):
    it = memmap_td.map_iter(helpers.add_one, chunksize=1, pool=pool)
    next(it)
    it.close()
    assert pool.map(abs, [-1, -2, -3, -4]) == [1, 2, 3, 4]


def test_closing_early_cancels_no_task(pool, plain_td, tmp_path, monkeypatch):
    # ray 2.60: cancelling an actor task still queued in this process leaves a hole in the actor's
    # sequence numbers, and the actor holds this process's next tasks for 30 s, then fails them
    # ("timed out waiting for seq_no"). Which task is still queued when a call stops depends on
    # the load, so a call cancels none: chunks in flight run to their end, results discarded.
    cancelled = []
    monkeypatch.setattr(ray, "cancel", lambda ref, **kw: cancelled.append(ref))
    gate = tmp_path / "gate"
    fn = functools.partial(ray_helpers.wait_for_file_after_chunk_zero, str(gate))
    it = plain_td.map_iter(fn, chunksize=1, pool=pool)
    assert torch.equal(next(it)["y"], plain_td["x"][:1] + 1)
    it.close()  # chunks 1, 2, 3 are still running (waiting for the gate)
    assert cancelled == []
    gate.touch()
    assert pool.map(abs, [-1, -2, -3, -4]) == [1, 2, 3, 4]


def test_dead_actor_raises_worker_died_error_naming_the_chunk(one_actor_pool, plain_td):
    # Ray may also fail the task that finished just before the death (its reply was in flight):
    # the error then names that chunk and lists chunk 3 among those lost with the actor.
    with pytest.raises(WorkerDiedError) as info:
        list(plain_td.map_iter(helpers.exit_on_three, chunksize=1, pool=one_actor_pool))
    err = info.value
    assert err.chunk == 3 or (err.chunk == 2 and "chunks [3]" in str(err)), str(err)
    assert isinstance(err.__cause__, ray.exceptions.RayActorError)
