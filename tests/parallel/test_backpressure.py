"""Bounded in-flight work: a slow consumer never lets more than ~2 x workers chunks run ahead."""

from __future__ import annotations

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict
from tests.parallel import helpers


def busy_work() -> None:
    """A few milliseconds of real computation (the consumer is slower than the workers)."""
    a = torch.randn(160, 160)
    for _ in range(20):
        a = torch.tanh(a @ a)


@pytest.fixture
def marks(tmp_path, monkeypatch):
    def make(n: int):
        path = str(tmp_path / "marks.memmap")
        MemoryMappedTensor.from_tensor(torch.zeros(n + 2, dtype=torch.int64), filename=path)
        monkeypatch.setenv("TD_TEST_MARKS", path)
        monkeypatch.setenv("TD_TEST_N", str(n))
        return MemoryMappedTensor.from_filename(path, torch.int64, [n + 2])

    return make


@pytest.mark.parametrize("shuffle", [False, True])
def test_slow_consumer_keeps_at_most_the_window_in_flight(marks, shuffle):
    n = 60
    m = marks(n)
    td = TensorDict({"idx": torch.arange(n), "x": torch.zeros(n)}, [n])
    seen = 0
    for _ in td.map_iter(
        helpers.record_start,
        num_workers=2,
        chunksize=1,
        shuffle=shuffle,
        generator=torch.Generator(),
    ):
        seen += 1
        m[n] = seen  # consumed so far, read by the workers when a chunk starts
        busy_work()
    assert seen == n
    assert int(m[:n].sum()) == n
    assert int(m[n + 1]) == 0, "a chunk started while more than 2 x workers were unconsumed"


def test_consumer_that_takes_one_result_lets_at_most_the_window_run(marks):
    n = 200
    m = marks(n)
    td = TensorDict({"idx": torch.arange(n), "x": torch.zeros(n)}, [n])
    it = td.map_iter(helpers.record_start, num_workers=2, chunksize=1, generator=torch.Generator())
    next(it)
    m[n] = 1
    busy_work()
    it.close()
    assert int(m[:n].sum()) <= 2 * 2 + 1
