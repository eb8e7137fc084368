"""The documented map_iter contract (the reference page), clause by clause."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tensordict import LazyStackedTensorDict, MemoryMappedTensor, TensorDict
from tensordict.errors import BatchSizeError, NotPicklableError
from tests.parallel import helpers
from tests.parallel.conftest import live_children


def run(td, fn, **kw):
    kw.setdefault("num_workers", 2)
    kw.setdefault("generator", torch.Generator())
    return list(td.map_iter(fn, **kw))


def test_results_come_in_chunk_order(plain_td):
    out = run(plain_td, helpers.add_one, chunksize=3)
    assert torch.equal(torch.cat([o["y"] for o in out]), plain_td["x"] + 1)


def test_chunksize_sets_the_size_of_each_chunk(plain_td):
    out = run(plain_td, helpers.add_one, chunksize=6)
    assert [o.batch_size[0] for o in out] == [6, 6, 6, 2]


def test_chunksize_zero_passes_elements_with_the_dim_removed(plain_td):
    out = run(plain_td, helpers.add_one, chunksize=0)
    assert len(out) == 20
    assert all(o.batch_size == torch.Size([]) for o in out)
    assert [float(o["y"]) for o in out] == (plain_td["x"] + 1).tolist()


def test_num_chunks_sets_the_number_of_balanced_chunks(plain_td):
    out = run(plain_td, helpers.add_one, num_chunks=6)
    assert [o.batch_size[0] for o in out] == [4, 4, 3, 3, 3, 3]


def test_neither_option_gives_one_chunk_per_worker(plain_td):
    assert len(run(plain_td, helpers.add_one, num_workers=2)) == 2


def test_more_chunks_than_elements_gives_one_element_per_chunk():
    td = TensorDict({"x": torch.arange(3.0)}, [3])
    assert [o.batch_size[0] for o in run(td, helpers.add_one, num_chunks=10)] == [1, 1, 1]


def test_chunksize_and_num_chunks_together_raise_value_error(plain_td):
    with pytest.raises(ValueError, match="not both"):
        plain_td.map_iter(helpers.add_one, chunksize=2, num_chunks=2)


def test_negative_dim_splits_along_that_dim():
    td = TensorDict({"x": torch.arange(12.0).reshape(3, 4)}, [3, 4])
    out = run(td, helpers.add_one, dim=-1, chunksize=2)
    assert [o.batch_size for o in out] == [torch.Size([3, 2])] * 2
    assert torch.equal(torch.cat([o["y"] for o in out], 1), td["x"] + 1)


def test_dim_out_of_range_raises_before_work_starts(plain_td):
    with pytest.raises(BatchSizeError, match="dim=1"):
        plain_td.map_iter(helpers.add_one, dim=1)


def test_fn_may_return_tensors(plain_td):
    out = run(plain_td, helpers.as_tensor, chunksize=5)
    assert torch.equal(torch.cat(out), plain_td["x"] * 2)


def test_fn_may_return_none_and_none_is_yielded(plain_td):
    assert run(plain_td, helpers.return_none, chunksize=5) == [None] * 4


def test_lambda_raises_not_picklable_before_any_worker_starts(plain_td):
    before = len(live_children())
    with pytest.raises(NotPicklableError, match="top level"):
        plain_td.map_iter(lambda d: d)
    assert len(live_children()) == before


def test_local_function_raises_not_picklable(plain_td):
    def local(d):
        return d

    with pytest.raises(NotPicklableError, match="local"):
        plain_td.map_iter(local)


def test_shuffle_yields_every_element_once(plain_td):
    out = run(plain_td, helpers.add_one, chunksize=3, shuffle=True)
    got = torch.cat([o["y"] for o in out]) - 1
    assert sorted(got.tolist()) == plain_td["x"].tolist()


def test_shuffled_chunks_hold_non_contiguous_elements(plain_td):
    torch.manual_seed(0)
    out = run(plain_td, helpers.add_one, chunksize=10, shuffle=True)
    firsts = sorted((o["y"] - 1).tolist() for o in out)
    assert firsts != [list(range(10)), list(range(10, 20))]


def test_shuffle_is_reproducible_with_the_global_seed(plain_td):
    def order():
        torch.manual_seed(123)
        out = run(plain_td, helpers.add_one, chunksize=4, shuffle=True, num_workers=1)
        return sorted(tuple((o["y"] - 1).tolist()) for o in out)

    assert order() == order()


def test_shuffle_without_index_generator_raises_runtime_error(plain_td):
    with pytest.raises(RuntimeError, match="index_with_generator"):
        plain_td.map_iter(helpers.add_one, shuffle=True, index_with_generator=False)


def test_index_with_generator_false_splits_up_front(plain_td):
    out = run(plain_td, helpers.add_one, chunksize=7, index_with_generator=False)
    assert torch.equal(torch.cat([o["y"] for o in out]), plain_td["x"] + 1)


def test_memmap_chunks_are_memory_mapped_and_locked(memmap_td):
    out = run(memmap_td, helpers.describe_chunk, chunksize=5)
    flags = torch.cat([o["flags"] for o in out])
    assert flags[:, :3].all(), "every chunk must be memory-mapped, locked, with memmap leaves"
    assert (flags[:, 3] == 5).all()


def test_memmap_chunks_stay_memory_mapped_under_spawn(memmap_td):
    out = run(memmap_td, helpers.describe_chunk, chunksize=10, mp_start_method="spawn")
    assert torch.cat([o["flags"] for o in out])[:, :3].all()


def test_memmap_source_loaded_from_disk_gives_locked_chunks(memmap_td):
    loaded = TensorDict.load_memmap(memmap_td.saved_path)
    assert not loaded.is_locked
    out = run(loaded, helpers.describe_chunk, chunksize=10)
    assert torch.cat([o["flags"] for o in out])[:, :3].all()


def test_callers_td_is_left_unlocked_and_not_shared(plain_td):
    run(plain_td, helpers.add_one, chunksize=5)
    assert not plain_td.is_locked
    assert not plain_td.is_shared()
    assert not plain_td.is_memmap()


def test_plain_source_works_under_spawn(plain_td):
    out = run(plain_td, helpers.add_one, chunksize=5, mp_start_method="spawn")
    assert torch.equal(torch.cat([o["y"] for o in out]), plain_td["x"] + 1)


def test_forkserver_start_method_runs(plain_td):
    out = run(plain_td, helpers.add_one, chunksize=10, mp_start_method="forkserver")
    assert torch.equal(torch.cat([o["y"] for o in out]), plain_td["x"] + 1)


def test_unknown_start_method_raises_value_error(plain_td):
    with pytest.raises(ValueError, match="mp_start_method"):
        plain_td.map_iter(helpers.add_one, mp_start_method="teleport")


def test_worker_threads_sets_torch_threads_in_workers(plain_td):
    out = run(plain_td, helpers.worker_identity, chunksize=10, worker_threads=2)
    assert (torch.cat([o["info"] for o in out])[:, 4] == 2).all()


def test_default_num_workers_follows_cpu_affinity(plain_td):
    out = list(plain_td.map_iter(helpers.worker_identity, generator=torch.Generator()))
    assert len(out) == len(os.sched_getaffinity(0))
    assert (torch.cat([o["info"] for o in out])[:, 2] == len(os.sched_getaffinity(0))).all()


def test_lazy_stacked_source_is_mapped():
    a = TensorDict({"x": torch.arange(4.0)}, [4])
    b = TensorDict({"x": torch.arange(4.0, 8.0)}, [4])
    td = LazyStackedTensorDict.lazy_stack([a, b], 1)
    out = run(td, helpers.add_one, dim=1, chunksize=1)
    assert torch.equal(torch.cat([o["y"] for o in out], 1), td["x"] + 1)


def test_empty_source_yields_nothing():
    td = TensorDict({"x": torch.zeros(0)}, [0])
    assert run(td, helpers.add_one, chunksize=2) == []


@pytest.mark.parametrize("present", [True, False])
def test_pbar_shows_a_bar_with_a_total_when_tqdm_is_importable(
    plain_td, capsys, monkeypatch, present
):
    if not present:
        monkeypatch.setitem(sys.modules, "tqdm", None)
        monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    out = run(plain_td, helpers.add_one, chunksize=5, pbar=True)
    err = capsys.readouterr().err
    assert len(out) == 4
    if present:
        assert "4/4" in err
    else:
        assert err == ""


def test_a_pbar_string_labels_the_bar(plain_td, capsys):
    run(plain_td, helpers.add_one, chunksize=5, pbar="reduce")
    err = capsys.readouterr().err
    assert "reduce: 100%" in err and "4/4" in err and "chunk/s" in err


def test_reference_page_example_prints_the_documented_output(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from tensordict import TensorDict

            def process_data(data):
                return data.empty().set("y", data["x"] + 1)

            if __name__ == "__main__":
                data = TensorDict({"x": torch.zeros(1, 1_000)}, [1, 1_000]).memmap_()
                for sample in data.map_iter(
                    process_data,
                    dim=1,
                    num_workers=2,
                    chunksize=5,
                    generator=torch.default_generator,
                ):
                    print(sample["y"])
                    break
            """
        )
    )
    res = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert res.stdout == "tensor([[1., 1., 1., 1., 1.]])\n"


def test_memmap_leaf_types_in_chunks_are_memory_mapped_tensors(memmap_td):
    chunk = memmap_td[0:5]
    assert isinstance(chunk["x"], MemoryMappedTensor)


def test_large_results_kept_by_the_consumer_stay_intact():
    td = TensorDict({"x": torch.randn(64, 8192)}, [64])
    out = list(
        td.map_iter(helpers.add_one, num_workers=2, chunksize=4, generator=torch.Generator())
    )
    assert torch.equal(torch.cat([o["y"] for o in out]), td["x"] + 1)
