"""Chunks of milliseconds: workers hold answers back and send several per message.

The unit tests drive :class:`~tensordict.parallel.held.HeldAnswers` over a socket pair.
The map_iter tests force the mode from the first result (thresholds changed in the parent, where
they are read), so they do not depend on the speed of the machine; they count, in the parent,
the task messages that allowed holding and the answers that came several per read.
"""

from __future__ import annotations

import collections
import socket

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import NotPicklableError, WorkerDiedError
from tensordict.parallel import WorkerPool, engine, window
from tensordict.parallel import held as held_module
from tensordict.parallel.channel import Channel
from tensordict.parallel.held import HOLD_MAX, HeldAnswers
from tests.parallel import helpers

N = 300


def big(x: float) -> TensorDict:
    return TensorDict({"y": torch.full((32_768,), x)}, [])


def test_held_answers_arrive_in_order_with_their_segments_in_one_read():
    a, b = socket.socketpair()
    sender, receiver = Channel(a), Channel(b)
    held = HeldAnswers()
    sent = [("ok", k, big(float(k)) if k % 2 else torch.arange(k)) for k in range(HOLD_MAX)]
    flags = [held.add(sender.encode(msg), 0.0) for msg in sent]
    assert flags == [False] * (HOLD_MAX - 1) + [True]  # full: send now
    sent[1][2]["y"].zero_()  # encoded when held: later changes to the result do not travel
    held.send(sender)
    assert len(held) == 0
    assert receiver.fill()
    got = list(receiver.messages())
    assert [m[1] for m in got] == list(range(HOLD_MAX))
    for k, (_, _, value) in enumerate(got):
        want = big(float(k))["y"] if k % 2 else torch.arange(k)
        assert torch.equal(value["y"] if k % 2 else value, want)
    sender.close()
    receiver.close()


def test_an_old_answer_asks_for_a_send():
    held = HeldAnswers()
    assert held.add((b"", None), 5.0) is False
    assert held.add((b"", None), 5.0 + 2 * held_module.HOLD_AGE_SECONDS) is True


@pytest.fixture
def always_held(monkeypatch):
    """Held answers from the first result on; counts what the parent sends and receives."""
    monkeypatch.setattr(held_module, "HOLD_STARVED", 0.0)
    monkeypatch.setattr(held_module, "HOLD_PACE_SECONDS", 10.0)
    monkeypatch.setattr(window, "TINY_CHUNK_SECONDS", -1.0)  # never tiny
    seen = {"hold_tasks": 0, "per_read": []}
    send, collect = engine.OwnPool._send, engine.OwnPool._collect

    def counting_send(self, batches, tiny=False, hold=False):
        seen["hold_tasks"] += bool(hold and batches)
        send(self, batches, tiny, hold)

    def counting_collect(self, worker, events):
        before = len(events)
        collect(self, worker, events)
        seen["per_read"].append(len(events) - before)

    monkeypatch.setattr(engine.OwnPool, "_send", counting_send)
    monkeypatch.setattr(engine.OwnPool, "_collect", counting_collect)
    return seen


def source(n: int = N) -> TensorDict:
    return TensorDict({"x": torch.arange(float(n))}, [n])


def run(fn, td=None, method="fork", **kw):
    kw.setdefault("num_workers", 2)
    kw.setdefault("chunksize", 1)
    td = source() if td is None else td
    return td.map_iter(fn, mp_start_method=method, generator=torch.Generator(), **kw)


def same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if set(a.keys()) != set(b.keys()) or a.batch_size != b.batch_size:
        return False
    keys = list(a.keys())  # (iterating a tensordict walks its batch dimension)
    return all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in keys
    )


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_results_of_every_kind_come_back_in_order_several_per_message(always_held, method):
    td = source()
    want = [helpers.held_mixed(td[k : k + 1]) for k in range(N)]
    got = list(run(helpers.held_mixed, td=td, method=method))
    assert len(got) == N
    assert all(same(w, g) for w, g in zip(want, got))
    assert always_held["hold_tasks"] > 0
    assert max(always_held["per_read"]) > 1  # answers did travel together


def test_results_the_caller_keeps_are_never_overwritten(always_held):
    kept = list(run(helpers.big_result))  # 128 KiB each, through reused segments
    assert [float(r["y"][0]) for r in kept] == [float(k) for k in range(N)]
    assert all(bool((r["y"] == r["y"][0]).all()) for r in kept)
    assert max(always_held["per_read"]) > 1


def test_an_error_is_raised_at_its_place_after_every_result_before_it(always_held):
    got = []
    with pytest.raises(ValueError, match="bad chunk") as info:
        for r in run(helpers.raise_at_held_fail):
            got.append(float(r["y"][0]))
    assert got == [float(k) for k in range(helpers.HELD_FAIL_AT)]
    assert any(f"chunk {helpers.HELD_FAIL_AT}" in note for note in info.value.__notes__)


