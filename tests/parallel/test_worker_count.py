"""num_workers is capped at the number of chunks and at a multiple of the usable CPUs."""

from __future__ import annotations

import warnings

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import WorkerCountWarning
from tensordict.parallel import api
from tests.parallel import helpers


@pytest.fixture
def one_cpu(monkeypatch):
    monkeypatch.setattr(api, "usable_cpus", lambda: 1)


def identities(**kw) -> torch.Tensor:
    td = TensorDict({"x": torch.arange(20.0)}, [20])
    out = td.map_iter(helpers.worker_identity, generator=torch.Generator(), **kw)
    return torch.cat([o["info"] for o in out])


def test_a_huge_num_workers_is_capped_at_a_multiple_of_the_cpus_with_a_warning(one_cpu):
    with pytest.warns(WorkerCountWarning, match=r"num_workers=1000000 .* starting 4 workers"):
        rows = identities(num_workers=10**6, chunksize=1)
    assert set(rows[:, 2].tolist()) == {api.MAX_WORKERS_PER_CPU}
    assert len(set(rows[:, 3].tolist())) <= api.MAX_WORKERS_PER_CPU, "distinct worker pids"


def test_num_workers_is_capped_at_the_number_of_chunks_without_a_warning(one_cpu):
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkerCountWarning)
        rows = identities(num_workers=3, num_chunks=2)
    assert set(rows[:, 2].tolist()) == {2}


def test_a_huge_num_workers_without_chunksize_makes_one_chunk_per_started_worker(one_cpu):
    with pytest.warns(WorkerCountWarning):
        rows = identities(num_workers=10**6)
    assert rows.shape[0] == 20 and len({tuple(r) for r in rows[:, [0, 3]].tolist()}) == 4


def test_default_num_workers_is_one_per_usable_cpu(one_cpu):
    assert set(identities(chunksize=5)[:, 2].tolist()) == {1}
