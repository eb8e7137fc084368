"""map(): reassembly, None results, out= written by workers or by the parent."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import BatchSizeError
from tests.parallel import helpers


def td_map(td, fn, **kw):
    kw.setdefault("num_workers", 2)
    kw.setdefault("generator", torch.Generator())
    return td.map(fn, **kw)


@pytest.mark.parametrize("kw", [{"chunksize": 3}, {"num_chunks": 3}, {}])
def test_map_concatenates_results_along_dim(plain_td, kw):
    out = td_map(plain_td, helpers.add_one, **kw)
    assert torch.equal(out["y"], plain_td["x"] + 1)


def test_map_with_chunksize_zero_stacks_results(plain_td):
    out = td_map(plain_td, helpers.add_one, chunksize=0)
    assert out.batch_size == torch.Size([20])
    assert torch.equal(out["y"], plain_td["x"] + 1)


def test_map_along_a_negative_dim():
    td = TensorDict({"x": torch.arange(12.0).reshape(3, 4)}, [3, 4])
    out = td_map(td, helpers.add_one, dim=-1, chunksize=1)
    assert torch.equal(out["y"], td["x"] + 1)


def test_map_of_tensor_results_concatenates_tensors(plain_td):
    assert torch.equal(td_map(plain_td, helpers.as_tensor, chunksize=7), plain_td["x"] * 2)


def test_map_with_all_none_results_returns_none(plain_td):
    assert td_map(plain_td, helpers.return_none, chunksize=5) is None


def test_map_splits_up_front_by_default(plain_td):
    out = td_map(plain_td, helpers.add_one, chunksize=4, index_with_generator=False)
    assert torch.equal(out["y"], plain_td["x"] + 1)


def test_map_with_chunksize_zero_and_heterogeneous_results_stacks_lazily():
    td = TensorDict({"x": torch.arange(4.0)}, [4])
    out = td_map(td, helpers.ragged, chunksize=0)
    assert isinstance(out, LazyStackedTensorDict)
    assert [m["y"].shape[0] for m in out.tensordicts] == [1, 2, 3, 4]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_map_writes_a_memmap_out_from_the_workers(memmap_td, tmp_path, method):
    out = TensorDict({"y": torch.zeros(20)}, [20]).memmap_like(tmp_path / "out")
    res = td_map(memmap_td, helpers.fill_out, out=out, chunksize=3, mp_start_method=method)
    assert res is out
    assert torch.equal(out["y"], memmap_td["x"] * 10)
    reloaded = TensorDict.load_memmap(tmp_path / "out")
    assert torch.equal(reloaded["y"], memmap_td["x"] * 10)


def test_map_writes_a_shared_out_from_the_workers(plain_td):
    out = TensorDict({"y": torch.zeros(20)}, [20]).share_memory_()
    td_map(plain_td, helpers.fill_out, out=out, num_chunks=4)
    assert torch.equal(out["y"], plain_td["x"] * 10)


def test_map_writes_a_plain_out_in_the_parent(plain_td):
    out = TensorDict({"y": torch.zeros(20)}, [20])
    res = td_map(plain_td, helpers.fill_out, out=out, chunksize=6)
    assert res is out and torch.equal(out["y"], plain_td["x"] * 10)


def test_map_out_of_the_wrong_size_raises_before_work(plain_td):
    with pytest.raises(BatchSizeError, match="out"):
        td_map(plain_td, helpers.fill_out, out=TensorDict({"y": torch.zeros(5)}, [5]))