def test_a_result_that_does_not_pickle_raises_at_its_place(always_held):
    got = 0
    with pytest.raises(NotPicklableError, match=f"chunk {helpers.HELD_FAIL_AT}"):
        for _ in run(helpers.lambda_at_held_fail):
            got += 1
    assert got == helpers.HELD_FAIL_AT


def test_a_worker_killed_with_answers_held_names_the_first_chunk_it_did_not_deliver(
    always_held,
):
    got = []
    with pytest.raises(WorkerDiedError, match="before delivering") as info:
        for r in run(helpers.sigkill_at_held_fail):
            got.append(float(r["y"][0]))
    err = info.value
    assert got == [float(k) for k in range(len(got))]
    assert len(got) <= err.chunk <= helpers.HELD_FAIL_AT
    assert err.exitcode == -9


def test_a_worker_pool_holds_answers_across_calls_and_after_a_break(always_held):
    td = source()
    with WorkerPool(2, generator=torch.Generator(), mp_start_method="fork") as pool:
        for _ in range(2):
            got = [
                float(r["y"][0]) for r in td.map_iter(helpers.big_result, chunksize=1, pool=pool)
            ]
            assert got == [float(k) for k in range(N)]
        for _ in td.map_iter(helpers.big_result, chunksize=1, pool=pool):
            break  # the chunks in flight finish in the background, their answers are dropped
        got = [float(r["y"][0]) for r in td.map_iter(helpers.big_result, chunksize=1, pool=pool)]
        assert got == [float(k) for k in range(N)]
    assert always_held["hold_tasks"] > 0 and max(always_held["per_read"]) > 1


@pytest.mark.parametrize("rows_travel", [False, True])
def test_a_worker_never_holds_more_chunks_than_the_held_depth(
    always_held, monkeypatch, rows_travel
):
    most = [0]
    submit = engine.OwnPool.submit

    def watching_submit(self, ks, payload):
        taken = submit(self, ks, payload)
        for w in self.workers.values():
            most[0] = max(most[0], len(w.assigned) + w.stale)
        return taken

    monkeypatch.setattr(engine.OwnPool, "submit", watching_submit)
    if rows_travel:  # a WorkerPool over a tensordict in memory: each task carries its rows
        with WorkerPool(2, generator=torch.Generator(), mp_start_method="fork") as pool:
            results = source().map_iter(helpers.big_result, chunksize=1, pool=pool)
            got = [float(r["y"][0]) for r in results]
        depth = held_module.HOLD_DEPTH_CARRYING
    else:  # workers forked from the source: tasks are chunk numbers
        got = [float(r["y"][0]) for r in run(helpers.big_result)]
        depth = held_module.HOLD_DEPTH
    assert got == [float(k) for k in range(N)]
    assert always_held["hold_tasks"] > 0
    assert 2 < most[0] <= depth  # deeper than 2 while held, never beyond


def test_a_new_call_keeps_the_pace_of_the_waits_but_holds_nothing_before_its_first_result():
    import multiprocessing

    pool = engine.OwnPool(multiprocessing.get_context("fork"), 2, None, 0, 1, None)
    pool.pace = 1e-3  # as drive() sets it: results ~1 ms apart
    try:
        policy = pool.hold
        policy.result(64 << 10, ok=True)
        for _ in range(10):  # a consumer the workers keep waiting
            policy.waited(found=False)
        assert policy.holding(tiny=False, pace=1e-3)
        pool.begin({"fn": abs})  # the next epoch of a WorkerPool
        assert policy.starved >= held_module.HOLD_STARVED  # the waits of before still count
        assert not policy.holding(tiny=False, pace=1e-3)  # this call's results: size unknown
        assert pool.hold_depth() == 2
        policy.result(64 << 10, ok=True)  # its first result came, small
        assert policy.holding(tiny=False, pace=1e-3)
        assert pool.hold_depth() == held_module.HOLD_DEPTH
        policy.result(2 * held_module.HOLD_BYTES, ok=True)  # a large one: back to 2 per worker
        assert pool.hold_depth() == 2
    finally:
        pool.close(abort=False)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_fast_consumer_of_n_workers_keeps_holding_and_a_slow_one_stops(workers):
    policy = held_module.HoldPolicy(workers)
    policy.result(64 << 10, ok=True)
    for _ in range(10):  # the start of a call: the parent waits for the first answers
        policy.waited(found=False)
    assert policy.holding(tiny=False, pace=2e-3)
    for _ in range(30):  # the parent blocks for the first worker's answers, finds the others'
        for i in range(workers):
            policy.waited(found=i > 0)
            assert policy.holding(tiny=False, pace=2e-3)
    waits = 0  # a consumer that finds answers ready every time it looks
    while policy.holding(tiny=False, pace=2e-3) and waits < 50:
        policy.waited(found=True)
        waits += 1
    assert 0 < waits <= 8 * workers


