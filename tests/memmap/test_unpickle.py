"""Pickled entries of a saved tensordict read as plain data by default (memmap/unpickle.py)."""

from __future__ import annotations

import collections
import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorDict, tensorclass
from tensordict.errors import MemmapFormatError, PickleNotAllowedError


class Touch:
    """Unpickling it creates a file: proof that code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


@tensorclass
class Labelled:
    x: torch.Tensor
    label: Any


def save_pickled(tmp_path: Path, value: Any) -> Path:
    """A saved tensordict whose entry ``v`` is pickled as ``{"data": value}``."""
    out = tmp_path / "td"
    TensorDict(v=NonTensorData({"placeholder"})).memmap(out)  # a set: written as a pickle
    with open(out / "v" / "other.pickle", "wb") as f:
        pickle.dump({"data": value}, f)
    return out


def test_a_state_dict_of_floats_and_tensors_loads_without_opting_in(tmp_path: Path) -> None:
    # TorchRL's trainer checkpoints: NonTensorData(state dict) in a memory-mapped tensordict
    stats = collections.OrderedDict(decay=0.999, sum=torch.tensor(-0.5), count=10.0)
    TensorDict(reward_stats=NonTensorData(stats), scale=NonTensorData(1.0)).memmap(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path)["reward_stats"]
    assert type(loaded) is collections.OrderedDict and list(loaded) == ["decay", "sum", "count"]
    assert loaded["decay"] == 0.999 and loaded["count"] == 10.0
    assert torch.equal(loaded["sum"], torch.tensor(-0.5))


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset({"a"}),
        b"\x00raw",
        bytearray(b"ab"),
        (1, 2.5, 3j, None, True, "s"),
        [slice(1, 2), range(3)],
        collections.defaultdict(list, a=[1]),
        collections.deque([1, 2]),
        collections.Counter("aab"),
        torch.Size([2, 3]),
        torch.device("cpu"),
        torch.bfloat16,
    ],
    ids=repr,
)
def test_plain_python_and_torch_values_load(tmp_path: Path, value: Any) -> None:
    loaded = TensorDict.load_memmap(save_pickled(tmp_path, value))["v"]
    assert type(loaded) is type(value) and loaded == value


def test_tensors_parameters_and_numpy_load(tmp_path: Path) -> None:
    value = {
        "t": torch.arange(6.0).reshape(2, 3)[:, 1:],
        "p": torch.nn.Parameter(torch.ones(2)),
        "a": np.arange(4, dtype=np.int16),
        "s": np.float32(1.5),
    }
    loaded = TensorDict.load_memmap(save_pickled(tmp_path, value))["v"]
    assert torch.equal(loaded["t"], value["t"])
    assert isinstance(loaded["p"], torch.nn.Parameter) and torch.equal(loaded["p"], value["p"])
    assert loaded["a"].dtype == np.int16 and loaded["a"].tolist() == [0, 1, 2, 3]
    assert type(loaded["s"]) is np.float32 and loaded["s"] == 1.5


def test_a_pickle_that_runs_code_is_refused_before_it_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    prefix = save_pickled(tmp_path, [1, Touch(str(marker))])
    with pytest.raises(PickleNotAllowedError, match=r"names io\.open.*allow_pickle=True"):
        TensorDict.load_memmap(prefix)
    assert not marker.exists()
    TensorDict.load_memmap(prefix, allow_pickle=True)
    assert marker.exists()


def test_an_object_of_another_class_needs_allow_pickle(tmp_path: Path) -> None:
    prefix = save_pickled(tmp_path, Path("/x"))
    with pytest.raises(PickleNotAllowedError, match="not plain data"):
        TensorDict.load_memmap(prefix)
    assert TensorDict.load_memmap(prefix, allow_pickle=True)["v"] == Path("/x")


def test_a_tensor_storage_holding_code_is_refused(tmp_path: Path) -> None:
    # torch pickles a storage as a nested torch.save file, loaded by torch.storage._load_from_bytes
    marker = tmp_path / "ran"
    nested = io.BytesIO()
    torch.save(Touch(str(marker)), nested)

    class Storage:
        def __reduce__(self) -> tuple[Any, ...]:
            return (torch.storage._load_from_bytes, (nested.getvalue(),))

    prefix = save_pickled(tmp_path, Storage())
    with pytest.raises(PickleNotAllowedError, match="tensor storage"):
        TensorDict.load_memmap(prefix)
    assert not marker.exists()


def test_a_persistent_reference_is_refused(tmp_path: Path) -> None:
    prefix = save_pickled(tmp_path, None)
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.persistent_id = lambda obj: "ref" if obj == "x" else None  # type: ignore[method-assign]
    pickler.dump({"data": "x"})
    (prefix / "v" / "other.pickle").write_bytes(buffer.getvalue())
    with pytest.raises(PickleNotAllowedError, match="persistent reference"):
        TensorDict.load_memmap(prefix)


def test_a_tensorclass_field_pickled_loads_as_plain_data(tmp_path: Path) -> None:
    Labelled(x=torch.zeros(2), label={"a", "b"}, batch_size=[2]).memmap(tmp_path)
    assert Labelled.load_memmap(tmp_path).label == {"a", "b"}
    with pytest.raises(PickleNotAllowedError):
        Labelled.load_memmap(tmp_path, allow_pickle=False)


def test_allow_pickle_must_be_a_bool_or_none(tmp_path: Path) -> None:
    TensorDict(a=torch.zeros(1)).memmap(tmp_path)
    with pytest.raises(TypeError, match="None for plain data only"):
        TensorDict.load_memmap(tmp_path, allow_pickle="yes")


@pytest.mark.parametrize("allow_pickle", [None, True])
def test_a_truncated_pickle_is_named(tmp_path: Path, allow_pickle: bool | None) -> None:
    prefix = save_pickled(tmp_path, {"k": list(range(100))})
    path = prefix / "v" / "other.pickle"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(MemmapFormatError, match=r"other\.pickle is not a valid pickle"):
        TensorDict.load_memmap(prefix, allow_pickle=allow_pickle)


def test_plain_data_that_does_not_fit_together_is_named(tmp_path: Path) -> None:
    class BadTensor:  # a tensor rebuilt from an int instead of a storage
        def __reduce__(self) -> tuple[Any, ...]:
            return (torch._utils._rebuild_tensor_v2, (3, 0, (2,), (1,), False, {}))

    prefix = save_pickled(tmp_path, BadTensor())
    with pytest.raises(MemmapFormatError, match="does not fit together"):
        TensorDict.load_memmap(prefix)
