"""Overwriting a saved tensordict: crash-safe end to end, bad input writes nothing, an existing
directory (the source itself included) keeps its data, leftovers of killed writers are cleaned."""

from __future__ import annotations

import hashlib
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict
from tensordict.errors import IncompleteMemmapError, MemmapFormatError, NotPicklableError
from tensordict.memmap import io
from tensordict.memmap import transaction as tx
from tests.stress import stress_count

from . import writers
from .fsutil import private_tmpfs


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha1 of its bytes), and every folder."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_dir():
            out[rel] = "<dir>"
        else:
            out[rel] = hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def siblings(root: Path) -> list[str]:
    """What else than ``root`` itself its parent holds (staging folders, lock files)."""
    return sorted(p.name for p in root.parent.iterdir() if p.name != root.name)


def make(v: float = 1.0) -> TensorDict:
    return TensorDict(
        {"a": torch.full((3, 4), v), "b": {"c": torch.full((3,), v)}, "s": f"v{v}"}, [3]
    )


# ====================================================================== item 1: memmap_like
def test_memmap_like_over_the_source_directory_keeps_its_data(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    before = snapshot(tmp_path / "p")
    src = TensorDict.load_memmap(tmp_path / "p")
    out = src.memmap_like(tmp_path / "p")
    assert snapshot(tmp_path / "p") == before
    assert out["a"].tolist() == [[5.0] * 4] * 3 and src["a"].tolist() == [[5.0] * 4] * 3
    assert TensorDict.load_memmap(tmp_path / "p")["b", "c"].tolist() == [5.0] * 3


def test_memmap_like_over_another_dataset_keeps_the_files_it_reuses(tmp_path: Path) -> None:
    # as upstream: a file already at a leaf's path is mapped as it is (a buffer reopened);
    # only new leaves are zero-filled
    make(5.0).memmap(tmp_path / "p")
    like = TensorDict({"a": torch.ones(3, 4), "new": torch.ones(3)}, [3])
    out = like.memmap_like(tmp_path / "p")
    assert out["a"].tolist() == [[5.0] * 4] * 3 and out["new"].tolist() == [0.0] * 3
    again = TensorDict.load_memmap(tmp_path / "p")
    assert again["a"].tolist() == [[5.0] * 4] * 3 and set(again.keys()) == {"a", "new"}


def test_memmap_like_keeps_the_data_a_loaded_tensordict_shows(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    src = TensorDict.load_memmap(tmp_path / "p")
    out = src.memmap_like(tmp_path / "p")
    out["a"][0, 0] = 9.0  # the same file: the source sees the write
    assert src["a"][0, 0].item() == 9.0


def test_memmap_like_refuses_an_existing_dataset_without_existsok(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    before = snapshot(tmp_path / "p")
    with pytest.raises(FileExistsError, match="already exists") as info:
        make().memmap_like(tmp_path / "p", existsok=False)
    assert isinstance(info.value, RuntimeError)  # what upstream raises
    assert snapshot(tmp_path / "p") == before


def test_memmap_like_grows_a_smaller_file_with_zeros_and_warns(tmp_path: Path) -> None:
    TensorDict({"a": torch.full((2,), 5.0)}, [2]).memmap(tmp_path / "p")
    with pytest.warns(FutureWarning, match="smaller"):
        out = TensorDict({"a": torch.ones(4)}, [4]).memmap_like(tmp_path / "p")
    assert out["a"].tolist() == [5.0, 5.0, 0.0, 0.0]


# ====================================================================== item 2: bad input
def unpicklable() -> Any:
    return NonTensorData(lambda x: x, batch_size=[3])


BAD_INPUTS = {
    "long-key": lambda: TensorDict({"k" * 300: torch.zeros(3)}, [3]),
    "long-nested-key": lambda: TensorDict({"n" * 300: {"x": torch.zeros(3)}}, [3]),
    "unpicklable": lambda: TensorDict({"a": torch.zeros(3), "f": unpicklable()}, [3]),
    "meta-device": lambda: TensorDict(
        {"a": torch.zeros(3), "m": torch.empty(3, device="meta")}, [3]
    ),
}


@pytest.mark.parametrize("bad", sorted(BAD_INPUTS))
@pytest.mark.parametrize("how", ["memmap", "memmap_"])
def test_overwrite_with_bad_input_leaves_the_old_dataset_untouched(tmp_path: Path, bad, how):
    make(5.0).memmap(tmp_path / "p")
    before = snapshot(tmp_path / "p")
    td = BAD_INPUTS[bad]()
    with pytest.raises((MemmapFormatError, NotPicklableError)) as info:
        getattr(td, how)(tmp_path / "p")
    assert str(tmp_path / "p") in str(info.value) or bad == "unpicklable"
    assert snapshot(tmp_path / "p") == before
    assert siblings(tmp_path / "p") == []
    assert TensorDict.load_memmap(tmp_path / "p")["a"].tolist() == [[5.0] * 4] * 3


@pytest.mark.parametrize("bad", sorted(BAD_INPUTS))
def test_bad_input_to_a_new_prefix_creates_nothing(tmp_path: Path, bad) -> None:
    with pytest.raises((MemmapFormatError, NotPicklableError)):
        BAD_INPUTS[bad]().memmap(tmp_path / "new" / "p")
    assert list(tmp_path.iterdir()) == []


def test_long_key_error_names_the_limit(tmp_path: Path) -> None:
    with pytest.raises(MemmapFormatError, match="255") as info:
        BAD_INPUTS["long-key"]().memmap(tmp_path / "p")
    assert isinstance(info.value, OSError)  # upstream fails with ENAMETOOLONG


def test_unpicklable_error_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(NotPicklableError, match="'f'"):
        BAD_INPUTS["unpicklable"]().memmap(tmp_path / "p")


def test_meta_device_leaf_is_fine_for_memmap_like(tmp_path: Path) -> None:
    td = TensorDict({"m": torch.empty(3, 2, device="meta")}, [3])
    assert td.memmap_like(tmp_path / "p")["m"].tolist() == [[0.0, 0.0]] * 3


# ====================================================================== item 3: crash-safe
CRASH_POINTS = [
    ("data", 0),
    ("data", 5),
    ("data", 13),
    ("meta", 0),
    ("meta", 4),
    ("fsync", 3),
    ("fsync", 20),
    ("commit", 0),
    ("cleanup", 0),
]


@pytest.mark.parametrize(("where", "after"), CRASH_POINTS)
def test_writer_dying_at_any_step_of_an_overwrite_leaves_old_or_new(tmp_path: Path, where, after):
    prefix = tmp_path / "p"
    writers.version(1, rows=8).memmap(prefix)
    code, _ = writers.run_forked(writers.crash_overwrite, str(prefix), where, after)
    assert code in (0, 17)
    found = writers.versions_in(TensorDict.load_memmap(prefix))
    assert found in ({1}, {2}), found
    if where in ("data", "meta", "fsync"):
        assert found == {1}  # died before the switch: the old version, complete
    if where == "cleanup":
        assert found == {2}  # died after the switch: the new version, complete


@pytest.mark.stress
def test_kill_9_at_random_moments_never_loses_or_mixes_a_version(tmp_path: Path) -> None:
    prefix = str(tmp_path / "p")
    writers.version(0).memmap(prefix)
    kills = stress_count(6, 100)
    rng = random.Random(1234)
    unloadable, mixed, mid_write = 0, 0, 0
    first = 1
    for _ in range(kills):
        proc, conn = writers.start(writers.overwrite_forever, prefix, first)
        assert conn.poll(120), "the writer never saved a version"
        saved = [conn.recv()]
        # fault injection, not synchronisation: kill at a random instant of the next writes
        time.sleep(rng.uniform(0.0, 0.15))
        writers.kill(proc)
        saved += writers.drain(conn)
        conn.close()
        # a staging folder left: killed while writing the new version
        mid_write += any(".tdstage-" in name for name in siblings(tmp_path / "p"))
        try:
            found = writers.versions_in(TensorDict.load_memmap(prefix))
        except Exception:
            unloadable += 1
            continue
        if len(found) != 1:
            mixed += 1
            continue
        (v,) = found
        assert v in (saved[-1], saved[-1] + 1), (v, saved)
        first = saved[-1] + 2
    assert (unloadable, mixed) == (0, 0)
    print(f"{kills} kills ({mid_write} mid-write): {unloadable} unloadable, {mixed} mixed")


def test_new_version_is_fsynced_before_the_switch_and_the_switch_after(tmp_path: Path, monkeypatch):
    make(1.0).memmap(tmp_path / "p")
    events: list[tuple[str, str]] = []
    real_fsync, real_exchange = os.fsync, tx.exchange

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def exchange(a: str, b: str) -> None:
        events.append(("switch", b))
        real_exchange(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(tx, "exchange", exchange)
    make(2.0).memmap(tmp_path / "p")
    switch = events.index(("switch", str(tmp_path / "p")))
    before = {Path(p).name for kind, p in events[:switch]}
    assert {"a.memmap", "c.memmap", "meta.json"} <= before  # files, nested ones too
    assert sum(name.startswith(".p") for name in before) >= 1  # the staging folder itself
    assert ("fsync", str(tmp_path)) in events[switch:]  # the parent, after the switch


def test_disk_error_during_overwrite_keeps_the_old_version(tmp_path: Path, monkeypatch) -> None:
    make(5.0).memmap(tmp_path / "p")
    before = snapshot(tmp_path / "p")
    calls = [0]
    real = io.write_file

    def disk_full(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(28, "No space left on device")
        real(*args, **kwargs)

    monkeypatch.setattr(io, "write_file", disk_full)
    td = make(7.0)
    with pytest.raises(OSError, match="No space"):
        td.memmap_(tmp_path / "p")
    assert not td.is_locked and not td.is_memmap() and type(td["a"]) is torch.Tensor
    assert snapshot(tmp_path / "p") == before and siblings(tmp_path / "p") == []


def test_tensordicts_mapping_the_old_version_keep_their_values(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    old = TensorDict.load_memmap(tmp_path / "p")
    make(7.0).memmap(tmp_path / "p")
    assert old["a"].tolist() == [[5.0] * 4] * 3  # no SIGBUS, no half-new values
    assert TensorDict.load_memmap(tmp_path / "p")["a"].tolist() == [[7.0] * 4] * 3


def test_memmap_in_place_onto_its_own_directory_after_an_addition(tmp_path: Path) -> None:
    td = make(5.0).memmap_(tmp_path / "p")
    leaf = td["a"]
    with td.unlock_():
        td["new"] = torch.full((3,), 7.0)
    td.memmap_(tmp_path / "p")
    leaf[0, 0] = 1.0  # the old leaf still maps the file the directory holds
    again = TensorDict.load_memmap(tmp_path / "p")
    assert again["a"][0, 0].item() == 1.0 and again["new"].tolist() == [7.0] * 3


def test_memmap_in_place_after_another_process_replaced_the_directory(tmp_path: Path) -> None:
    td = make(5.0).memmap_(tmp_path / "p")
    make(7.0).memmap(tmp_path / "p")  # the directory now holds other files
    td.memmap_(tmp_path / "p")  # must write td's values again, not take the new files for its own
    assert TensorDict.load_memmap(tmp_path / "p")["a"].tolist() == [[5.0] * 4] * 3


def test_overwrite_keeps_files_the_dataset_does_not_describe(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    (tmp_path / "p" / "notes.txt").write_text("mine")
    (tmp_path / "p" / "b" / "extra.bin").write_bytes(b"x")
    (tmp_path / "p" / "runs").mkdir()
    (tmp_path / "p" / "runs" / "log.txt").write_text("log")
    make(7.0).memmap(tmp_path / "p")
    assert (tmp_path / "p" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "p" / "b" / "extra.bin").read_bytes() == b"x"
    assert (tmp_path / "p" / "runs" / "log.txt").read_text() == "log"


def test_overwrite_removes_what_only_the_old_version_described(tmp_path: Path) -> None:
    TensorDict({"old": torch.zeros(3), "n": {"x": torch.zeros(3)}}, [3]).memmap(tmp_path / "p")
    make(7.0).memmap(tmp_path / "p")
    assert not (tmp_path / "p" / "old.memmap").exists() and not (tmp_path / "p" / "n").exists()


def test_overwrite_of_a_symlinked_prefix_keeps_the_link(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "real")
    os.symlink(tmp_path / "real", tmp_path / "link")
    make(7.0).memmap(tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert TensorDict.load_memmap(tmp_path / "real")["a"][0, 0].item() == 7.0


def test_overwrite_keeps_the_prefix_permissions(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    os.chmod(tmp_path / "p", 0o750)
    make(7.0).memmap(tmp_path / "p")
    assert (tmp_path / "p").stat().st_mode & 0o777 == 0o750


def test_overwrite_of_a_lazy_stack_by_a_shorter_one(tmp_path: Path) -> None:
    a = TensorDict({"x": torch.zeros(2)}, [2])
    LazyStackedTensorDict(a, a, a, stack_dim=0).memmap(tmp_path / "p")
    LazyStackedTensorDict(a, a, stack_dim=0).memmap(tmp_path / "p")
    assert len(TensorDict.load_memmap(tmp_path / "p").tensordicts) == 2


# ====================================================================== item 7: leftovers
def test_leftovers_of_killed_writers_are_removed_by_the_next_save(tmp_path: Path) -> None:
    prefix = tmp_path / "p"
    writers.version(1, rows=8).memmap(prefix)
    for after in (3, 9, 1):
        code, _ = writers.run_forked(writers.crash_overwrite, str(prefix), "data", after)
        assert code == 17
    assert siblings(prefix)  # the killed writers left their staging folders
    # what an older version of this library left inside the prefix: temporary files
    (prefix / "k0.memmap.tmp-123-456").write_bytes(b"\0" * 4096)
    (prefix / "nested" / "meta.json.tmp-99-1").write_bytes(b"{")
    # and what killed writers of an entry inside it (a non-tensor rewrite) left there
    (prefix / ".label.tdstage-7-abc").mkdir()
    (prefix / ".label.tdlock").write_bytes(b"")
    writers.version(3, rows=8).memmap(prefix)
    assert siblings(prefix) == []
    assert not [p for p in prefix.rglob("*") if ".tmp-" in p.name or ".td" in p.name]
    assert writers.versions_in(TensorDict.load_memmap(prefix)) == {3}


def test_leftovers_of_other_prefixes_are_not_touched(tmp_path: Path) -> None:
    make(1.0).memmap(tmp_path / "p")
    (tmp_path / ".q.tdstage-1-abc").mkdir()
    (tmp_path / ".pp.tdstage-1-abc").mkdir()
    make(2.0).memmap(tmp_path / "p")
    assert sorted(siblings(tmp_path / "p")) == [".pp.tdstage-1-abc", ".q.tdstage-1-abc"]


# ====================================================================== no atomic switch possible
def test_without_rename_exchange_the_old_version_is_renamed_aside(tmp_path: Path, monkeypatch):
    make(5.0).memmap(tmp_path / "p")
    (tmp_path / "p" / "notes.txt").write_text("mine")

    def unsupported(a: str, b: str) -> None:
        raise OSError(22, "Invalid argument")  # what a file system without it answers

    monkeypatch.setattr(tx, "exchange", unsupported)
    make(7.0).memmap(tmp_path / "p")
    assert TensorDict.load_memmap(tmp_path / "p")["a"][0, 0].item() == 7.0
    assert (tmp_path / "p" / "notes.txt").read_text() == "mine" and siblings(tmp_path / "p") == []


def test_crash_between_the_two_renames_is_undone_by_the_next_write(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    (tmp_path / "p" / "notes.txt").write_text("mine")
    os.rename(tmp_path / "p", tmp_path / ".p.tdprev-1-abc")  # the first rename, then the crash
    with pytest.raises(IncompleteMemmapError, match=r"\.p\.tdprev-1-abc"):
        TensorDict.load_memmap(tmp_path / "p")  # the error says where the old version is
    make(7.0).memmap(tmp_path / "p")  # puts the old version back first, then replaces it
    assert TensorDict.load_memmap(tmp_path / "p")["a"][0, 0].item() == 7.0
    assert (tmp_path / "p" / "notes.txt").read_text() == "mine" and siblings(tmp_path / "p") == []


@pytest.fixture
def in_place(monkeypatch):
    """Make every write go in place, as on a mount point or under a read-only parent."""
    real_init = tx.Staging.__init__

    def no_staging(self, root: str, real: str) -> None:
        real_init(self, root, real)
        if not self.in_place:
            os.rmdir(self.target)
            self.target, self.in_place = real, True

    monkeypatch.setattr(tx.Staging, "__init__", no_staging)


def test_in_place_overwrite_replaces_the_version_and_keeps_foreign_files(tmp_path, in_place):
    TensorDict({"old": torch.zeros(3), "a": torch.zeros(3, 4)}, [3]).memmap(tmp_path / "p")
    (tmp_path / "p" / "notes.txt").write_text("mine")
    make(7.0).memmap(tmp_path / "p")
    assert TensorDict.load_memmap(tmp_path / "p")["a"][0, 0].item() == 7.0
    assert not (tmp_path / "p" / "old.memmap").exists()
    assert (tmp_path / "p" / "notes.txt").read_text() == "mine"


def test_interrupted_in_place_overwrite_never_loads_a_mix(tmp_path, in_place, monkeypatch):
    make(5.0).memmap(tmp_path / "p")
    calls = [0]
    real = io.write_file

    def fail_second(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(5, "Input/output error")
        real(*args, **kwargs)

    monkeypatch.setattr(io, "write_file", fail_second)
    with pytest.raises(OSError, match="Input/output"):
        make(7.0).memmap(tmp_path / "p")
    with pytest.raises(IncompleteMemmapError, match=r"meta\.json"):
        TensorDict.load_memmap(tmp_path / "p")


def test_mount_point_inside_the_prefix_is_kept_by_writing_in_place(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    with private_tmpfs(tmp_path / "p" / "mnt", "1m") as mnt:
        (mnt / "data.bin").write_bytes(b"kept")
        make(7.0).memmap(tmp_path / "p")  # cannot be linked into a staging folder
        assert (mnt / "data.bin").read_bytes() == b"kept" and os.path.ismount(mnt)
        assert TensorDict.load_memmap(tmp_path / "p")["a"][0, 0].item() == 7.0
        assert siblings(tmp_path / "p") == []


def test_prefix_that_is_a_mount_point_is_written_in_place(tmp_path: Path) -> None:
    with private_tmpfs(tmp_path / "p", "1m") as prefix:
        make(5.0).memmap(prefix)
        make(7.0).memmap(prefix)
        assert os.path.ismount(prefix)
        assert TensorDict.load_memmap(prefix)["a"][0, 0].item() == 7.0
        assert siblings(prefix) == []


def test_empty_mount_point_inside_the_prefix_stays_mounted(tmp_path: Path) -> None:
    make(5.0).memmap(tmp_path / "p")
    with private_tmpfs(tmp_path / "p" / "mnt", "1m") as mnt:
        make(7.0).memmap(tmp_path / "p")
        assert os.path.ismount(mnt)
