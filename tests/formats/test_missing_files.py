"""Readers of files given a path where nothing exists raise a short FileNotFoundError naming it,
before the format's library raises its own from deep inside."""

from __future__ import annotations

import errno
import traceback

import pytest

from tensordict import TensorDict, from_safetensors

READERS = {
    "HDF5 file": lambda p: TensorDict.from_h5(p),
    "Zarr store": lambda p: TensorDict.from_zarr(p),
    "Parquet file": lambda p: TensorDict.from_parquet(p),
    "CSV file": lambda p: TensorDict.from_csv(p),
    "JSON file": lambda p: TensorDict.from_json(p),
    "safetensors file": lambda p: from_safetensors(p),
}


@pytest.mark.parametrize("what", sorted(READERS))
def test_a_missing_file_raises_file_not_found_naming_the_path(what, tmp_path):
    path = tmp_path / "missing" / "data.bin"
    with pytest.raises(FileNotFoundError) as info:
        READERS[what](str(path))
    err = info.value
    assert err.errno == errno.ENOENT and err.filename == str(path)
    assert str(err) == f"[Errno 2] No such {what}: '{path}'"
    frames = traceback.extract_tb(err.__traceback__)
    assert all("site-packages" not in f.filename for f in frames), "raised inside the library"


def test_a_path_object_is_checked_too(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such CSV file"):
        TensorDict.from_csv(tmp_path / "nope.csv")
