"""Memory-mapping tensorclasses: upstream's on-disk layout, loading back, and what workers need."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict
from tensordict.errors import MemmapFormatError
from tests.tensorclass.classes import Pair, Sample


def sample(n: int = 4) -> Sample:
    return Sample(obs=torch.arange(n * 2.0).reshape(n, 2), label="cat", batch_size=[n])


def read_meta(path: Path) -> dict[str, object]:
    return json.loads((path / "meta.json").read_text())  # type: ignore[no-any-return]


def test_meta_json_holds_the_type_and_the_none_fields(tmp_path: Path) -> None:
    sample().memmap(tmp_path)
    expected = {"_type": "<class 'tests.tensorclass.classes.Sample'>", "reward": None}
    assert read_meta(tmp_path) == expected


def test_tensors_go_to_the_tensordict_subdirectory(tmp_path: Path) -> None:
    sample().memmap(tmp_path)
    assert (tmp_path / "_tensordict" / "obs.memmap").exists()


def test_python_field_is_saved_as_non_tensor_data_inside_the_tensordict(tmp_path: Path) -> None:
    sample().memmap(tmp_path)
    assert read_meta(tmp_path / "_tensordict" / "label")["data"] == "cat"


def test_memmap_returns_a_locked_memory_mapped_instance(tmp_path: Path) -> None:
    m = sample().memmap(tmp_path)
    assert type(m) is Sample and m.is_memmap() and m.is_locked
    assert isinstance(m.obs, MemoryMappedTensor)


def test_memmap_leaves_the_source_unchanged(tmp_path: Path) -> None:
    s = sample()
    s.memmap(tmp_path)
    assert not s.is_memmap() and not isinstance(s.obs, MemoryMappedTensor)


def test_memmap_in_place_returns_the_instance(tmp_path: Path) -> None:
    s = sample()
    assert s.memmap_(tmp_path) is s and s.is_memmap()


def test_saved_path_is_the_instance_directory(tmp_path: Path) -> None:
    assert sample().memmap(tmp_path).saved_path == str(tmp_path)


def test_memmap_in_place_again_at_the_same_prefix_is_a_no_op(tmp_path: Path) -> None:
    s = sample().memmap_(tmp_path)
    obs = s.obs
    assert s.memmap_(tmp_path) is s and s.obs is obs


def test_memmap_like_is_zero_filled_with_the_same_fields(tmp_path: Path) -> None:
    m = sample().memmap_like(tmp_path)
    assert type(m) is Sample and m.obs.shape == (4, 2) and m.obs.sum() == 0


def test_tensordict_load_memmap_returns_the_tensorclass(tmp_path: Path) -> None:
    sample().memmap(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path)
    assert type(loaded) is Sample and torch.equal(loaded.obs, sample().obs)


def test_load_memmap_restores_none_and_python_fields(tmp_path: Path) -> None:
    sample().memmap(tmp_path)
    loaded = Sample.load_memmap(tmp_path)
    assert loaded.reward is None and loaded.label == "cat"


def test_class_load_memmap_refuses_another_class(tmp_path: Path) -> None:
    TensorDict({"a": torch.zeros(2)}, [2]).memmap(tmp_path)
    with pytest.raises(MemmapFormatError, match="not a Sample"):
        Sample.load_memmap(tmp_path)


def test_tensorclass_inside_a_tensordict_round_trips(tmp_path: Path) -> None:
    TensorDict({"s": sample()}, [4]).memmap(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path)
    assert type(loaded["s"]) is Sample and loaded["s"].label == "cat"


def test_nested_tensorclass_round_trips(tmp_path: Path) -> None:
    Pair(left=sample(), right=torch.ones(4), batch_size=[4]).memmap(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path)
    assert type(loaded) is Pair and type(loaded.left) is Sample
    assert torch.equal(loaded.left.obs, sample().obs)


def test_parent_entry_names_the_tensorclass(tmp_path: Path) -> None:
    TensorDict({"s": sample()}, [4]).memmap(tmp_path)
    assert read_meta(tmp_path)["s"] == {"type": "Sample"}


def test_writes_to_a_loaded_instance_reach_the_files(tmp_path: Path) -> None:
    sample().memmap(tmp_path)
    Sample.load_memmap(tmp_path)[1:3] = Sample(obs=torch.full((2, 2), 9.0), batch_size=[2])
    assert Sample.load_memmap(tmp_path).obs[1:3].eq(9).all()


# ---------------------------------------------------------------------- what workers need


def test_pickle_round_trip_keeps_class_and_data() -> None:
    s = sample()
    back = pickle.loads(pickle.dumps(s))
    assert type(back) is Sample and torch.equal(back.obs, s.obs) and back.label == "cat"


def test_pickle_of_a_memmapped_instance_refers_to_the_files(tmp_path: Path) -> None:
    big = Sample(obs=torch.zeros(10_000, 16), batch_size=[10_000]).memmap(tmp_path)
    assert len(pickle.dumps(big)) < 10_000 * 16 * 4 // 100


def test_pickled_memmapped_chunk_reads_the_files(tmp_path: Path) -> None:
    m = sample().memmap(tmp_path)
    back = pickle.loads(pickle.dumps(m[1:3]))
    assert isinstance(back.obs, MemoryMappedTensor) and torch.equal(back.obs, sample().obs[1:3])


def test_chunk_of_a_memmapped_instance_is_memmapped_and_locked(tmp_path: Path) -> None:
    chunk = sample().memmap(tmp_path)[:2]
    assert chunk.is_memmap() and chunk.is_locked


def test_index_tensor_chunk_of_a_memmapped_instance_copies(tmp_path: Path) -> None:
    chunk = sample().memmap(tmp_path)[torch.tensor([3, 0])]
    assert type(chunk) is Sample and not chunk.is_memmap()
    assert torch.equal(chunk.obs, sample().obs[[3, 0]])


def test_files_are_listed_in_the_directory(tmp_path: Path) -> None:
    sample().memmap(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["_tensordict", "meta.json"]
