"""Files written here open in upstream tensordict 0.15.3, and files it writes open here.

HDF5, Zarr, safetensors and the tables (Parquet, CSV, JSON lines). Upstream runs in its own venv
(skipped when absent): one process writes its files and reads ours, so the suite pays its
start-up once.
"""

from __future__ import annotations

import pytest
import torch

from tensordict import NonTensorStack, PersistentTensorDict, TensorDict
from tensordict.formats.safetensors import from_safetensors, to_safetensors

from ..upstream import run_upstream, upstream_python

UPSTREAM = """
import json, torch
from tensordict import NonTensorStack, TensorDict, from_safetensors, to_safetensors
def describe(td):
    return {"bs": list(td.batch_size), "nested_bs": list(td["n"].batch_size),
            "x": td["x"].tolist(), "y": td["n", "y"].tolist()}
td = TensorDict({"x": torch.arange(6.0).view(3, 2),
                 "n": TensorDict({"y": torch.arange(12).view(3, 2, 2)}, [3, 2])}, [3])
td.to_h5("up.h5").close()
td.to_zarr("up.zarr")
to_safetensors(td, "up.safetensors")
table = TensorDict({"a": torch.arange(3), "f": torch.tensor([0.5, 1.5, 2.5]),
                    "obs": {"x": torch.tensor([1.0, 2.0, 3.0])},
                    "s": NonTensorStack("u", "v", "w")}, [3])
table.to_parquet("up.parquet", separator=".")
table.to_csv("up.csv", separator=".")
table.to_json("up.jsonl", separator=".", lines=True)
def rows(td):
    return {"bs": list(td.batch_size), "a": td["a"].tolist(), "f": td["f"].tolist(),
            "f_dtype": str(td["f"].dtype), "x": td["obs", "x"].tolist(), "s": list(td["s"])}
print(json.dumps({"h5": describe(TensorDict.from_h5("here.h5")),
                  "zarr": describe(TensorDict.from_zarr("here.zarr")),
                  "safetensors": describe(from_safetensors("here.safetensors")),
                  "parquet": rows(TensorDict.from_parquet("here.parquet", separator=".")),
                  "csv": rows(TensorDict.from_csv("here.csv", separator=".")),
                  "json": rows(TensorDict.from_json("here.jsonl", separator=".", lines=True))}))
"""


def _td() -> TensorDict:
    nested = TensorDict({"y": torch.arange(12).view(3, 2, 2)}, [3, 2])
    return TensorDict({"x": torch.arange(6.0).view(3, 2), "n": nested}, [3])


def _table() -> TensorDict:
    strings = NonTensorStack("u", "v", "w")
    obs = {"x": torch.tensor([1.0, 2.0, 3.0])}
    return TensorDict(
        {"a": torch.arange(3), "f": torch.tensor([0.5, 1.5, 2.5]), "obs": obs, "s": strings}, [3]
    )


def _read_table(fmt: str, path) -> TensorDict:
    if fmt == "parquet":
        return TensorDict.from_parquet(path, separator=".")
    if fmt == "csv":
        return TensorDict.from_csv(path, separator=".")
    return TensorDict.from_json(path, separator=".", lines=True)


@pytest.fixture(scope="module")
def exchange(tmp_path_factory):
    """Our files read by upstream (its answers), and the folder holding upstream's files."""
    python = upstream_python("h5py", "zarr", "safetensors")
    folder = tmp_path_factory.mktemp("interop")
    _td().to_h5(folder / "here.h5").close()
    _td().to_zarr(folder / "here.zarr")
    to_safetensors(_td(), folder / "here.safetensors")
    _table().to_parquet(folder / "here.parquet", separator=".")
    _table().to_csv(folder / "here.csv", separator=".")
    _table().to_json(folder / "here.jsonl", separator=".", lines=True)
    return run_upstream(python, UPSTREAM, folder), folder


@pytest.mark.parametrize("fmt", ["h5", "zarr", "safetensors"])
def test_written_here_opens_upstream(exchange, fmt):
    answers, _ = exchange
    out = answers[fmt]
    assert out["x"] == _td()["x"].tolist() and out["y"] == _td()["n", "y"].tolist()
    assert out["bs"][0] == 3
    if fmt != "h5":  # upstream infers HDF5 batch sizes; the others keep them
        assert out["bs"] == [3] and out["nested_bs"] == [3, 2]


def test_h5_written_upstream_opens_here(exchange):
    _, folder = exchange
    ptd = PersistentTensorDict.from_h5(folder / "up.h5")
    assert torch.equal(ptd["n", "y"], _td()["n", "y"]) and ptd.batch_size[0] == 3


def test_zarr_written_upstream_opens_here(exchange):
    _, folder = exchange
    back = TensorDict.from_zarr(folder / "up.zarr")
    assert back.batch_size == (3,) and back["n"].batch_size == (3, 2)
    assert (back.to_tensordict() == _td()).all()


def test_safetensors_written_upstream_opens_here(exchange):
    _, folder = exchange
    back = from_safetensors(folder / "up.safetensors")
    assert back["n"].batch_size == (3, 2) and (back == _td()).all()


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_table_written_here_opens_upstream(exchange, fmt):
    answers, _ = exchange
    out = answers[fmt]
    assert out["bs"] == [3] and out["a"] == [0, 1, 2] and out["s"] == ["u", "v", "w"]
    assert out["f"] == [0.5, 1.5, 2.5] and out["x"] == [1.0, 2.0, 3.0]
    if fmt == "parquet":  # parquet keeps the dtype; the text formats give pandas' float64
        assert out["f_dtype"] == "torch.float32"


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_table_written_upstream_opens_here(exchange, fmt):
    _, folder = exchange
    name = {"parquet": "up.parquet", "csv": "up.csv", "json": "up.jsonl"}[fmt]
    back = _read_table(fmt, folder / name)
    assert back.batch_size == (3,) and back["a"].tolist() == [0, 1, 2]
    assert back["f"].tolist() == [0.5, 1.5, 2.5] and back["obs", "x"].tolist() == [1.0, 2.0, 3.0]
    assert back["s"] == ["u", "v", "w"] and back[1]["s"] == "v"
