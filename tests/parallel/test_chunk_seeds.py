"""Per-chunk seeds: the same random draws for each chunk on every run, whoever runs it."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch

from tensordict import TensorDict
from tensordict.parallel.worker import chunk_seed
from tests.parallel import helpers

SEED = 5


def base_seed() -> int:
    g = torch.Generator().manual_seed(SEED)
    return int(torch.empty((), dtype=torch.int64).random_(generator=g))


def rows_by_chunk(**kw) -> dict[int, list[int]]:
    """``{chunk: [chunk, chunk_seed, torch draw, numpy draw, random draw]}`` of one run."""
    kw.setdefault("num_workers", 2)
    td = TensorDict({"x": torch.arange(12.0)}, [12])
    out = td.map_iter(
        helpers.chunk_draws, chunksize=2, generator=torch.Generator().manual_seed(SEED), **kw
    )
    rows = [o["row"][0].tolist() for o in out]
    return {r[0]: r for r in rows}


def test_seed_per_chunk_gives_each_chunk_the_same_draws_whoever_runs_it():
    runs = [
        rows_by_chunk(seed_per_chunk=True, num_workers=1),
        rows_by_chunk(seed_per_chunk=True, num_workers=2),
        rows_by_chunk(seed_per_chunk=True, num_workers=3, max_tasks_per_child=1),
        rows_by_chunk(seed_per_chunk=True, shuffle=True),
    ]
    assert sorted(runs[0]) == list(range(6))
    assert all(run == runs[0] for run in runs[1:])


def test_seed_per_chunk_draws_differ_between_chunks():
    draws = [tuple(row[2:]) for row in rows_by_chunk(seed_per_chunk=True).values()]
    assert len(set(draws)) == len(draws)
    assert all(len(set(d)) == 3 for d in draws), "torch, numpy and random differ"


def test_spawned_workers_draw_the_same_per_chunk():
    assert rows_by_chunk(seed_per_chunk=True, mp_start_method="spawn") == rows_by_chunk(
        seed_per_chunk=True
    )


@pytest.mark.keeps_children
def test_seed_per_chunk_seeds_the_chunks_in_a_users_pool_too():
    with mp.get_context("fork").Pool(2) as pool:
        assert rows_by_chunk(seed_per_chunk=True, pool=pool) == rows_by_chunk(seed_per_chunk=True)


def test_chunk_and_chunk_seed_are_in_get_worker_info_without_the_option():
    one, two = rows_by_chunk(num_workers=1), rows_by_chunk(num_workers=2)
    base = base_seed()
    assert {k: r[1] for k, r in one.items()} == {k: chunk_seed(base, k) for k in range(6)}
    assert {k: r[1] for k, r in two.items()} == {k: chunk_seed(base, k) for k in range(6)}


def test_without_the_option_workers_are_seeded_once_not_per_chunk():
    rows = rows_by_chunk(num_workers=1)  # one worker: its stream goes on from chunk to chunk
    torch.manual_seed(base_seed())
    expected = [torch.randint(0, 2**62, ()).item() for _ in range(6)]
    assert [rows[k][2] for k in range(6)] == expected


def test_chunk_seeds_are_apart_from_worker_seeds():
    base = base_seed()
    assert {chunk_seed(base, k) for k in range(100)}.isdisjoint(range(base, base + 100))
