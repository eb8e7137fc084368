"""make_memmap / make_memmap_from_tensor / make_memmap_from_storage as upstream: nested keys
create memory-mapped sub-folders, existing keys are refused, storages map or copy."""

from __future__ import annotations

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict
from tensordict.errors import MemmapExistsError, MemmapStorageError, NotMemmappedError


def test_nested_keys_create_locked_memory_mapped_levels(tmp_path) -> None:
    td = TensorDict().memmap_(tmp_path)
    td.make_memmap(("b", "c"), shape=[5, 6], dtype=torch.float32).fill_(1)
    assert td.is_locked and td["b"].is_locked and td["b"].saved_path == str(tmp_path / "b")
    loaded = TensorDict.load_memmap(tmp_path)
    assert torch.equal(loaded["b", "c"], torch.ones(5, 6))


def test_an_existing_key_is_refused(tmp_path) -> None:
    td = TensorDict().memmap_(tmp_path)
    td.make_memmap(("b", "c"), shape=[2])
    for key in (("b", "c"), "b"):
        with pytest.raises(RuntimeError, match="already exists within the target tensordict"):
            td.make_memmap(key, shape=[2])
    with pytest.raises(MemmapExistsError):
        td.make_memmap_from_tensor(("b", "c"), torch.ones(2))


def test_a_tensordict_without_a_directory_is_refused() -> None:
    with pytest.raises(NotMemmappedError, match="memory-mapped tensordict"):
        TensorDict().make_memmap("a", shape=[2])
    assert issubclass(NotMemmappedError, RuntimeError)


def test_from_storage_maps_the_storages_own_file(tmp_path) -> None:
    td = TensorDict().memmap_(tmp_path)
    mapped = MemoryMappedTensor.ones([4], filename=tmp_path / "a.memmap")
    with pytest.raises(MemmapStorageError, match="associated filename"):
        td.make_memmap_from_storage("b", mapped.untyped_storage(), shape=[4])
    leaf = td.make_memmap_from_storage("a", mapped.untyped_storage(), shape=[4])
    mapped.fill_(3)  # the same file: no copy
    assert torch.equal(leaf, torch.full((4,), 3.0))
    assert torch.equal(TensorDict.load_memmap(tmp_path)["a"], torch.full((4,), 3.0))


def test_from_storage_copies_a_storage_without_a_file(tmp_path) -> None:
    td = TensorDict().memmap_(tmp_path)
    source = torch.arange(6, dtype=torch.int32)
    storage = source.untyped_storage()
    leaf = td.make_memmap_from_storage(("x", "y"), storage, [2, 3], dtype=torch.int32)
    source.zero_()
    expected = torch.arange(6, dtype=torch.int32).view(2, 3)
    assert torch.equal(leaf, expected)
    assert torch.equal(TensorDict.load_memmap(tmp_path)["x", "y"], expected)
    with pytest.raises(MemmapStorageError, match="needs 48"):
        td.make_memmap_from_storage("z", source.untyped_storage(), [3, 4], dtype=torch.float32)


def test_memmap_without_prefix_keeps_the_saved_directory(tmp_path) -> None:
    TensorDict(a=torch.ones(2)).memmap_(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path).memmap_()
    assert loaded.saved_path == str(tmp_path) and loaded.is_memmap()


def test_nested_tensors_are_made_in_upstreams_layout(tmp_path) -> None:
    td = TensorDict().memmap_(tmp_path)
    made = td.make_memmap(("e", "f"), shape=torch.tensor([[1, 2], [1, 3]]))
    jagged = torch.nested.nested_tensor([torch.ones(1, 2), torch.full((1, 3), 2.0)])
    td.make_memmap_from_tensor("g", jagged)
    assert made.is_nested and (tmp_path / "g.shape.memmap").exists()
    loaded = TensorDict.load_memmap(tmp_path)
    assert [t.shape for t in loaded["e", "f"].unbind()] == [(1, 2), (1, 3)]
    assert [t.tolist() for t in loaded["g"].unbind()] == [[[1.0, 1.0]], [[2.0, 2.0, 2.0]]]
