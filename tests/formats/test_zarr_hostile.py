"""Zarr stores under hostile input: pickled entries are never run unless asked, deleted chunks
and folders are never read as zeros, chunks linked out of the store are never followed."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import zarr

from tensordict import NonTensorData, NonTensorStack, TensorDict, is_leaf_nontensor
from tensordict.errors import ExternalDataError, IncompleteDataError, PickleNotAllowedError


class _Marker:
    """Unpickling this creates a file: proof that something was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def _store_with_a_pickle(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "unpickled"
    td = TensorDict(
        {
            "x": torch.arange(3.0),
            "evil": NonTensorData(_Marker(str(marker)), batch_size=[3]),
            "evils": NonTensorStack(*[NonTensorData(_Marker(str(marker))) for _ in range(3)]),
            "fine": NonTensorData({"k": 1}, batch_size=[3]),
        },
        [3],
    )
    path = tmp_path / "s.zarr"
    td.to_zarr(path).close()
    assert not marker.exists()  # writing pickles runs nothing
    return path, marker


def test_keys_and_repr_never_unpickle(tmp_path):
    path, marker = _store_with_a_pickle(tmp_path)
    for allow in (None, False, True):
        ztd = TensorDict.from_zarr(path, allow_pickle=allow)
        assert set(ztd.keys()) == {"x", "evil", "evils", "fine"}
        assert set(ztd.keys(True, True, is_leaf=is_leaf_nontensor)) == set(ztd.keys())
        assert "pickled, not read" in repr(ztd) and "'k': 1" in repr(ztd)
    assert not marker.exists()


@pytest.mark.parametrize("allow", [None, False])
@pytest.mark.parametrize(
    "read",
    [
        lambda t: t["evil"],
        lambda t: t["evils"],
        lambda t: t.to_tensordict(),
        lambda t: t[0]["evil"],
        lambda t: t[1:]["evils"],
        lambda t: pickle.loads(pickle.dumps(t))["evil"],
    ],
)
def test_reading_a_pickle_is_refused_unless_allowed(tmp_path, allow, read):
    path, marker = _store_with_a_pickle(tmp_path)
    ztd = TensorDict.from_zarr(path, allow_pickle=allow)
    with pytest.raises(PickleNotAllowedError, match=r"evils?.*allow_pickle=True"):
        read(ztd)
    assert not marker.exists()
    assert ztd["fine"] == {"k": 1}  # JSON entries read as before


def test_allow_pickle_true_reads_pickles(tmp_path):
    path, marker = _store_with_a_pickle(tmp_path)
    TensorDict.from_zarr(path, allow_pickle=True)["evil"]
    assert marker.exists()


def test_the_writer_reads_back_its_own_pickles(tmp_path):
    ztd = TensorDict({"o": NonTensorData({1, 2}, batch_size=[2])}, [2]).to_zarr(tmp_path / "w")
    assert ztd["o"] == {1, 2}


def test_allow_pickle_must_be_a_bool(tmp_path):
    path, _ = _store_with_a_pickle(tmp_path)
    with pytest.raises(TypeError, match="allow_pickle must be a bool"):
        TensorDict.from_zarr(path, allow_pickle="yes")


# ====================================================================== missing and linked chunks
@pytest.fixture
def chunked(tmp_path) -> Path:
    td = TensorDict({"x": torch.arange(1.0, 21.0).view(10, 2), "n": {"y": torch.ones(10)}}, [10])
    td.to_zarr(tmp_path / "c.zarr", chunks=(5,)).close()
    return tmp_path / "c.zarr"


def test_every_chunk_is_stored_even_all_zeros(tmp_path):
    ztd = TensorDict({"z": torch.zeros(10)}, [10]).to_zarr(tmp_path / "z.zarr", chunks=(5,))
    ztd[0:5] = TensorDict({"z": torch.zeros(5)}, [5])  # zarr would delete a chunk of zeros
    assert zarr.open_group(str(tmp_path / "z.zarr"), mode="r")["z"].nchunks_initialized == 2
    assert torch.equal(TensorDict.from_zarr(tmp_path / "z.zarr")["z"], torch.zeros(10))


def test_a_deleted_chunk_is_never_read_as_zeros(chunked):
    os.remove(chunked / "x" / "c" / "1" / "0")
    ztd = TensorDict.from_zarr(chunked)
    assert torch.equal(ztd[:5]["x"], torch.arange(1.0, 11.0).view(5, 2))  # the chunk kept
    with pytest.raises(IncompleteDataError, match=r"x.*c/1/0"):
        ztd["x"]
    with pytest.raises(IncompleteDataError):
        ztd[7]["x"]
    with pytest.raises(FileNotFoundError):
        ztd.to_tensordict()


def test_a_deleted_array_folder_is_never_read_as_zeros(chunked):
    shutil.rmtree(chunked / "n" / "y")  # the consolidated metadata still lists it
    ztd = TensorDict.from_zarr(chunked)
    with pytest.raises(IncompleteDataError, match=r"n/y"):
        ztd["n", "y"]


def test_a_chunk_linked_out_of_the_store_is_not_followed(chunked, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes() * 3)
    os.remove(chunked / "x" / "c" / "0" / "0")
    os.symlink(secret, chunked / "x" / "c" / "0" / "0")
    with pytest.raises(ExternalDataError, match=r"c/0/0"):
        TensorDict.from_zarr(chunked)["x"]
    with pytest.raises(PermissionError):
        TensorDict.from_zarr(chunked)[0]["x"]


def test_a_store_written_by_zarr_itself_keeps_zarr_fill_values(tmp_path):
    root = zarr.open_group(str(tmp_path / "raw.zarr"), mode="w")
    arr = root.create_array("x", shape=(6,), dtype=np.float32, chunks=(3,), fill_value=0.0)
    arr[3:] = 1.0  # the first chunk is never stored: Zarr reads it as the fill value
    expected = torch.tensor([0.0] * 3 + [1.0] * 3)
    assert torch.equal(TensorDict.from_zarr(tmp_path / "raw.zarr")["x"], expected)
