"""map over a file-backed (HDF5 / Zarr) tensordict: chunks of one element keep their shapes."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tests.parallel import helpers


def source() -> TensorDict:
    return TensorDict({"x": torch.arange(10.0)}, [10])


@pytest.fixture(params=["h5", "zarr"])
def persistent(request, tmp_path):
    pytest.importorskip("h5py" if request.param == "h5" else "zarr")
    if request.param == "h5":
        return source().to_h5(tmp_path / "data.h5")
    return source().to_zarr(tmp_path / "data.zarr")


def test_an_element_of_a_persistent_tensordict_has_zero_dim_leaves(persistent):
    assert persistent[3]["x"].shape == torch.Size([])
    assert float(persistent[3]["x"]) == 3.0


def test_map_with_chunksize_zero_over_a_persistent_tensordict_fills_out(persistent):
    out = TensorDict({"y": torch.zeros(10)}, [10])
    persistent.map(
        helpers.fill_out, num_workers=2, chunksize=0, out=out, generator=torch.Generator()
    )
    assert torch.equal(out["y"], source()["x"] * 10)
