"""Worker seeding, get_worker_info, and max_tasks_per_child replacements."""

from __future__ import annotations

import warnings

import pytest
import torch

from tensordict import get_worker_info
from tests.parallel import helpers


def infos(td, **kw):
    kw.setdefault("num_workers", 2)
    out = list(td.map_iter(helpers.worker_identity, chunksize=1, **kw))
    return torch.cat([o["info"] for o in out])


def test_no_generator_warns_about_the_017_default(plain_td):
    with pytest.warns(FutureWarning, match=r"generator=torch.default_generator"):
        list(plain_td.map_iter(helpers.add_one, num_workers=2, chunksize=10))


@pytest.mark.parametrize("generator", [torch.default_generator, torch.Generator()])
def test_passing_a_generator_silences_the_warning(plain_td, generator):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        list(plain_td.map_iter(helpers.add_one, num_workers=2, chunksize=10, generator=generator))


def test_no_generator_gives_the_same_base_seed_every_call(plain_td):
    with pytest.warns(FutureWarning):
        a = set(infos(plain_td)[:, 1].tolist())
    with pytest.warns(FutureWarning):
        b = set(infos(plain_td)[:, 1].tolist())
    assert a == b


def test_worker_i_is_seeded_with_base_plus_i(plain_td):
    g = torch.Generator().manual_seed(7)
    base = int(
        torch.empty((), dtype=torch.int64).random_(generator=torch.Generator().manual_seed(7))
    )
    rows = infos(plain_td, generator=g)
    assert {(int(i), int(s)) for i, _, s in rows[:, [0, 2, 1]].tolist()} <= {
        (0, base),
        (1, base + 1),
    }
    assert set(rows[:, 1].tolist()) == {base, base + 1}


def test_default_generator_advances_the_global_rng_by_one_draw(plain_td):
    torch.manual_seed(3)
    expected = torch.Generator().manual_seed(3)
    torch.empty((), dtype=torch.int64).random_(generator=expected)
    list(
        plain_td.map_iter(
            helpers.add_one, num_workers=2, chunksize=10, generator=torch.default_generator
        )
    )
    assert torch.equal(torch.rand(5), torch.rand(5, generator=expected))


def test_workers_draw_different_numbers_from_every_rng(plain_td):
    out = list(
        plain_td.map_iter(
            helpers.draw_random, num_workers=2, num_chunks=2, generator=torch.Generator()
        )
    )
    a, b = (o["r"][0] for o in out)
    assert (a != b).all(), "torch, numpy and random must differ between workers"


def test_same_generator_seed_gives_same_worker_draws(plain_td):
    def draws():
        out = plain_td.map_iter(
            helpers.draw_random,
            num_workers=1,
            num_chunks=1,
            generator=torch.Generator().manual_seed(5),
        )
        return next(iter(out))["r"][0]

    assert torch.equal(draws(), draws())


def test_get_worker_info_is_none_in_the_main_process():
    assert get_worker_info() is None


def test_get_worker_info_answers_inside_fn(plain_td):
    rows = infos(plain_td, generator=torch.Generator())
    assert set(rows[:, 0].tolist()) <= {0, 1}
    assert (rows[:, 2] == 2).all()


def test_max_tasks_per_child_replaces_workers_with_fresh_ids_and_seeds(plain_td):
    g = torch.Generator().manual_seed(1)
    base = int(
        torch.empty((), dtype=torch.int64).random_(generator=torch.Generator().manual_seed(1))
    )
    td = plain_td[:6]
    rows = infos(td, generator=g, max_tasks_per_child=1)
    ids = rows[:, 0].tolist()
    assert sorted(ids) == list(range(6)), "each chunk runs in a new worker with a new id"
    assert rows[:, 1].tolist() == [base + i for i in ids]
    assert len(set(rows[:, 3].tolist())) == 6, "six different processes"


def test_max_tasks_per_child_two_runs_two_chunks_per_worker(plain_td):
    rows = infos(plain_td[:8], generator=torch.Generator(), max_tasks_per_child=2)
    pids = rows[:, 3].tolist()
    assert all(pids.count(p) <= 2 for p in pids)


def test_spawn_workers_are_seeded_too(plain_td):
    g = torch.Generator().manual_seed(2)
    base = int(
        torch.empty((), dtype=torch.int64).random_(generator=torch.Generator().manual_seed(2))
    )
    rows = infos(plain_td[:4], generator=g, mp_start_method="spawn")
    assert set(rows[:, 1].tolist()) <= {base, base + 1}
