"""A file system too small for the data: files are really preallocated, a short disk raises a
clear OSError naming the path and the size, and nothing is left half-written (an overwrite keeps
the old version).

A tiny tmpfs is mounted where the test runs as root and may mount; elsewhere those tests skip with
the reason, and the same paths are covered by injected faults (RLIMIT_FSIZE in a subprocess, a
failing ``posix_fallocate``)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict

from .fsutil import private_tmpfs
from .test_overwrite import siblings, snapshot

MiB = 1 << 20


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (skips when mounting is not allowed here)."""
    with private_tmpfs(tmp_path / "tiny", "4m") as mnt:
        yield mnt


def big(nbytes: int) -> TensorDict:
    return TensorDict({"x": torch.zeros(nbytes // 4), "y": {"z": torch.zeros(4)}}, [])


def test_memmap_like_preallocates_its_files(tmp_path: Path) -> None:
    out = big(8 * MiB).memmap_like(tmp_path / "p")
    st = os.stat(out["x"].filename)
    assert st.st_size == 8 * MiB and st.st_blocks * 512 >= 8 * MiB  # not sparse


def test_empty_with_a_filename_preallocates(tmp_path: Path) -> None:
    t = MemoryMappedTensor.empty(MiB, dtype=torch.uint8, filename=tmp_path / "f")
    assert os.stat(t.filename).st_blocks * 512 >= MiB and not t.any()


def test_memmap_like_on_a_short_disk_raises_naming_path_and_size(tiny_fs: Path) -> None:
    with pytest.raises(OSError, match=r"8\.00 MiB") as info:
        big(8 * MiB).memmap_like(tiny_fs / "p")
    assert info.value.errno == errno.ENOSPC and str(tiny_fs / "p") in str(info.value)
    assert os.listdir(tiny_fs) == []  # nothing half-written, no staging folder left


def test_memmap_on_a_short_disk_keeps_the_old_version(tiny_fs: Path) -> None:
    TensorDict({"x": torch.full((4,), 5.0)}, [4]).memmap(tiny_fs / "p")
    before = snapshot(tiny_fs / "p")
    with pytest.raises(OSError) as info:
        big(8 * MiB).memmap(tiny_fs / "p")
    assert info.value.errno == errno.ENOSPC
    assert snapshot(tiny_fs / "p") == before and siblings(tiny_fs / "p") == []
    assert TensorDict.load_memmap(tiny_fs / "p")["x"].tolist() == [5.0] * 4


def test_short_disk_found_only_while_writing_keeps_the_old_version(tiny_fs, monkeypatch):
    # the up-front free-space check passes (it is told there is room); the write itself fails
    from tensordict.memmap import transaction as tx

    TensorDict({"x": torch.full((4,), 5.0)}, [4]).memmap(tiny_fs / "p")
    before = snapshot(tiny_fs / "p")
    monkeypatch.setattr(tx, "free_bytes", lambda path: 1 << 40)
    with pytest.raises(OSError) as info:
        TensorDict({"x": torch.ones(8 * MiB // 4)}, []).memmap(tiny_fs / "p")
    assert info.value.errno == errno.ENOSPC and str(tiny_fs / "p") in str(info.value)
    assert snapshot(tiny_fs / "p") == before and siblings(tiny_fs / "p") == []


def test_fallocate_failure_raises_clearly_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    TensorDict({"old": torch.full((4,), 5.0)}, [4]).memmap(tmp_path / "p")
    before = snapshot(tmp_path / "p")

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(OSError, match=r"2\.00 MiB") as info:
        big(2 * MiB).memmap_like(tmp_path / "p")
    assert info.value.errno == errno.ENOSPC and "x.memmap" in str(info.value)
    assert snapshot(tmp_path / "p") == before and siblings(tmp_path / "p") == []


FSIZE_SCRIPT = textwrap.dedent(
    """
    import resource, signal, sys
    import torch
    from tensordict import TensorDict
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    try:
        TensorDict({"x": torch.ones(1 << 20)}, []).memmap(sys.argv[1])
    except OSError as err:
        print(err.errno, err)
        sys.exit(3)
    """
)


def test_file_size_limit_during_overwrite_keeps_the_old_version(tmp_path: Path) -> None:
    TensorDict({"x": torch.full((4,), 5.0)}, [4]).memmap(tmp_path / "p")
    before = snapshot(tmp_path / "p")
    proc = subprocess.run(
        [sys.executable, "-c", FSIZE_SCRIPT, str(tmp_path / "p")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith(str(errno.EFBIG)) and "x.memmap" in proc.stdout
    assert snapshot(tmp_path / "p") == before and siblings(tmp_path / "p") == []
