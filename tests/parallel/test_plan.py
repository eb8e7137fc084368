"""Chunk plans: balanced splits, chunk sizes, element-by-element chunks, shuffled indices."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tensordict.parallel.plan import ChunkPlan, SliceTaker, take, take_run


def sizes(plan: ChunkPlan) -> list[int]:
    return [b - a for a, b in (plan.bounds(k) for k in range(len(plan)))]


@pytest.mark.parametrize("n,k", [(10, 3), (10, 4), (7, 7), (100, 6), (5, 2)])
def test_num_chunks_gives_k_chunks_differing_by_at_most_one(n, k):
    plan = ChunkPlan(n, 0, num_chunks=k)
    s = sizes(plan)
    assert len(s) == k
    assert sum(s) == n
    assert max(s) - min(s) <= 1


def test_more_chunks_than_elements_gives_one_element_per_chunk():
    assert sizes(ChunkPlan(3, 0, num_chunks=10)) == [1, 1, 1]


def test_neither_option_gives_one_chunk_per_worker():
    assert len(ChunkPlan(10, 0, default_chunks=4)) == 4


def test_chunksize_cuts_fixed_size_chunks_with_a_shorter_last():
    plan = ChunkPlan(10, 0, chunksize=4)
    assert [plan.index(k) for k in range(len(plan))] == [slice(0, 4), slice(4, 8), slice(8, 10)]


def test_chunksize_larger_than_the_data_gives_one_chunk():
    assert sizes(ChunkPlan(3, 0, chunksize=10)) == [3]


def test_chunksize_zero_gives_ints_so_the_dim_is_removed():
    plan = ChunkPlan(4, 0, chunksize=0)
    assert [plan.index(k) for k in range(len(plan))] == [0, 1, 2, 3]


def test_chunks_cover_every_element_once():
    plan = ChunkPlan(23, 0, num_chunks=5)
    covered = [i for k in range(len(plan)) for i in range(*plan.bounds(k))]
    assert covered == list(range(23))


def test_shuffled_chunks_take_positions_from_the_permutation():
    perm = torch.randperm(10)
    plan = ChunkPlan(10, 0, chunksize=3, perm=perm)
    got = torch.cat([plan.index(k) for k in range(len(plan))])
    assert torch.equal(got, perm)


def test_shuffled_element_chunks_are_ints():
    perm = torch.tensor([2, 0, 1])
    plan = ChunkPlan(3, 0, chunksize=0, perm=perm)
    assert [plan.index(k) for k in range(3)] == [2, 0, 1]


def test_both_chunksize_and_num_chunks_raise_value_error():
    with pytest.raises(ValueError, match="not both"):
        ChunkPlan(10, 0, chunksize=2, num_chunks=2)


@pytest.mark.parametrize("kw", [{"chunksize": -1}, {"num_chunks": 0}])
def test_bad_counts_raise_value_error(kw):
    with pytest.raises(ValueError):
        ChunkPlan(10, 0, **kw)


def test_empty_source_has_no_chunks():
    assert len(ChunkPlan(0, 0, num_chunks=3)) == 0


def test_take_indexes_along_dim():
    td = TensorDict({"x": torch.arange(12).reshape(3, 4)}, [3, 4])
    assert torch.equal(take(td, 1, slice(1, 3))["x"], td["x"][:, 1:3])
    assert torch.equal(take(td, 0, 2)["x"], td["x"][2])


# ---------------------------------------------------------------------- runs of tiny chunks
def _same_chunk(got, want):
    assert type(got) is type(want)
    assert got.batch_size == want.batch_size and got.device == want.device
    assert got.names == want.names if want._names is not None else got._names is None
    assert got.is_locked == want.is_locked and got.is_memmap() == want.is_memmap()
    assert list(got.keys()) == list(want.keys())
    for key in list(want.keys()):
        a, b = got[key], want[key]
        assert type(a) is type(b) and torch.equal(a, b)
        assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()  # a view
        assert a.storage_offset() == b.storage_offset() and a.stride() == b.stride()
        if hasattr(b, "filename"):
            assert a.filename == b.filename and a._parent_shape == b._parent_shape
            assert a._handler is b._handler


def _sources(tmp_path):
    plain = TensorDict({"x": torch.arange(40.0).view(10, 4), "i": torch.arange(10)}, [10])
    named = TensorDict({"x": torch.zeros(10, 3)}, [10, 3], names=["rows", "cols"])
    return {
        "plain": plain,
        "named": named,
        "memmap": plain.clone().memmap_(tmp_path / "m"),
        "shared memmap": plain.clone().memmap_(),  # no files: a shared-memory handler
        "empty": TensorDict({}, [10]),
    }


@pytest.mark.parametrize("name", ["plain", "named", "memmap", "shared memmap", "empty"])
@pytest.mark.parametrize("plan_kw", [{"chunksize": 1}, {"chunksize": 3}, {"num_chunks": 4}])
def test_a_run_cut_from_one_slice_gives_the_chunks_take_gives(tmp_path, name, plan_kw):
    td = _sources(tmp_path)[name]
    plan = ChunkPlan(10, 0, **plan_kw)
    ks = range(1, len(plan))  # the last chunk may be shorter
    got = take_run(td, 0, plan, ks)
    assert len(got) == len(ks)
    for k, chunk in zip(ks, got):
        _same_chunk(chunk, take(td, 0, plan.index(k)))


def test_a_run_along_dim_one_gives_the_chunks_take_gives():
    td = TensorDict({"x": torch.arange(30).view(3, 10)}, [3, 10])
    plan = ChunkPlan(10, 1, chunksize=4)
    for k, chunk in zip(range(3), take_run(td, 1, plan, range(3))):
        _same_chunk(chunk, take(td, 1, plan.index(k)))


def test_chunks_of_a_run_do_not_share_their_structure():
    td = TensorDict({"x": torch.zeros(4)}, [4])
    a, b = take_run(td, 0, ChunkPlan(4, 0, chunksize=1), range(2))
    a["y"] = torch.ones(1)
    assert "y" not in list(b.keys()) and "y" not in list(td.keys())
    a["x"] += 1  # views: writes reach the source, as they do through take
    assert td["x"].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_runs_that_cannot_be_cut_at_once_give_none():
    td = TensorDict({"x": torch.zeros(6)}, [6])
    nested = TensorDict({"n": TensorDict({"x": torch.zeros(6)}, [6])}, [6])
    perm = torch.randperm(6)
    assert take_run(td, 0, ChunkPlan(6, 0, chunksize=1, perm=perm), range(2)) is None
    assert take_run(td, 0, ChunkPlan(6, 0, chunksize=0), range(2)) is None
    assert take_run(nested, 0, ChunkPlan(6, 0, chunksize=1), range(2)) is None
    assert take_run(td, 0, ChunkPlan(6, 0, chunksize=1), range(1)) is None


# ---------------------------------------------------------------------- chunks cut one by one
@pytest.mark.parametrize("name", ["plain", "named", "memmap", "shared memmap", "empty"])
@pytest.mark.parametrize("plan_kw", [{"chunksize": 1}, {"chunksize": 3}, {"num_chunks": 4}])
@pytest.mark.parametrize("locked", [False, True])
def test_a_slice_taker_gives_the_chunks_take_gives(tmp_path, name, plan_kw, locked):
    td = _sources(tmp_path)[name]
    if locked:
        td.lock_()
    plan = ChunkPlan(10, 0, **plan_kw)
    cut = SliceTaker.build(td, 0, plan)
    assert cut is not None
    for k in [*range(len(plan)), 0]:  # every size of chunk, and the first again
        _same_chunk(cut(k), take(td, 0, plan.index(k)))
        assert cut(k).is_shared() == take(td, 0, plan.index(k)).is_shared()


def test_a_slice_taker_of_a_memmap_slice_keeps_the_files_shape():
    # a source that is itself a slice of a memory-mapped tensordict: its chunks' leaves
    # remember the whole file's shape, as indexing gives them
    whole = TensorDict({"x": torch.arange(40.0).view(20, 2)}, [20]).memmap_()
    td = whole[:10]
    plan = ChunkPlan(10, 0, chunksize=4)
    cut = SliceTaker.build(td, 0, plan)
    for k in range(len(plan)):
        _same_chunk(cut(k), take(td, 0, plan.index(k)))
    assert cut(0)["x"]._parent_shape == (20, 2)


def test_a_slice_taker_along_dim_one_gives_the_chunks_take_gives():
    td = TensorDict({"x": torch.arange(30).view(3, 10)}, [3, 10])
    plan = ChunkPlan(10, 1, chunksize=4)
    cut = SliceTaker.build(td, 1, plan)
    for k in range(len(plan)):
        _same_chunk(cut(k), take(td, 1, plan.index(k)))


def test_chunks_of_a_slice_taker_do_not_share_their_structure():
    td = TensorDict({"x": torch.zeros(4)}, [4])
    cut = SliceTaker.build(td, 0, ChunkPlan(4, 0, chunksize=2))
    a, b = cut(0), cut(0)
    a["y"] = torch.ones(2)
    assert "y" not in list(b.keys()) and "y" not in list(td.keys())
    a["x"] += 1  # views: writes reach the source
    assert td["x"].tolist() == [1.0, 1.0, 0.0, 0.0]


def test_plans_a_slice_taker_cannot_cut_give_none():
    td = TensorDict({"x": torch.zeros(6)}, [6])
    nested = TensorDict({"n": TensorDict({"x": torch.zeros(6)}, [6])}, [6])
    perm = torch.randperm(6)
    assert SliceTaker.build(td, 0, ChunkPlan(6, 0, chunksize=1, perm=perm)) is None
    assert SliceTaker.build(td, 0, ChunkPlan(6, 0, chunksize=0)) is None
    assert SliceTaker.build(nested, 0, ChunkPlan(6, 0, chunksize=2)) is None
    assert SliceTaker.build(td, 0, ChunkPlan(0, 0, chunksize=2)) is None
