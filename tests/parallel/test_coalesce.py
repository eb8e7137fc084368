"""Tiny chunks: small results travel home several per message, and every guarantee holds.

The unit tests drive :class:`~tensordict.parallel.coalesce.Coalescer` directly. The map_iter
tests force the tiny-chunk mode from the first result (thresholds raised in the parent; forked
workers inherit them), so they do not depend on the speed of the machine.
"""

from __future__ import annotations

import pickle

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import WorkerDiedError
from tensordict.parallel import WorkerPool, coalesce, engine, window, worker
from tensordict.parallel.coalesce import FULL, HELD, MAX_HELD, Coalescer, unpack_groups
from tests.parallel import helpers

N = 2000  # chunks of one row: a few ms of work per worker


def td_y(value: float, n: int = 1) -> TensorDict:
    return TensorDict({"y": torch.full((n,), float(value))}, [n])


def round_trip(held: Coalescer) -> tuple[list[int], list]:
    tag, ks, groups = pickle.loads(pickle.dumps(held.take(), protocol=5))
    assert tag == coalesce.BATCH_TAG
    return ks, unpack_groups(groups)


def test_held_results_of_several_layouts_come_back_in_order():
    other = TensorDict({"a": torch.arange(6, dtype=torch.int16).view(2, 3)}, [2]).lock_()
    scalar = TensorDict({"s": torch.tensor(1.5, dtype=torch.float64)}, [])
    results = [td_y(0), td_y(1), None, None, other, td_y(2), scalar, td_y(3, n=2)]
    held = Coalescer()
    for k, r in enumerate(results):
        assert held.hold(k, r, 1e-6, 0.0) == HELD
    ks, back = round_trip(held)
    assert ks == list(range(len(results))) and len(held) == 0
    for want, got in zip(results, back):
        if want is None:
            assert got is None
            continue
        assert got.batch_size == want.batch_size and got.is_locked == want.is_locked
        keys = list(want.keys())
        assert list(got.keys()) == keys
        for key in keys:
            assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key])


def test_views_non_contiguous_and_empty_leaves_come_back_with_their_values():
    base = torch.arange(24.0).view(2, 12)
    results = [
        TensorDict({"t": base.view(2, 3, 4).transpose(1, 2)}, [2]),  # not contiguous
        TensorDict({"o": base[1, 4:8]}, [4]),  # a view at an offset of a larger storage
        TensorDict({"e": torch.zeros(2, 0), "i": torch.arange(2)}, [2]),  # an empty leaf
    ]
    held = Coalescer()
    for k, r in enumerate(results):
        assert held.hold(k, r, 1e-6, 0.0) == HELD
    base.zero_()  # after holding: what was held is kept
    _, back = round_trip(held)
    assert torch.equal(back[0]["t"], torch.arange(24.0).view(2, 3, 4).transpose(1, 2))
    assert torch.equal(back[1]["o"], torch.arange(16.0, 20.0))
    assert back[2]["e"].shape == (2, 0) and torch.equal(back[2]["i"], torch.arange(2))


def test_results_sharing_a_buffer_do_not_alias_each_other():
    held = Coalescer()
    for k in range(3):
        held.hold(k, td_y(k), 1e-6, 0.0)
    _, back = round_trip(held)
    back[0]["y"].add_(100)
    assert [float(r["y"]) for r in back] == [100.0, 1.0, 2.0]


@pytest.mark.parametrize(
    "result",
    [
        torch.zeros(1),  # a bare tensor
        td_y(0, n=2000),  # larger than SMALL_BYTES
        TensorDict({"y": torch.zeros(1, requires_grad=True)}, [1]),
        TensorDict({"y": torch.zeros(1, dtype=torch.bfloat16)}, [1]),  # numpy cannot hold it
        TensorDict({"n": TensorDict({"y": torch.zeros(1)}, [1])}, [1]),  # nested
        TensorDict({}, [1]),
    ],
    ids=["tensor", "large", "grad", "bfloat16", "nested", "empty"],
)
def test_results_that_cannot_be_packed_are_not_held(result):
    assert Coalescer().hold(0, result, 1e-6, 0.0) == 0


