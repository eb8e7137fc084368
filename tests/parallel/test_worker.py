"""Worker-side policies that need no process to test."""

from __future__ import annotations

from collections import deque

from tensordict.parallel.channel import IDLE_SECONDS
from tensordict.parallel.worker import _HeapTrim


def test_heap_trim_waits_in_a_busy_pipeline_and_trims_at_once_for_a_slow_consumer():
    trim = _HeapTrim()
    assert trim.patience == IDLE_SECONDS  # a task late by a few ms costs no page faults
    trim.waited(IDLE_SECONDS * 2)  # the consumer made us wait: memory matters now
    assert trim.patience == 0.0
    trim.waited(IDLE_SECONDS * 3)
    assert trim.patience == 0.0
    trim.waited(IDLE_SECONDS / 10)  # busy again
    assert trim.patience == IDLE_SECONDS


class _Answers:
    """A channel as ``_run_held`` uses it: nothing more arrives, answers are kept as encoded."""

    def __init__(self) -> None:
        self.sent: list = []

    def recv_nowait(self):
        return None

    def encode(self, answer):
        return answer

    def send_encoded(self, messages) -> None:
        self.sent.extend(messages)

    def send(self, msg) -> None:
        self.sent.append(msg)


def test_held_chunks_are_cut_together_before_fn_runs_and_each_gets_its_own_rows():
    import torch

    from tensordict import TensorDict
    from tensordict.parallel.held import HeldAnswers
    from tensordict.parallel.plan import ChunkPlan
    from tensordict.parallel.worker import _run_held, _Runner

    td = TensorDict({"x": torch.arange(20)}, [20])
    seen = []
    runner = _Runner(
        {
            "fn": lambda c: seen.append((cut.calls, c["x"].tolist())) or c["x"].sum(),
            "dim": 0,
            "source": td,
            "plan": ChunkPlan(20, 0, chunksize=4),
            "lock": True,
        }
    )

    class Counting:
        def __init__(self, cut) -> None:
            self.cut, self.calls = cut, 0

        def __call__(self, k):
            self.calls += 1
            return self.cut(k)

    cut = runner.cut = Counting(runner.cut)
    chan, answers = _Answers(), HeldAnswers()
    assert _run_held(chan, runner, [(k, None) for k in (1, 2, 4)], answers, deque()) == 3
    answers.send(chan)  # the last answer is still held: the worker sends it before it waits
    # the three chunks were cut before the first fn ran, each with its own rows
    assert seen == [(3, [4, 5, 6, 7]), (3, [8, 9, 10, 11]), (3, [16, 17, 18, 19])]
    assert [(tag, k, int(v)) for tag, k, v in chan.sent] == [
        ("ok", 1, 22),
        ("ok", 2, 38),
        ("ok", 4, 70),
    ]
    # a task that carries its rows (or a chunk outside the plan): each chunk is taken alone
    seen.clear()
    cut.calls = 0
    tasks = [(0, None), (1, ("index", torch.tensor([0, 1])))]
    _run_held(_Answers(), runner, tasks, HeldAnswers(), deque())
    assert seen == [(1, [0, 1, 2, 3]), (1, [0, 1])]
