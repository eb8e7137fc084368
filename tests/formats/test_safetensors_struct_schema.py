"""safetensors files, numpy structured arrays and from_schema's storages."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tensordict import LazyStackedTensorDict, PersistentTensorDict, TensorDict, tensorclass
from tensordict.errors import FormatValueError
from tensordict.formats.safetensors import from_safetensors, to_safetensors


@tensorclass
class Pair:
    a: torch.Tensor
    tag: str


def test_safetensors_keys_are_state_dict_names(tmp_path):
    td = TensorDict(
        {"w": torch.ones(2, 3), "sub": {"b": torch.zeros(2)}, "s": "x"}, [2], names=["n"]
    )
    to_safetensors(td, tmp_path / "t.safetensors")
    with safe_open(str(tmp_path / "t.safetensors"), "pt") as f:
        assert sorted(f.keys()) == ["sub.b", "w"]
        assert json.loads(f.metadata()["tensordict"])["root"]["batch_size"] == [2]
    back = from_safetensors(tmp_path / "t.safetensors")
    assert back.names == ["n"] and back["s"] == "x" and torch.equal(back["w"], td["w"])


def test_safetensors_structure_round_trips(tmp_path):
    stack = LazyStackedTensorDict(
        *[TensorDict({"x": torch.full((3,), float(i))}, [3]) for i in range(2)], stack_dim=1
    )
    to_safetensors(stack, tmp_path / "l.safetensors")
    back = from_safetensors(tmp_path / "l.safetensors")
    assert isinstance(back, LazyStackedTensorDict) and back.stack_dim == 1
    to_safetensors(Pair(a=torch.ones(2), tag="t", batch_size=[2]), tmp_path / "p.safetensors")
    pair = from_safetensors(tmp_path / "p.safetensors")
    assert isinstance(pair, Pair) and pair.tag == "t"


def test_a_foreign_checkpoint_loads_nested(tmp_path):
    save_file(
        {"0.weight": torch.ones(4, 3), "0.bias": torch.zeros(4)}, str(tmp_path / "m.safetensors")
    )
    params = from_safetensors(tmp_path / "m.safetensors")
    assert params["0", "weight"].shape == (4, 3) and params.batch_size == ()


def test_safetensors_refuses_what_it_cannot_hold(tmp_path):
    with pytest.raises(FormatValueError, match="JSON"):
        to_safetensors(TensorDict({"o": object()}, []), tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="once their keys are joined"):
        to_safetensors(
            TensorDict({"a.b": torch.ones(1), "a": {"b": torch.ones(1)}}, []),
            tmp_path / "y.safetensors",
        )


def test_struct_array_round_trip():
    arr = np.zeros(4, dtype=[("a", "i8"), ("p", [("x", "f4", (3,)), ("y", "f8")])])
    arr["a"] = np.arange(4)
    td = TensorDict.from_struct_array(arr)
    assert td.batch_size == (4,) and td["p", "x"].shape == (4, 3)
    back = td.to_struct_array()
    assert back.dtype == arr.dtype and (back == arr).all()
    with pytest.raises(FormatValueError, match="structured array"):
        TensorDict.from_struct_array(np.zeros(3))


@pytest.mark.parametrize("storage", [None, "shared", "memmap", "h5", "zarr"])
def test_from_schema_allocates_zeros_where_asked(tmp_path, storage):
    kwargs = {"prefix": tmp_path / "m"} if storage == "memmap" else {}
    if storage in ("h5", "zarr"):
        kwargs = {"filename": tmp_path / f"s.{storage}"}
    td = TensorDict.from_schema(
        {"obs": ([4], torch.float32), ("n", "r"): ([], torch.int64)},
        batch_size=[8],
        storage=storage,
        **kwargs,
    )
    assert td["obs"].shape == (8, 4) and (td["n", "r"] == 0).all()
    if storage in ("h5", "zarr"):
        assert isinstance(td, PersistentTensorDict)
        td[0] = TensorDict({"obs": torch.ones(4), "n": {"r": torch.tensor(3)}}, [])
        assert (td["obs"][0] == 1).all() and (td["obs"][1:] == 0).all()
    with pytest.raises(ValueError, match=r"Unknown storage backend 'nope'.*zarr"):  # upstream's
        TensorDict.from_schema({"a": ([1], torch.float32)}, storage="nope")