def test_a_slow_chunk_is_not_held():
    assert Coalescer().hold(0, td_y(0), 2 * coalesce.FAST_SECONDS, 0.0) == 0


def test_count_bytes_and_age_bounds_ask_for_a_flush():
    held = Coalescer()
    states = [held.hold(k, td_y(k), 1e-6, 0.0) for k in range(MAX_HELD)]
    assert states == [HELD] * (MAX_HELD - 1) + [FULL]
    held = Coalescer()
    big = td_y(0, n=coalesce.SMALL_BYTES // 4)  # 4 KiB each
    states = [held.hold(k, big, 1e-6, 0.0) for k in range(coalesce.MAX_BYTES // 4096)]
    assert states[-1] == FULL and set(states[:-1]) == {HELD}
    held = Coalescer()
    assert held.hold(0, td_y(0), 1e-6, 10.0) == HELD
    assert held.hold(1, td_y(1), 1e-6, 10.0 + 2 * coalesce.MAX_AGE_SECONDS) == FULL


# ---------------------------------------------------------------------- through map_iter
@pytest.fixture
def always_tiny(monkeypatch):
    """Tiny-chunk mode from the first result on, every result held (workers forked after)."""
    monkeypatch.setattr(window, "TINY_CHUNK_SECONDS", 10.0)
    monkeypatch.setattr(coalesce, "FAST_SECONDS", 10.0)
    monkeypatch.setattr(coalesce, "MAX_AGE_SECONDS", 10.0)
    batches = []
    collect = engine.OwnPool._collect_batch

    def counting(self, worker, ks, results, events):
        batches.append(len(ks))
        collect(self, worker, ks, results, events)

    monkeypatch.setattr(engine.OwnPool, "_collect_batch", counting)
    return batches


def source(n: int = N) -> TensorDict:
    return TensorDict({"x": torch.arange(float(n))}, [n])


def run(fn, td=None, **kw):
    kw.setdefault("num_workers", 2)
    kw.setdefault("chunksize", 1)
    td = source() if td is None else td
    return td.map_iter(fn, mp_start_method="fork", generator=torch.Generator(), **kw)


def test_tiny_chunks_come_back_in_order_several_per_message(always_tiny):
    got = torch.cat([r["y"] for r in run(helpers.add_one)])
    assert torch.equal(got, torch.arange(float(N)) + 1)
    assert max(always_tiny) > 1  # results did travel together
    assert sum(always_tiny) > N // 2


def test_tiny_chunks_of_a_memmap_source_are_cut_from_runs_and_stay_memory_mapped_and_locked(
    always_tiny, tmp_path, monkeypatch
):
    taken_alone = torch.zeros(1, dtype=torch.int64).share_memory_()  # seen by forked workers
    take = worker.take

    def counting_take(*args):
        taken_alone.add_(1)
        return take(*args)

    monkeypatch.setattr(worker, "take", counting_take)
    td = source().memmap_(tmp_path / "src")
    flags = torch.cat([r["flags"] for r in run(helpers.describe_chunk, td=td)])
    assert len(flags) == N and flags[:, :3].all() and (flags[:, 3] == 1).all()
    assert int(taken_alone) < N // 4  # most chunks came from one slice of their run
    got = torch.cat([r["y"] for r in run(helpers.add_one, td=td)])
    assert torch.equal(got, td["x"] + 1)


def test_mixed_layouts_none_and_large_results_keep_their_order(always_tiny):
    td = source(300)
    want = [helpers.mixed_results(td[k : k + 1]) for k in range(300)]
    got = list(run(helpers.mixed_results, td=td))
    assert len(got) == 300
    for w, g in zip(want, got):
        assert (w is None and g is None) or (w == g).all()


def test_an_error_is_raised_at_its_place_after_every_result_before_it(always_tiny):
    got = []
    with pytest.raises(ValueError, match="bad chunk") as info:
        for r in run(helpers.raise_at_tiny_fail):
            got.append(float(r["y"]))
    assert got == [float(k + 1) for k in range(helpers.TINY_FAIL_AT)]
    assert any(f"chunk {helpers.TINY_FAIL_AT}" in note for note in info.value.__notes__)


def test_a_dead_worker_names_the_first_chunk_it_did_not_deliver(always_tiny):
    got = 0
    with pytest.raises(WorkerDiedError, match="before delivering") as info:
        for _ in run(helpers.exit_at_tiny_fail):
            got += 1
    err = info.value
    assert got <= err.chunk <= helpers.TINY_FAIL_AT
    assert err.exitcode == 5 and str(err.pid) in str(err)


def test_worker_info_names_each_chunk_and_max_tasks_per_child_holds(always_tiny):
    rows = torch.cat([r["who"] for r in run(helpers.chunk_and_worker, max_tasks_per_child=300)])
    assert torch.equal(rows[:, 0], torch.arange(N))
    per_worker = torch.bincount(rows[:, 1])
    assert len(per_worker) >= N // 300 and int(per_worker.max()) <= 300


def test_shuffled_tiny_chunks_cover_every_row_once(always_tiny):
    got = torch.cat([r["y"] for r in run(helpers.add_one, shuffle=True)])
    assert torch.equal(got.sort().values, torch.arange(float(N)) + 1)


def test_map_into_a_memmap_out_with_tiny_chunks(always_tiny, tmp_path):
    td = source()
    out = TensorDict({"y": torch.zeros(N)}, [N]).memmap_(tmp_path / "out")
    td.map(helpers.fill_out, num_workers=2, chunksize=1, out=out, generator=torch.Generator())
    assert torch.equal(out["y"], td["x"] * 10)
    assert max(always_tiny) > 1  # the workers' None results travelled together


def test_break_in_tiny_mode_leaves_a_worker_pool_usable(always_tiny):
    with WorkerPool(2, generator=torch.Generator().manual_seed(0)) as pool:
        td = source()
        for i, _ in enumerate(td.map_iter(helpers.add_one, chunksize=1, pool=pool)):
            if i == 500:
                break
        got = torch.cat([r["y"] for r in td.map_iter(helpers.add_one, chunksize=1, pool=pool)])
        assert torch.equal(got, td["x"] + 1)
    assert max(always_tiny) > 1


def test_a_call_starts_once_the_earlier_calls_stale_chunks_are_answered(
    always_tiny, tmp_path, monkeypatch
):
    # regression: after a break in tiny mode both workers held more stale chunks than the next
    # call's (normal) depth; their answers, arriving after the call began, were dropped without
    # an event, so the call never sent a chunk and waited forever
    gate = tmp_path / "gate"
    monkeypatch.setenv("TD_TEST_GATE", str(gate))
    begin = engine.OwnPool.begin

    def begin_then_open_the_gate(self, job):
        begin(self, job)  # the stale chunks are still running: nothing to drop yet
        gate.touch()

    td = source(200)
    with WorkerPool(2, generator=torch.Generator().manual_seed(0)) as pool:
        # the gate stays shut for this call: only chunk 0 can answer, so what each worker holds
        # at the break is decided by the dispatch alone, not by how fast the workers run
        for _ in td.map_iter(helpers.wait_for_gate_after_chunk_zero, chunksize=1, pool=pool):
            break  # both workers hold runs of chunks, blocked on the gate
        stale = [w.stale for w in pool._pool.workers.values()]
        assert len(stale) == 2 and min(stale) >= 2, stale
        monkeypatch.setattr(engine.OwnPool, "begin", begin_then_open_the_gate)  # the next call's
        got = torch.cat([r["y"] for r in td.map_iter(helpers.add_one, chunksize=1, pool=pool)])
        assert torch.equal(got, td["x"] + 1)


def test_a_result_in_a_buffer_fn_reuses_is_sent_as_it_was_when_returned(always_tiny):
    # regression: held results were packed when sent, after fn had overwritten their buffer
    got = torch.cat([r["y"] for r in run(helpers.reuse_output_buffer)])
    assert torch.equal(got, torch.arange(float(N)) + 1)
    assert max(always_tiny) > 1
