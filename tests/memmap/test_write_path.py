"""How a save writes its leaves: under their own names in a new version's folder, with the
writeback of large leaves started as they are written (durable saves only)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import NoSpaceError
from tensordict.memmap import files
from tensordict.memmap import tensor as mmt
from tensordict.memmap import transaction as tx


def sample() -> TensorDict:
    big = files.WRITEBACK_BYTES // 4  # float32 elements: exactly the threshold
    return TensorDict(
        {
            "big": torch.arange(big, dtype=torch.float32),
            "small": torch.ones(8),
            "c": torch.zeros(3),
        },
        [],
    )


@pytest.fixture
def writebacks(monkeypatch) -> list[str]:
    """The file name of every ``start_writeback`` call."""
    seen: list[str] = []
    real = mmt.start_writeback

    def spy(fd: int) -> None:
        seen.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(mmt, "start_writeback", spy)
    return seen


@pytest.mark.parametrize("num_threads", [0, 2])
def test_a_durable_save_starts_the_writeback_of_large_leaves_only(
    tmp_path: Path, writebacks: list[str], num_threads: int
) -> None:
    td = sample()
    out = td.memmap(tmp_path / "p", num_threads=num_threads)
    assert writebacks == ["big.memmap"]
    assert torch.equal(out["big"], td["big"]) and torch.equal(out["small"], td["small"])


@pytest.mark.parametrize("num_threads", [0, 2])
def test_a_scratch_save_starts_no_writeback(
    tmp_path: Path, writebacks: list[str], num_threads: int
) -> None:
    # the pool's threads do not see the caller's context: the save reads it before them
    with tx.scratch_writes():
        out = sample().memmap(tmp_path / "p", num_threads=num_threads)
    assert writebacks == []
    assert torch.equal(out["big"], sample()["big"])


def test_a_new_version_writes_each_leaf_under_its_own_name(tmp_path: Path, monkeypatch) -> None:
    renamed: list[str] = []
    real = os.replace

    def spy(src: Any, dst: Any, **kwargs: Any) -> None:
        renamed.append(os.path.basename(os.fspath(dst)))
        real(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", spy)
    sample().memmap(tmp_path / "p")
    assert not [name for name in renamed if name.endswith(".memmap")]
    assert sorted(os.listdir(tmp_path / "p")) == [
        "big.memmap",
        "c.memmap",
        "meta.json",
        "small.memmap",
    ]


@pytest.mark.parametrize("num_threads", [0, 2])
def test_a_leaf_that_does_not_fit_leaves_nothing_behind(
    tmp_path: Path, monkeypatch, num_threads: int
) -> None:
    real = os.write

    def full_for_small(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("small.memmap"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", full_for_small)
    with pytest.raises(NoSpaceError, match=r"small\.memmap"):
        sample().memmap(tmp_path / "p", num_threads=num_threads)
    assert os.listdir(tmp_path) == []


def test_an_overwrite_keeps_the_old_version_readable_until_the_switch(tmp_path: Path) -> None:
    old = sample().memmap(tmp_path / "p")
    new = sample().apply(lambda t: t + 1)
    new.memmap(tmp_path / "p")
    assert torch.equal(old["big"], sample()["big"])  # the old mapping kept its own files
    loaded = TensorDict.load_memmap(tmp_path / "p")
    assert torch.equal(loaded["big"], new["big"]) and torch.equal(loaded["c"], new["c"])


def test_start_writeback_of_a_closed_descriptor_leaves_the_error_to_fsync(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"x" * 4096)
    os.close(fd)
    files.start_writeback(fd)  # a bad descriptor: nothing raised, the final fsync reports errors
    assert path.read_bytes() == b"x" * 4096
