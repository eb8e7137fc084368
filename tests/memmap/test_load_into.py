"""``TensorDict.load_memmap_``: load a saved tensordict into an existing one, in place."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tensordict import LazyStackedTensorDict, MemoryMappedTensor, TensorDict
from tensordict.errors import BatchSizeError, LockedError


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    TensorDict({"a": torch.ones(3), "n": {"x": torch.full((3, 2), 2.0)}}, [3]).save(tmp_path / "s")
    return tmp_path / "s"


def test_returns_the_same_tensordict_with_the_saved_leaves(saved: Path) -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3])
    assert td.load_memmap_(saved) is td
    assert isinstance(td["a"], MemoryMappedTensor)
    assert td["a"].tolist() == [1.0, 1.0, 1.0]
    assert td["n", "x"].shape == (3, 2)


def test_entries_that_were_not_saved_are_removed(saved: Path) -> None:
    td = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3), "n": {"y": torch.zeros(3)}}, [3])
    td.load_memmap_(saved)
    assert set(td.keys(True, True)) == {"a", ("n", "x")}


def test_nested_tensordicts_stay_the_same_objects(saved: Path) -> None:
    td = TensorDict({"n": {"x": torch.zeros(3)}}, [3])
    inner = td["n"]
    td.load_memmap_(saved)
    assert td["n"] is inner
    assert inner["x"].shape == (3, 2)


def test_old_storage_is_not_written(saved: Path) -> None:
    old = torch.zeros(3)
    TensorDict({"a": old}, [3]).load_memmap_(saved)
    assert old.tolist() == [0.0, 0.0, 0.0]


def test_a_plain_tensordict_stays_unlocked_and_not_memory_mapped(saved: Path) -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3]).load_memmap_(saved)
    assert not td.is_locked and not td.is_memmap()


def test_a_memory_mapped_tensordict_ends_up_mapped_at_the_loaded_prefix(
    saved: Path, tmp_path: Path
) -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3]).memmap_(tmp_path / "other")
    td.load_memmap_(saved)
    assert td.is_memmap() and td.is_locked
    assert td.saved_path == str(saved)
    assert td["a"].filename == str(saved / "a.memmap")


def test_a_memory_mapped_tensordict_loaded_from_an_archive_ends_up_unlocked(
    tmp_path: Path,
) -> None:
    TensorDict({"a": torch.ones(3)}, [3]).save(tmp_path / "s.tdz")
    td = TensorDict({"a": torch.zeros(3)}, [3]).memmap_(tmp_path / "other")
    td.load_memmap_(tmp_path / "s.tdz")
    assert td["a"].tolist() == [1.0, 1.0, 1.0]
    assert not td.is_locked and not td.is_memmap()


def test_a_locked_tensordict_is_refused_and_unchanged(saved: Path) -> None:
    td = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3)}, [3]).lock_()
    with pytest.raises(LockedError, match="unlock_"):
        td.load_memmap_(saved)
    assert sorted(td.keys()) == ["a", "b"]


def test_a_saved_batch_size_that_does_not_fit_is_refused_and_nothing_changes(saved: Path) -> None:
    td = TensorDict({"a": torch.zeros(4)}, [4])
    with pytest.raises(BatchSizeError, match=r"\[3\]"):
        td.load_memmap_(saved)
    assert isinstance(td["a"], torch.Tensor) and td["a"].shape == (4,)
    assert not isinstance(td["a"], MemoryMappedTensor)


def test_a_lazy_stack_gets_the_saved_values_written_into_its_members(tmp_path: Path) -> None:
    TensorDict({"a": torch.arange(2.0)}, [2]).save(tmp_path / "s")
    members = [TensorDict({"a": torch.zeros(())}), TensorDict({"a": torch.zeros(())})]
    stack = LazyStackedTensorDict(*members)
    assert stack.load_memmap_(tmp_path / "s") is stack
    assert [m["a"].item() for m in members] == [0.0, 1.0]
