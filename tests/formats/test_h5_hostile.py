"""HDF5 files under hostile input: data outside the file (external links, external raw storage,
virtual datasets) is never read unasked, soft-link loops raise a clear error, a failed to_h5
keeps the old file, a replaced file is read anew, an unreadable dataset type names itself."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from tensordict import PersistentTensorDict, TensorDict
from tensordict.errors import ExternalDataError, FormatValueError


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "secret.h5"
    with h5py.File(path, "w") as f:
        f["pin"] = np.arange(4.0)
    (tmp_path / "secret.bin").write_bytes(np.arange(4.0).tobytes())
    return path


def _file_with(tmp_path: Path, build) -> Path:
    path = tmp_path / "hostile.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.zeros(4)
        build(f)
    return path


def test_an_external_link_is_refused_before_it_is_followed(tmp_path, secret):
    path = _file_with(
        tmp_path, lambda f: f.__setitem__("ext", h5py.ExternalLink(str(secret), "/pin"))
    )
    with pytest.raises(
        ExternalDataError, match=r"/ext of .* is an external link.*allow_external=True"
    ):
        TensorDict.from_h5(path)  # its batch size would need the linked entry
    with pytest.raises(PermissionError):
        PersistentTensorDict(filename=path, batch_size=[4], validate_batch_size=False)["ext"]
    trusting = TensorDict.from_h5(path, allow_external=True)
    assert torch.equal(trusting["ext"], torch.arange(4.0))
    assert torch.equal(pickle.loads(pickle.dumps(trusting))["ext"], torch.arange(4.0))


def test_external_raw_storage_is_refused_when_read(tmp_path, secret):
    raw = str(tmp_path / "secret.bin")
    build = lambda f: f.create_dataset("raw", shape=(4,), dtype="<f8", external=[(raw, 0, 32)])  # noqa: E731
    path = _file_with(tmp_path, build)
    ptd = TensorDict.from_h5(path)
    assert set(ptd.keys()) == {"x", "raw"}  # listing reads no data
    with pytest.raises(ExternalDataError, match=r"external raw storage.*secret\.bin"):
        ptd["raw"]
    with pytest.raises(ExternalDataError):
        pickle.loads(pickle.dumps(ptd[1:]))["raw"]
    assert torch.equal(TensorDict.from_h5(path, allow_external=True)["raw"], torch.arange(4.0))


def test_a_virtual_dataset_is_refused_when_read(tmp_path, secret):
    def build(f: h5py.File) -> None:
        layout = h5py.VirtualLayout(shape=(4,), dtype="f8")
        layout[:] = h5py.VirtualSource(str(secret), "pin", shape=(4,))
        f.create_virtual_dataset("virt", layout)

    ptd = TensorDict.from_h5(_file_with(tmp_path, build))
    with pytest.raises(ExternalDataError, match="virtual dataset"):
        ptd["virt"]


def test_a_soft_link_loop_raises_a_clear_error(tmp_path):
    def build(f: h5py.File) -> None:
        f.create_group("g")["loop"] = h5py.SoftLink("/g")

    path = _file_with(tmp_path, build)
    with pytest.raises(FormatValueError, match=r"/g/loop of .* leads back to a group it is in"):
        TensorDict.from_h5(path).to_tensordict()


def test_a_failed_to_h5_keeps_the_old_file(tmp_path):
    path = tmp_path / "data.h5"
    TensorDict({"x": torch.arange(3.0)}, [3]).to_h5(path).close()
    for bad in (torch.zeros(3, dtype=torch.bfloat16), torch.empty(3, device="meta")):
        with pytest.raises((FormatValueError, TypeError, RuntimeError, NotImplementedError)):
            TensorDict({"a": torch.ones(3), "z": bad}, [3]).to_h5(path)
        assert torch.equal(TensorDict.from_h5(path)["x"], torch.arange(3.0))
    assert sorted(os.listdir(tmp_path)) == ["data.h5"]  # no partial file left


def test_a_replaced_file_is_read_anew_while_an_old_handle_is_open(tmp_path):
    path = tmp_path / "data.h5"
    old = TensorDict({"x": torch.zeros(3)}, [3]).to_h5(path)
    TensorDict({"x": torch.ones(3)}, [3]).to_h5(tmp_path / "new.h5").close()
    os.replace(tmp_path / "new.h5", path)
    assert torch.equal(TensorDict.from_h5(path)["x"], torch.ones(3))
    assert torch.equal(old["x"], torch.zeros(3))  # the old handle keeps its file
    old.close()


@pytest.mark.parametrize(
    "dtype",
    [np.dtype([("a", "i4"), ("b", "f8")]), np.dtype(np.longdouble)],
    ids=["compound", "longdouble"],
)
def test_a_dataset_of_a_type_torch_lacks_names_itself(tmp_path, dtype):
    path = _file_with(tmp_path, lambda f: f.__setitem__("odd", np.zeros(4, dtype=dtype)))
    ptd = TensorDict.from_h5(path)
    assert set(ptd.keys()) == {"x", "odd"} and "odd" in repr(ptd)
    assert torch.equal(ptd["x"], torch.zeros(4, dtype=torch.float64))  # the rest reads
    with pytest.raises(FormatValueError, match=r"/odd .* has no torch dtype"):
        ptd["odd"]
    assert set(ptd.exclude("odd").to_tensordict().keys()) == {"x"}


def test_persistent_tensordict_accepts_allow_external(tmp_path, secret):
    path = _file_with(
        tmp_path, lambda f: f.__setitem__("ext", h5py.ExternalLink(str(secret), "/pin"))
    )
    ptd = PersistentTensorDict(filename=path, allow_external=True)
    assert ptd["ext"].shape == (4,)
