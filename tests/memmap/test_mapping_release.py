"""A mapping never outlives the last reference to it: deleted datasets give their disk (or, on
tmpfs, their memory) back as soon as nothing uses them, and the per-process mapping cache holds
nothing alive by itself."""

from __future__ import annotations

import gc
import os
import pickle
import shutil
from pathlib import Path

import torch

from tensordict import MemoryMappedTensor, TensorDict
from tensordict.memmap import mapping

from .fsutil import private_tmpfs


def mapped(path: Path) -> int:
    """How many mappings of ``path`` this process holds (deleted files included)."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if str(path) in line)


def test_deleted_dataset_is_unmapped_once_unreferenced(tmp_path: Path) -> None:
    td = TensorDict({"x": torch.ones(1 << 16)}, []).memmap(tmp_path / "p")
    again = TensorDict.load_memmap(tmp_path / "p")
    assert mapped(tmp_path / "p") >= 1
    del td, again
    gc.collect()
    shutil.rmtree(tmp_path / "p")
    assert mapped(tmp_path / "p") == 0


def test_unpickled_views_release_the_file_with_the_last_view(tmp_path: Path) -> None:
    td = TensorDict({"x": torch.ones(64)}, [64]).memmap(tmp_path / "p")
    payloads = [pickle.dumps(c) for c in td.split(16)]
    del td
    gc.collect()
    chunks = [pickle.loads(p) for p in payloads]
    assert len({c["x"].untyped_storage().data_ptr() for c in chunks}) == 1  # still one mapping
    del chunks
    gc.collect()
    assert mapped(tmp_path / "p" / "x.memmap") == 0


def test_deleted_datasets_give_their_space_back(tmp_path: Path) -> None:
    # twenty 4 MiB datasets saved, loaded, deleted, on a file system of their own: every byte
    # comes back (before the fix, the cache kept the last ones mapped: 80 MiB of it held)
    with private_tmpfs(tmp_path / "fs", "128m") as fs:

        def used() -> int:
            st = os.statvfs(fs)
            return (st.f_blocks - st.f_bfree) * st.f_frsize

        start = used()
        for i in range(20):
            TensorDict({"x": torch.ones(1 << 20)}, []).memmap(fs / f"d{i}")
            TensorDict.load_memmap(fs / f"d{i}")["x"].sum()
            shutil.rmtree(fs / f"d{i}")
        gc.collect()
        assert mapped(fs) == 0
        assert used() == start


def test_cache_still_shares_one_mapping_while_referenced(tmp_path: Path) -> None:
    t = MemoryMappedTensor.from_tensor(torch.arange(8.0), filename=tmp_path / "f")
    a = MemoryMappedTensor.from_filename(tmp_path / "f", torch.float32, [8])
    b = MemoryMappedTensor.from_filename(tmp_path / "f", torch.float32, [2, 4])
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert t.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert mapped(tmp_path / "f") == 1


def test_cache_entries_of_released_mappings_are_dropped(tmp_path: Path) -> None:
    for i in range(10):
        MemoryMappedTensor.from_tensor(torch.zeros(4), filename=tmp_path / f"f{i}")
    gc.collect()
    live = [
        k for k, (_, ref) in mapping._cache.items() if str(tmp_path) in k[0] and ref() is not None
    ]
    assert live == []
