"""Saving a sub-tensordict (``td._get_sub_tensordict(index)``) as upstream does: its whole source
in ``_source/`` and its index, tagged, in ``meta.json``; it loads back as a sub-tensordict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tensordict import TensorDict
from tensordict.core.lazy.views import _SubTensorDict
from tensordict.errors import LazyViewError, MemmapFormatError


def source() -> TensorDict:
    a = torch.arange(24.0).reshape(4, 3, 2)
    return TensorDict({"a": a, "n": {"c": torch.arange(12).reshape(4, 3)}}, [4, 3])


@pytest.mark.parametrize(
    "index", [(slice(None), slice(0, 2)), (torch.tensor([0, 2]),), ([1, 3],), 1]
)
def test_a_sub_tensordict_round_trips(tmp_path: Path, index) -> None:
    sub = source()._get_sub_tensordict(index)
    sub.memmap(tmp_path / "s")
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert isinstance(loaded, _SubTensorDict)
    assert loaded.batch_size == sub.batch_size
    assert torch.equal(loaded["a"], sub["a"]) and torch.equal(loaded["n", "c"], sub["n", "c"])


def test_the_source_and_the_tagged_index_are_written(tmp_path: Path) -> None:
    source()._get_sub_tensordict((slice(None), slice(0, 2))).memmap(tmp_path / "s")
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    assert meta["_class"] == "tensordict._td:_SubTensorDict"
    assert meta["index"] == [
        "tuple",
        [
            ["slice", {"start": None, "stop": None, "step": None}],
            ["slice", {"start": 0, "stop": 2, "step": None}],
        ],
    ]
    whole = TensorDict.load_memmap(tmp_path / "s" / "_source")
    assert torch.equal(whole["a"], source()["a"])


def test_memmap_returns_a_sub_tensordict_of_a_locked_memory_mapped_source(tmp_path: Path) -> None:
    out = source()._get_sub_tensordict((slice(0, 2),)).memmap(tmp_path / "s")
    assert isinstance(out, _SubTensorDict) and out.batch_size == (2, 3)
    assert out._source.is_locked and out._source.is_memmap()


def test_memmap_in_place_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    sub = source()._get_sub_tensordict((slice(0, 2),))
    with pytest.raises(LazyViewError, match="parent"):
        sub.memmap_(tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_load_memmap_into_a_sub_tensordict_writes_the_saved_source(tmp_path: Path) -> None:
    saved = source()
    saved._get_sub_tensordict((slice(None), slice(0, 2))).memmap(tmp_path / "s")
    dest = TensorDict(
        {"a": torch.zeros(4, 3, 2), "n": {"c": torch.zeros(4, 3, dtype=torch.int64)}}, [4, 3]
    )
    dest._get_sub_tensordict((slice(None), slice(0, 2))).load_memmap_(tmp_path / "s")
    assert torch.equal(dest["a"], saved["a"])


def test_an_index_that_does_not_fit_the_source_is_refused(tmp_path: Path) -> None:
    source()._get_sub_tensordict((slice(0, 2),)).memmap(tmp_path / "s")
    meta_path = tmp_path / "s" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["index"] = ["tuple", [7]]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(MemmapFormatError, match="does not index its source"):
        TensorDict.load_memmap(tmp_path / "s")


def test_a_sub_tensordict_round_trips_through_an_archive(tmp_path: Path) -> None:
    sub = source()._get_sub_tensordict((slice(None), slice(1, 3)))
    sub.memmap(tmp_path / "s.tdz")
    loaded = TensorDict.load_memmap(tmp_path / "s.tdz")
    assert isinstance(loaded, _SubTensorDict)
    assert torch.equal(loaded["a"], sub["a"]) and torch.equal(loaded["n", "c"], sub["n", "c"])
