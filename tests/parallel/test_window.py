"""The dispatcher's window: 2 chunks per worker, deeper only while chunks are tiny and fast.

Driven through a fake backend that answers at once and a fake clock, so that "fast" and "slow"
are exact and the test does not depend on the machine's load.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from tensordict.parallel import held
from tensordict.parallel import window as window_module
from tensordict.parallel.engine import TINY_DEPTH
from tensordict.parallel.window import Backend, drive


class InstantBackend(Backend):
    """Answers every chunk it was sent, one per wait(), in order."""

    num_workers = 2

    def __init__(self, deep: bool) -> None:
        self._deep = deep
        self.queue: deque[int] = deque()
        self.sent = 0

    def tiny_depth(self) -> int:
        return TINY_DEPTH if self._deep else 2

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        self.queue.extend(ks)
        self.sent += len(ks)
        return len(ks)

    def wait(self) -> list[tuple[Any, ...]]:
        k = self.queue.popleft()
        return [("ok", k, k)]

    def close(self, abort: bool) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def most_in_flight(monkeypatch, deep: bool, seconds_per_result: float, count: int = 400) -> int:
    clock = Clock()
    monkeypatch.setattr(window_module, "time", clock)
    backend = InstantBackend(deep)
    window = 2 * backend.num_workers
    most, got = 0, []
    for yielded, value in enumerate(drive(backend, count, lambda k: None, window, True), 1):
        got.append(value)
        most = max(most, backend.sent - yielded + 1)
        clock.now += seconds_per_result
    assert got == list(range(count))  # in order, every chunk once
    return most


def test_tiny_fast_small_results_let_the_window_grow(monkeypatch):
    most = most_in_flight(monkeypatch, deep=True, seconds_per_result=10e-6)
    assert 2 * 2 < most <= TINY_DEPTH * 2


@pytest.mark.parametrize(
    ("deep", "seconds"),
    [(True, 1e-3), (False, 10e-6)],
    ids=["slow consumer", "results too large to queue deep"],
)
def test_the_window_stays_at_two_per_worker(monkeypatch, deep, seconds):
    assert most_in_flight(monkeypatch, deep=deep, seconds_per_result=seconds) <= 2 * 2


def test_a_slow_consumer_shrinks_the_window_back(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(window_module, "time", clock)
    backend = InstantBackend(deep=True)
    it = drive(backend, 1000, lambda k: None, 4, True)
    in_flight = []
    for yielded in range(1, 501):
        next(it)
        in_flight.append(backend.sent - yielded + 1)
        clock.now += 10e-6 if yielded < 300 else 1e-3  # fast, then slow from result 300 on
    it.close()
    assert max(in_flight[:300]) > 2 * 2  # the window grew while results came fast
    assert max(in_flight[-100:]) <= 2 * 2  # and is back to 2 per worker once they do not


class BurstBackend(InstantBackend):
    """Answers 32 chunks per wait(), each wait 16 ms after the last (held answers: 2 workers
    running chunks of 1 ms, whose results come 16 per message, the two messages together), and
    records whether it was told chunks were tiny at each submit and wait."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(deep=False)
        self.clock = clock
        self.told_tiny: list[bool] = []

    def hold_depth(self) -> int:
        return held.HOLD_DEPTH

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        self.told_tiny.append(self.tiny)
        return super().submit(ks, payload)

    def wait(self) -> list[tuple[Any, ...]]:
        self.told_tiny.append(self.tiny)
        self.clock.now += 16e-3
        n = min(32, len(self.queue))
        return [("ok", k, k) for k in (self.queue.popleft() for _ in range(n))]


def test_answers_that_come_in_batches_count_at_the_pace_they_were_made(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(window_module, "time", clock)
    backend = BurstBackend(clock)
    got = []
    for value in drive(backend, 640, lambda k: None, 4, True):
        got.append(value)
        clock.now += 2e-6  # a fast consumer: a batch is yielded in microseconds
    assert got == list(range(640))
    assert len(backend.told_tiny) > 10
    assert not any(backend.told_tiny)  # 0.5 ms a result is not tiny, whatever the batches


class TwoHoldingWorkers(Backend):
    """Two workers that hold their answers: each takes at most ``hold_depth()`` chunks, and
    the first wait() brings worker 1's first batch of held answers while worker 0 still holds
    its own (the workers' batches drift apart: one core runs a little slower). Every later
    wait() brings everything sent. Records how many chunks worker 1 had to run at the second
    wait (sent to it and not answered)."""

    num_workers = 2

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.assigned: list[list[int]] = [[], []]
        self.waits = 0
        self.in_hand_after_batch = -1

    def hold_depth(self) -> int:
        return held.HOLD_DEPTH

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        taken = 0
        for _ in ks:
            worker = min((0, 1), key=lambda w: len(self.assigned[w]))
            if len(self.assigned[worker]) >= held.HOLD_DEPTH:
                break
            self.assigned[worker].append(ks[taken])
            taken += 1
        return taken

    def wait(self) -> list[tuple[Any, ...]]:
        self.waits += 1
        self.clock.now += 16e-3  # 16 answers of 1 ms
        if self.waits == 1:
            batch = self.assigned[1][: held.HOLD_MAX]
            del self.assigned[1][: held.HOLD_MAX]
            return [("oks", batch, batch)]
        if self.waits == 2:
            self.in_hand_after_batch = len(self.assigned[1])
        done = self.assigned[0] + self.assigned[1]
        self.assigned = [[], []]
        return [("oks", done, done)]

    def close(self, abort: bool) -> None:
        pass


def test_a_worker_runs_a_whole_batch_while_the_others_answers_are_held(monkeypatch):
    # Results come in order: worker 1's batch of held answers waits for worker 0's, which are
    # held until its batch is full. Worker 1 must have a whole batch more to run meanwhile, or
    # it idles until worker 0's batch comes (20 chunks per worker left it 4).
    clock = Clock()
    monkeypatch.setattr(window_module, "time", clock)
    backend = TwoHoldingWorkers(clock)
    got = list(drive(backend, 400, lambda k: None, 4, True))
    assert got == list(range(400))
    assert backend.in_hand_after_batch >= held.HOLD_MAX


class FullBackend(Backend):
    """Holds at most 3 chunks: answers them all at once in a wait(), counting the offers it
    could take nothing of."""

    num_workers = 2

    def __init__(self) -> None:
        self.queue: list[int] = []
        self.useless_offers = 0

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        n = min(len(ks), 3 - len(self.queue))
        if n == 0:
            self.useless_offers += 1
        self.queue.extend(ks[:n])
        return n

    def wait(self) -> list[tuple[Any, ...]]:
        answers, self.queue = [("ok", k, k) for k in self.queue], []
        return answers

    def close(self, abort: bool) -> None:
        pass


def test_a_backend_that_took_fewer_chunks_is_offered_none_until_it_reports_events():
    backend = FullBackend()
    # a window of 8 with a backend of 3: after each batch of answers, the backend takes 3 and
    # is full; results are yielded one by one meanwhile, each making room in the window
    assert list(drive(backend, 60, lambda k: None, 8, True)) == list(range(60))
    assert backend.useless_offers == 0
