"""WorkerPool: workers kept across map_iter/map calls, with every guarantee of a call's own pool."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import PoolBusyError, PoolClosedError, WorkerDiedError
from tensordict.parallel import WorkerPool
from tests.parallel import helpers


def source(n: int = 12) -> TensorDict:
    return TensorDict({"x": torch.arange(float(n))}, [n])


def ys(results) -> torch.Tensor:
    return torch.cat([r["y"] for r in results])


@pytest.fixture
def pool():
    with WorkerPool(2, generator=torch.Generator().manual_seed(0)) as p:
        yield p


def pids(td, pool) -> set[int]:
    return set(torch.cat(list(td.map_iter(helpers.pid_of_worker, chunksize=2, pool=pool))).tolist())


def maps(td, pool, chunksize) -> torch.Tensor:
    return torch.cat(
        [r["m"] for r in td.map_iter(helpers.mapping_of_x, chunksize=chunksize, pool=pool)]
    )


def test_workers_serve_successive_calls_in_order(pool):
    td = source()
    first = pids(td, pool)
    for _ in range(3):
        assert torch.equal(ys(td.map_iter(helpers.add_one, chunksize=5, pool=pool)), td["x"] + 1)
    assert pids(td, pool) == first and len(first) == 2


def test_map_on_a_worker_pool_reassembles(pool):
    td = source()
    assert torch.equal(td.map(helpers.add_one, chunksize=5, pool=pool)["y"], td["x"] + 1)


def test_map_writes_a_memmap_out_from_the_workers(pool, tmp_path):
    td = source(10)
    out = TensorDict({"y": torch.zeros(10)}, [10]).memmap_(tmp_path / "out")
    td.map(helpers.fill_out, chunksize=3, out=out, pool=pool)
    assert torch.equal(out["y"], td["x"] * 10)


def test_break_leaves_the_pool_usable_and_stale_results_are_dropped(pool):
    td = source(20)
    for _ in td.map_iter(helpers.add_one, chunksize=1, pool=pool):
        break
    assert torch.equal(ys(td.map_iter(helpers.add_one, chunksize=3, pool=pool)), td["x"] + 1)


def test_error_in_fn_is_raised_in_order_and_the_pool_stays_usable(pool):
    got = []
    with pytest.raises(ValueError, match="bad chunk three"):
        for r in source().map_iter(helpers.raise_on_three, chunksize=1, pool=pool):
            got.append(int(r["y"]))
    assert got == [1, 2, 3]
    assert torch.equal(
        ys(source().map_iter(helpers.add_one, chunksize=4, pool=pool)), source()["x"] + 1
    )


def test_dead_worker_raises_and_is_replaced_for_the_next_call(pool):
    td = source()
    before = pids(td, pool)
    with pytest.raises(WorkerDiedError) as info:
        list(td.map_iter(helpers.exit_on_three, chunksize=1, pool=pool))
    assert info.value.chunk == 3 and info.value.pid in before
    assert torch.equal(ys(td.map_iter(helpers.add_one, chunksize=1, pool=pool)), td["x"] + 1)
    after = pids(td, pool)
    assert len(after) == 2 and info.value.pid not in after


def test_second_open_call_raises_pool_busy(pool):
    first = source().map_iter(helpers.add_one, chunksize=1, pool=pool)
    next(first)
    with pytest.raises(PoolBusyError, match="close"):
        next(source().map_iter(helpers.add_one, chunksize=1, pool=pool))
    first.close()
    assert len(list(source().map_iter(helpers.add_one, chunksize=1, pool=pool))) == 12


def test_closed_pool_raises_pool_closed():
    pool = WorkerPool(1, generator=torch.Generator())
    list(source().map_iter(helpers.add_one, chunksize=6, pool=pool))
    pool.close()
    pool.close()
    with pytest.raises(PoolClosedError, match="closed"):
        list(source().map_iter(helpers.add_one, chunksize=6, pool=pool))
    assert issubclass(PoolClosedError, ValueError)


def test_closing_the_pool_during_a_call_raises_pool_closed_at_the_next_result():
    pool = WorkerPool(2, generator=torch.Generator())
    it = source(40).map_iter(helpers.add_one, chunksize=1, pool=pool)
    next(it)
    pool.close()
    with pytest.raises(PoolClosedError, match="while this map_iter call was running"):
        list(it)


def test_close_stops_workers_that_still_hold_chunks():
    pool = WorkerPool(2, generator=torch.Generator())
    it = source(8).map_iter(helpers.busy_sum, chunksize=1, pool=pool)
    next(it)
    it.close()
    pool.close()  # the autouse fixture checks that no worker is left


def test_worker_info_ids_and_seeds_hold_across_calls():
    with WorkerPool(2, generator=torch.Generator().manual_seed(7)) as pool:
        rows = [
            torch.cat(
                [
                    r["info"]
                    for r in source().map_iter(helpers.worker_identity, chunksize=1, pool=pool)
                ]
            )
            for _ in range(2)
        ]
    for info in rows:
        ids, seeds = info[:, 0], info[:, 1]
        assert set(ids.tolist()) <= {0, 1} and (info[:, 2] == 2).all()
        assert ((seeds - ids) == (seeds - ids)[0]).all()  # seed = base + id, one base
    assert (rows[0][:, 1] - rows[0][:, 0])[0] == (rows[1][:, 1] - rows[1][:, 0])[0]


def test_worker_rng_carries_over_from_one_call_to_the_next(pool):
    td = source(2)
    draws = [
        torch.cat([r["r"] for r in td.map_iter(helpers.draw_random, chunksize=1, pool=pool)])
        for _ in range(2)
    ]
    assert not torch.equal(draws[0], draws[1])


def test_max_tasks_per_child_counts_across_calls():
    with WorkerPool(1, generator=torch.Generator(), max_tasks_per_child=2) as pool:
        seen = [pids(source(2), pool) for _ in range(3)]
    assert seen[0] == seen[1] != seen[2]  # one chunk per call: replaced after two calls


def test_memmap_mapping_is_kept_across_calls_and_in_place_writes_are_seen(pool, tmp_path):
    td = TensorDict({"x": torch.arange(8)}, [8]).memmap_(tmp_path / "a")
    first = maps(td, pool, 8)
    td["x"][:] = torch.arange(100, 108)  # the same files, rewritten in place
    second = maps(td, pool, 8)
    assert first[0, 1] == 0 and second[0, 1] == 100


def test_mapping_address_is_the_same_on_the_next_call(tmp_path):
    with WorkerPool(1, generator=torch.Generator()) as pool:
        td = TensorDict({"x": torch.arange(8)}, [8]).memmap_(tmp_path / "a")
        a, b = (maps(td, pool, 8) for _ in range(2))
    assert a[0, 0] == b[0, 0]


def test_files_replaced_between_calls_or_another_tensordict_are_read_fresh(pool, tmp_path):
    path = tmp_path / "a"
    td = TensorDict({"x": torch.arange(8)}, [8]).memmap_(path)
    list(td.map_iter(helpers.mapping_of_x, chunksize=4, pool=pool))
    replaced = TensorDict({"x": torch.arange(50, 58)}, [8]).memmap_(path, existsok=True)
    got = maps(replaced, pool, 4)
    assert got[:, 1].tolist() == [50] * 4 + [54] * 4
    other = TensorDict({"x": torch.arange(70, 78)}, [8]).memmap_(tmp_path / "b")
    got = maps(other, pool, 4)
    assert got[:, 1].tolist() == [70] * 4 + [74] * 4


def test_shuffled_epochs_over_a_memmap_cover_every_row(pool, tmp_path):
    td = TensorDict({"x": torch.arange(30.0)}, [30]).memmap_(tmp_path / "s")
    for _ in range(2):
        got = ys(td.map_iter(helpers.add_one, chunksize=4, shuffle=True, pool=pool))
        assert torch.equal(got.sort().values, td["x"] + 1)


def test_spawn_pool_reads_memmap_and_plain_sources(tmp_path):
    plain = source(6)
    mm = plain.clone().memmap_(tmp_path / "m")
    with WorkerPool(1, generator=torch.Generator(), mp_start_method="spawn") as pool:
        for td in (plain, mm, plain):
            assert torch.equal(
                ys(td.map_iter(helpers.add_one, chunksize=4, pool=pool)), plain["x"] + 1
            )


def test_bad_arguments_are_refused_before_any_worker_starts():
    with pytest.raises(ValueError, match="num_workers"):
        WorkerPool(0)
    with pytest.raises(ValueError, match="max_tasks_per_child"):
        WorkerPool(1, max_tasks_per_child=0)
