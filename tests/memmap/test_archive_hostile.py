"""``.tdz`` archives under hostile input and concurrent writers: a pack is one complete version,
extraction never writes through planted links nor lets one entry replace another, changed bytes
of an uncompressed leaf are caught at load, oversized metadata is refused before extraction, a
full disk names the archive."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import TensorDict, pack_memmap, refresh_archive_checksums, unpack_memmap
from tensordict.errors import MemmapArchiveError, NoSpaceError
from tensordict.memmap import archive as tdz
from tensordict.memmap import transaction as tx

from .fsutil import private_tmpfs


def _version(value: float) -> TensorDict:
    return TensorDict({"a": torch.full((64,), value), "b": {"c": torch.full((64,), value)}}, [64])


# ====================================================================== pack vs a writer
class _WriterSpy:
    """``fcntl`` for the transaction module: ``settled`` is set once a writer thread either
    waits for the prefix's lock (``blocked``) or got it and finished its write (``done``)."""

    def __init__(self, writer: list[threading.Thread]) -> None:
        self.writer = writer
        self.blocked, self.done, self.settled = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(fcntl, name)

    def flock(self, fd: int, op: int) -> None:
        if op == fcntl.LOCK_EX and threading.current_thread() in self.writer:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                self.blocked.set()
                self.settled.set()
        fcntl.flock(fd, op)


def test_pack_is_one_complete_version_while_a_writer_overwrites(tmp_path, monkeypatch):
    prefix = tmp_path / "data"
    _version(0.0).memmap(prefix)
    writer: list[threading.Thread] = []
    spy = _WriterSpy(writer)
    monkeypatch.setattr(tx, "fcntl", spy)

    def overwrite() -> None:
        _version(1.0).memmap(prefix)  # switches a complete new version in
        spy.done.set()
        spy.settled.set()

    add = tdz._add

    def add_then_let_the_writer_run(zf: Any, path: str, name: str, *args: Any) -> None:
        add(zf, path, name, *args)
        if name == "a.memmap":  # half packed: a writer comes along
            writer.append(threading.Thread(target=overwrite))
            writer[0].start()
            spy.settled.wait()  # it either waits for the pack's lock or overwrites meanwhile

    monkeypatch.setattr(tdz, "_add", add_then_let_the_writer_run)
    pack_memmap(prefix, tmp_path / "x.tdz")
    writer[0].join()
    packed = TensorDict.load_memmap(tmp_path / "x.tdz")
    assert (packed["a"] == 0).all() and (packed["b", "c"] == 0).all()  # the old one, whole
    assert (TensorDict.load_memmap(prefix)["b", "c"] == 1).all()  # the writer's, after it
    assert spy.blocked.is_set()  # it waited for the pack


# ====================================================================== extraction
def _archive(tmp_path: Path, entries: dict[str, bytes], name: str = "x.tdz") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        for entry, data in entries.items():
            zf.writestr(entry, data)
    return path


@pytest.mark.parametrize("link", ["a.memmap", "sub"])
def test_unpack_never_writes_through_a_planted_link(tmp_path, link):
    _version(2.0).save(tmp_path / "x.tdz")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.memmap").write_bytes(b"precious")
    (outside / "c.memmap").write_bytes(b"precious")
    target = tmp_path / "target"
    target.mkdir()
    if link == "sub":  # a folder of the archive, linked out
        os.symlink(outside, target / "b")
    else:  # a file of the archive, linked out
        os.symlink(outside / "a.memmap", target / "a.memmap")
    with pytest.raises(MemmapArchiveError, match="symbolic link"):
        unpack_memmap(tmp_path / "x.tdz", target)
    assert (outside / "a.memmap").read_bytes() == b"precious"
    assert (outside / "c.memmap").read_bytes() == b"precious"
    assert not (target / "meta.json").exists()  # refused before anything was extracted


def test_two_entries_naming_one_file_are_refused(tmp_path):
    meta = b'{"shape": [], "device": "cpu", "_type": "<class \'tensordict._td.TensorDict\'>"}'
    path = _archive(tmp_path, {"meta.json": meta, "x.memmap": b"\0" * 8, "sub/../x.memmap": b"1"})
    with pytest.raises(MemmapArchiveError, match=r"both name the file 'x\.memmap'"):
        unpack_memmap(path, tmp_path / "out")
    with pytest.raises(MemmapArchiveError, match="both name"):
        TensorDict.load_memmap(path)
    assert not (tmp_path / "out" / "x.memmap").exists()


def test_an_oversized_meta_json_is_refused_before_it_is_extracted(tmp_path, monkeypatch):
    monkeypatch.setattr(tdz.fmt, "MAX_META_BYTES", 1000)  # a 1 GiB bomb, scaled down
    path = tmp_path / "bomb.tdz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("meta.json", b" " * 100_000)
    written: list[str] = []
    create = getattr(tdz, "_create", None)
    monkeypatch.setattr(tdz, "_create", lambda p: written.append(p) or create(p), raising=False)
    with pytest.raises(MemmapArchiveError, match="more than the 1000 bytes of metadata"):
        TensorDict.load_memmap(path)
    with pytest.raises(MemmapArchiveError, match="Nothing was extracted"):
        unpack_memmap(path, tmp_path / "out")
    assert written == []


# ====================================================================== checksums at load
def _flip_a_byte(path: Path, entry: str) -> None:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(entry)
    with open(path, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = (
            int.from_bytes(f.read(2), "little"),
            int.from_bytes(f.read(2), "little"),
        )
        f.seek(info.header_offset + 30 + name_len + extra_len + 5)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_changed_bytes_of_an_uncompressed_leaf_are_caught_at_load(tmp_path):
    _version(3.0).save(tmp_path / "x.tdz")
    _flip_a_byte(tmp_path / "x.tdz", "b/c.memmap")
    with pytest.raises(MemmapArchiveError, match=r"'b/c\.memmap' is damaged.*CRC-32"):
        TensorDict.load_memmap(tmp_path / "x.tdz")
    # mode="r+" writes in place, which makes checksums stale by design: it does not check, and
    # marks the archive so that loads do not either, until the checksums are refreshed
    assert not (TensorDict.load_memmap(tmp_path / "x.tdz", mode="r+")["b", "c"] == 3).all()
    assert not (TensorDict.load_memmap(tmp_path / "x.tdz")["b", "c"] == 3).all()
    refresh_archive_checksums(tmp_path / "x.tdz")
    _flip_a_byte(tmp_path / "x.tdz", "a.memmap")
    with pytest.raises(MemmapArchiveError, match=r"'a\.memmap' is damaged"):
        TensorDict.load_memmap(tmp_path / "x.tdz")


# ====================================================================== full disk
@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    with private_tmpfs(tmp_path / "tiny", "4m") as mnt:
        yield mnt


@pytest.mark.parametrize("mib", [3, 8])  # fails while packing / while writing the folder
def test_save_tdz_on_a_full_disk_names_the_archive(tiny_fs, mib):
    td = TensorDict({"x": torch.zeros(mib << 18)}, [])
    with pytest.raises(NoSpaceError) as info:
        td.save(tiny_fs / "x.tdz")
    assert info.value.errno == errno.ENOSPC and str(tiny_fs / "x.tdz") in str(info.value)
    assert os.listdir(tiny_fs) == []