# ---------------------------------------------------------------------- chunk k to worker k % N
class _FakeChannel:
    pending = False
    sock = None

    def __init__(self) -> None:
        self.sent: list = []

    def send(self, msg, plain=False, block=True) -> None:
        self.sent.append(msg)


class _FakeWorker:
    def __init__(self, wid: int, busy: int) -> None:
        self.id, self.quota, self.stale = wid, None, 0
        self.assigned = collections.deque(range(-busy, 0))  # chunks of before
        self.coalescing, self.job_gen, self.watching_writes = False, 0, False
        self.chan = _FakeChannel()


def assign(busy: list[int], chunks: range, depth: int) -> list[list[int]]:
    """Which chunks a pool whose workers already hold ``busy`` chunks hands to each."""
    import multiprocessing

    pool = engine.OwnPool(multiprocessing.get_context("fork"), len(busy), None, 0, 1, None, depth)
    try:
        pool.workers = {i: _FakeWorker(i, b) for i, b in enumerate(busy)}
        pool.submit(chunks, lambda k: None)
        return [[k for batch in w.chan.sent for k, _ in batch] for w in pool.workers.values()]
    finally:
        pool.workers = {}
        pool.close(abort=False)


def test_chunk_k_goes_to_worker_k_mod_n_while_it_is_not_far_busier():
    # worker 1 holds a chunk already: chunk 1 is still its own (the least busy rule would give
    # it to worker 0, which then held as many)
    assert assign([0, 1], range(2), depth=2) == [[0], [1]]
    # worker 1 holds 3 of 4, more than half a queue beyond worker 0: chunk 1 goes to worker 0
    assert assign([0, 3], range(1, 3), depth=4) == [[1, 2], []]
    assert assign([0, 2], range(1, 3), depth=4) == [[2], [1]]


# ---------------------------------------------------------------------- the last chunks
def assign_held(busy: list[int], chunks: range, left: int) -> list[list[int]]:
    """Which chunks a pool whose workers hold answers and already hold ``busy`` chunks hands to
    each, ``left`` chunks (from ``chunks.start`` on) not sent yet."""
    import multiprocessing

    pool = engine.OwnPool(multiprocessing.get_context("fork"), len(busy), None, 0, 1, None)
    try:
        pool.workers = {i: _FakeWorker(i, b) for i, b in enumerate(busy)}
        pool.hold.result(64 << 10, ok=True)
        for _ in range(10):
            pool.hold.waited(found=False)
        pool.pace, pool.left = 2e-3, left
        assert pool.hold_depth() == held_module.HOLD_DEPTH
        pool.submit(chunks, lambda k: None)
        sent = [[msg for msg in w.chan.sent] for w in pool.workers.values()]
        assert all(msg[0] == held_module.HOLD_TAG for msgs in sent for msg in msgs)
        return [[k for msg in msgs for k, _ in msg[1]] for msgs in sent]
    finally:
        pool.workers = {}
        pool.close(abort=False)


def test_the_last_chunks_wait_for_a_worker_about_to_run_dry():
    tail = held_module.HOLD_TAIL * 2
    # 20 chunks left, both workers busy: the first 20 - tail go k % N, the tail stays here
    got = assign_held([5, 5], range(100, 120), left=20)
    assert sorted(got[0] + got[1]) == list(range(100, 120 - tail))
    assert got[0] == list(range(100, 120 - tail, 2))
    # only the tail is left: nothing goes to workers that hold more than their last chunk
    assert assign_held([5, 2], range(120 - tail, 120), left=tail) == [[], []]
    # a worker down to its last chunk (its held answers came) gets the next few, the other none
    run = held_module.HOLD_TAIL_RUN
    assert assign_held([5, 1], range(120 - tail, 120), left=tail) == [
        [],
        list(range(120 - tail, 120 - tail + run)),
    ]
    # both down to their last: the least busy first, then the other
    at = 120 - tail
    first, second = range(at, at + run), range(at + run, at + 2 * run)
    assert assign_held([1, 0], range(at, 120), left=tail) == [list(second), list(first)]


def test_the_last_chunks_go_out_as_before_when_answers_are_not_held():
    # depth 2, answers one per message: every worker's queue is short anyway
    got = assign([1, 1], range(118, 120), depth=2)
    assert got == [[118], [119]]
