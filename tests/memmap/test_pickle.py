"""Pickling memory-mapped data: small file references, views of views, fork and spawn workers,
the per-process mapping cache, anonymous shared memory."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch

from tensordict import LazyStackedTensorDict, MemoryMappedTensor, TensorDict
from tensordict.memmap import mapping

from . import helpers

ROWS, COLS, CHUNK = 262_144, 64, 16_384


@pytest.fixture
def big(tmp_path: Path) -> TensorDict:
    """A 262,144 x 64 float32 memory-mapped tensordict: a 64 MiB preallocated file (kept
    small: CI machines have little free space under /tmp)."""
    td = TensorDict({"obs": torch.zeros(1, COLS).expand(ROWS, COLS)}, [ROWS])
    out = td.memmap_like(tmp_path / "big")
    out["obs"][CHUNK + 5, :3] = torch.tensor([1.0, 2.0, 3.0])  # touches a single page
    return out


@pytest.fixture
def small(tmp_path: Path) -> TensorDict:
    td = TensorDict({"x": torch.arange(60.0).reshape(20, 3), "n": {"y": torch.arange(20)}}, [20])
    return td.memmap(tmp_path / "small")


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_slice_of_a_64mib_memmap_pickles_under_1kb(big: TensorDict, dumps) -> None:
    chunk = big[CHUNK : 2 * CHUNK]
    payload = dumps(chunk)
    assert len(payload) < 1024
    out = pickle.loads(payload)
    assert out.batch_size == (CHUNK,) and isinstance(out["obs"], MemoryMappedTensor)
    assert out["obs"].filename == big["obs"].filename
    assert out["obs"][5, :3].tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_pickled_leaf_size_does_not_depend_on_the_slice(big: TensorDict, dumps) -> None:
    obs = big["obs"]
    # only the integers of the view differ (a few bytes of pickle opcodes)
    assert abs(len(dumps(obs[:10])) - len(dumps(obs[: 10 * CHUNK]))) <= 8


def test_pickled_reference_contains_no_data(small: TensorDict) -> None:
    small["x"].fill_(123456.0)
    value = np.float32(123456.0).tobytes()
    assert value in pickle.dumps(small["x"][3:9].clone())  # a plain copy carries its data
    assert value not in pickle.dumps(small["x"][3:9])
    assert value not in pickle.dumps(small[3:9])


def test_pickled_slice_is_a_view_of_the_same_file(small: TensorDict) -> None:
    out = pickle.loads(pickle.dumps(small[4:8]))
    out["x"][0, 0] = -1.0
    assert small["x"][4, 0].item() == -1.0
    assert out.is_memmap() and out.is_locked


VIEWS_OF_VIEWS = {
    "slice_of_slice": lambda t: t[2:18][3:9],
    "step_of_slice": lambda t: t[1:][::3],
    "int_of_slice": lambda t: t[5:][2],
    "column_of_rows": lambda t: t[2:10][:, 1],
    "split_of_slice": lambda t: t[4:].split(5)[1],
    "unbind_of_chunk": lambda t: t.chunk(4)[2].unbind(0)[1],
}


@pytest.mark.parametrize("name", list(VIEWS_OF_VIEWS))
def test_views_of_views_survive_pickling(small: TensorDict, name: str) -> None:
    view = VIEWS_OF_VIEWS[name](small["x"])
    out = pickle.loads(pickle.dumps(view))
    assert isinstance(out, MemoryMappedTensor) and out.filename == small["x"].filename
    assert torch.equal(out, view) and out.stride() == view.stride()


def test_views_of_unpickled_views_pickle_again(small: TensorDict) -> None:
    once = pickle.loads(pickle.dumps(small["x"][3:15]))
    twice = pickle.loads(cloudpickle.dumps(once[2:][::2]))
    assert torch.equal(twice, small["x"][3:15][2:][::2])
    assert len(pickle.dumps(twice)) < 400


def test_lazy_stack_of_memmap_slices_pickles_small(big: TensorDict) -> None:
    ls = LazyStackedTensorDict(big[:CHUNK], big[CHUNK : 2 * CHUNK], stack_dim=0)
    assert len(pickle.dumps(ls)) < 2048
    assert pickle.loads(pickle.dumps(ls))["obs"].shape == (2, CHUNK, COLS)


# ====================================================================== worker processes
def payload(small: TensorDict, use_cloudpickle: bool) -> bytes:
    objs = {
        "td_slice": small[2:12],
        "td_view_of_view": small[2:12][1:7],
        "leaf_step": small["x"][::2],
        "leaf_view_of_view": small["x"][3:][::2][1:],
    }
    return (cloudpickle.dumps if use_cloudpickle else pickle.dumps)(objs)


def expected_values(small: TensorDict) -> dict[str, torch.Tensor]:
    x = small["x"].as_subclass(torch.Tensor)
    return {
        "td_slice": x[2:12],
        "td_view_of_view": x[2:12][1:7],
        "leaf_step": x[::2],
        "leaf_view_of_view": x[3:][::2][1:],
    }


@pytest.mark.parametrize("use_cloudpickle", [False, True], ids=["pickle", "cloudpickle"])
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_views_of_views_unpickle_in_workers(small: TensorDict, method: str, use_cloudpickle):
    report = helpers.run_in_process(
        method, helpers.describe_views, payload(small, use_cloudpickle), use_cloudpickle
    )
    for name, values in expected_values(small).items():
        got = report[name]
        assert got["is_mmt"] and got["filename"] == small["x"].filename
        assert torch.equal(got["values"], values)
        # the worker's view of its view, pickled back to us, is still the same file region
        back = pickle.loads(got["reviewed"])
        assert isinstance(back, MemoryMappedTensor) and torch.equal(back, values[1:][::2])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_maps_a_file_once_for_all_chunks(small: TensorDict, method: str) -> None:
    chunks = [pickle.dumps(c) for c in small.split(5)]
    report = helpers.run_in_process(method, helpers.shared_mapping, chunks)
    assert report["n_bases"] == 1
    assert report["storage_nbytes"] == [60 * 4] * 4
    assert report["sums"] == [float(c["x"].sum()) for c in small.split(5)]


def test_unpickled_chunks_share_one_mapping_in_process(small: TensorDict) -> None:
    mapping._cache.clear()
    a, b = (pickle.loads(pickle.dumps(c)) for c in small.chunk(2))
    assert a["x"].untyped_storage().data_ptr() == b["x"].untyped_storage().data_ptr()


def test_mapping_cache_sees_a_file_replaced_by_another_process(tmp_path: Path) -> None:
    TensorDict({"x": torch.zeros(4)}, [4]).memmap(tmp_path)
    stale = pickle.dumps(TensorDict.load_memmap(tmp_path)[1:3])
    assert pickle.loads(stale)["x"].tolist() == [0.0, 0.0]  # now cached in this process
    # replaced behind this process's back (as another process's save does): a new inode
    np.full(4, 5.0, np.float32).tofile(tmp_path / "x.new")
    os.replace(tmp_path / "x.new", tmp_path / "x.memmap")
    assert pickle.loads(stale)["x"].tolist() == [5.0, 5.0]


def test_mapping_cache_is_bounded(tmp_path: Path) -> None:
    for i in range(mapping._CACHE_SIZE + 8):
        MemoryMappedTensor.from_tensor(torch.zeros(1), filename=tmp_path / f"f{i}")
    assert len(mapping._cache) <= mapping._CACHE_SIZE


# ====================================================================== anonymous shared memory
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_anonymous_memmap_reaches_workers_by_handle(method: str) -> None:
    td = TensorDict({"x": torch.arange(6), "n": {"y": torch.zeros(6)}}, [6]).memmap_()
    report = helpers.run_in_process(method, helpers.write_into_anonymous, td)
    assert report["is_mmt"] and report["filename"] is None
    assert report["before"].tolist() == list(range(6))
    # the worker wrote into the same memory: nothing was copied
    assert td["x"].tolist() == [7] * 6 and td["n", "y"].tolist() == [-1.0] * 6


def test_anonymous_memmap_round_trips_through_plain_pickle() -> None:
    td = TensorDict({"x": torch.arange(4)}, [4]).memmap_()
    out = pickle.loads(pickle.dumps(td[1:3]))
    assert isinstance(out["x"], MemoryMappedTensor) and out["x"].tolist() == [1, 2]
