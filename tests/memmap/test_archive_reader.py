"""``_ArchiveReader``: the index of a ``.tdz`` archive and its one mapping; compressed leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tensordict import TensorDict
from tensordict._archive import _ArchiveReader


def test_entries_and_folders_are_indexed(tmp_path: Path) -> None:
    TensorDict({"a": torch.arange(4), "n": {"b": torch.ones(4)}}, [4]).save(tmp_path / "t.tdz")
    with _ArchiveReader(tmp_path / "t.tdz") as reader:
        assert {"meta.json", "a.memmap", "n/meta.json", "n/b.memmap"} <= set(reader.entries)
        assert reader.children[""] >= {"a.memmap", "n", "meta.json"}
        entry = reader.entries["a.memmap"]
        view = reader.storage[entry.offset : entry.offset + entry.size].view(torch.int64)
        assert view.tolist() == [0, 1, 2, 3]


def test_prefetch_inflates_compressed_leaves_in_threads(tmp_path: Path) -> None:
    TensorDict({"a": torch.arange(8.0), "b": torch.ones(8)}, [8]).save(
        tmp_path / "t.tdz", compression="deflate"
    )
    with _ArchiveReader(tmp_path / "t.tdz") as reader:
        assert reader.is_compressed("a.memmap")
        reader.prefetch_compressed("", 2)
        assert set(reader._decompressed) == {"a.memmap", "b.memmap"}
        data = reader.read_bytes("a.memmap")
    assert torch.frombuffer(bytearray(data), dtype=torch.float32).tolist() == list(range(8))


def test_compressed_archive_loads_with_threads(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.arange(8.0), "n": {"b": torch.arange(8)}}, [8])
    td.save(tmp_path / "t.tdz", compression="deflate")
    loaded = TensorDict.load_memmap(tmp_path / "t.tdz", num_threads=2)
    assert (loaded == td).all()


def test_a_load_to_the_meta_device_reads_no_compressed_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    TensorDict({"a": torch.arange(8.0)}, [8]).save(tmp_path / "t.tdz", compression="deflate")

    def refuse(*args: object) -> bytes:
        raise AssertionError("leaf data was read")

    monkeypatch.setattr(_ArchiveReader, "read_bytes", refuse)
    monkeypatch.setattr(_ArchiveReader, "prefetch_compressed", refuse)
    loaded = TensorDict.load_memmap(tmp_path / "t.tdz", device="meta", num_threads=2)
    assert loaded["a"].device.type == "meta" and loaded["a"].shape == (8,)


@pytest.mark.parametrize("name", ["t.tdz", "t"])
def test_a_load_under_fake_tensor_mode_gives_fake_leaves(tmp_path: Path, name: str) -> None:
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    TensorDict({"a": torch.arange(8.0), "n": {"b": torch.ones(8, 2)}}, [8]).save(tmp_path / name)
    with FakeTensorMode():
        fake = TensorDict.load_memmap(tmp_path / name)
    assert isinstance(fake["a"], FakeTensor) and fake["n", "b"].shape == (8, 2)
