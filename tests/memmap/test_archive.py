"""Single-file memmap archives (``.tdz``): writing, loading, packing, checksums, damage, and
interchange with upstream tensordict 0.15.3 in both directions."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch

import tensordict._archive as archive_module
from tensordict import (
    NonTensorData,
    TensorDict,
    is_memmap_archive,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)
from tensordict.errors import MemmapArchiveError, MemmapExistsError
from tensordict.memmap import archive as tdz

UPSTREAM = Path.home() / ".cache" / "td-upstream-venv" / "bin" / "python"
needs_upstream = pytest.mark.skipif(
    not UPSTREAM.exists(),
    reason=f"upstream tensordict is not installed in {UPSTREAM.parent.parent}",
)


def sample() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(12, dtype=torch.float32).reshape(3, 4),
            "b": {"c": torch.tensor([[True, False]] * 3), "d": torch.arange(3, dtype=torch.int16)},
            "e": NonTensorData("hello", batch_size=[3]),
        },
        batch_size=[3],
    )


def data_offsets(path: Path) -> dict[str, int]:
    out = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for info in zf.infolist():
            f.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<2H", f.read(4))
            out[info.filename] = info.header_offset + 30 + name_len + extra_len
    return out


def test_save_tdz_writes_one_aligned_zip_that_loads_back(tmp_path: Path) -> None:
    td = sample()
    out = td.save(tmp_path / "x.tdz")
    assert (tmp_path / "x.tdz").is_file()
    assert is_memmap_archive(tmp_path / "x.tdz")
    assert (out == td).all()
    offsets = data_offsets(tmp_path / "x.tdz")
    assert "meta.json" in offsets and "b/c.memmap" in offsets
    assert all(off % tdz.ALIGNMENT == 0 for off in offsets.values())
    loaded = TensorDict.load_memmap(tmp_path / "x.tdz")
    assert (loaded == td).all() and loaded["e"] == "hello"
    assert not loaded.is_locked
    # nothing but the archive is left next to it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.tdz"]


def test_pack_then_unpack_gives_the_directory_back(tmp_path: Path) -> None:
    td = sample()
    td.memmap(tmp_path / "plain")
    packed = pack_memmap(tmp_path / "plain", tmp_path / "packed.tdz")
    assert packed == tmp_path / "packed.tdz"
    with zipfile.ZipFile(packed) as zf:
        assert zf.testzip() is None
        assert zf.infolist()[0].filename == "meta.json"
    out = unpack_memmap(packed, tmp_path / "unpacked")
    for path in (tmp_path / "plain").rglob("*"):
        twin = out / path.relative_to(tmp_path / "plain")
        assert twin.exists()
        if path.is_file():
            assert twin.read_bytes() == path.read_bytes()
    assert (TensorDict.load_memmap(out) == td).all()


def test_foreign_unaligned_zip_loads(tmp_path: Path) -> None:
    td = sample()
    td.memmap(tmp_path / "plain")
    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(foreign, "w") as zf:
        for path in sorted((tmp_path / "plain").rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(tmp_path / "plain").as_posix())
    assert is_memmap_archive(foreign)
    assert (TensorDict.load_memmap(foreign) == td).all()


@pytest.mark.parametrize("compression", ["deflate", "lzma", zipfile.ZIP_BZIP2])
def test_compressed_archive_is_smaller_and_loads(tmp_path: Path, compression) -> None:
    td = TensorDict(a=torch.zeros(2000, dtype=torch.uint8))
    td.save(tmp_path / "stored.tdz")
    td.save(tmp_path / "small.tdz", compression=compression, compresslevel=None)
    assert (tmp_path / "small.tdz").stat().st_size < (tmp_path / "stored.tdz").stat().st_size
    assert (TensorDict.load_memmap(tmp_path / "small.tdz") == td).all()


def test_archive_flag_and_compression_options(tmp_path: Path) -> None:
    td = sample()
    td.save(tmp_path / "weights.bin", archive=True)
    assert is_memmap_archive(tmp_path / "weights.bin")
    with pytest.raises(ValueError, match="only supported when writing a memmap archive"):
        td.save(tmp_path / "dir", compression="deflate")
    assert not (tmp_path / "dir").exists()
    with pytest.raises(ValueError, match="compression must be one of"):
        td.save(tmp_path / "y.tdz", compression="zstd-ish")
    assert not (tmp_path / "y.tdz").exists()


def test_memmap_inplace_and_like_with_an_archive(tmp_path: Path) -> None:
    td = sample()
    same = td.memmap_(tmp_path / "x.tdz")
    assert same is td and td.is_memmap()
    assert (TensorDict.load_memmap(tmp_path / "x.tdz") == sample()).all()
    like = sample().memmap_like(tmp_path / "z.tdz")
    assert (like["a"] == 0).all()
    assert (TensorDict.load_memmap(tmp_path / "z.tdz")["b", "d"] == 0).all()


def test_existsok_false_refuses_an_existing_archive(tmp_path: Path) -> None:
    sample().save(tmp_path / "x.tdz")
    before = (tmp_path / "x.tdz").read_bytes()
    with pytest.raises(MemmapExistsError, match="existsok=False"):
        TensorDict(a=torch.ones(1)).memmap(tmp_path / "x.tdz", existsok=False)
    assert (tmp_path / "x.tdz").read_bytes() == before


def test_is_memmap_archive_is_false_for_anything_else(tmp_path: Path) -> None:
    sample().memmap(tmp_path / "dir")
    (tmp_path / "text.tdz").write_text("not a zip")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("readme.txt", "hi")
    for path in ("dir", "text.tdz", "other.zip", "missing.tdz"):
        assert not is_memmap_archive(tmp_path / path)


def test_truncated_archive_raises_a_clear_error(tmp_path: Path) -> None:
    sample().save(tmp_path / "x.tdz")
    raw = (tmp_path / "x.tdz").read_bytes()
    (tmp_path / "cut.tdz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(MemmapArchiveError, match="damaged, truncated"):
        TensorDict.load_memmap(tmp_path / "cut.tdz")
    with pytest.raises(ValueError, match="not a readable zip"):
        unpack_memmap(tmp_path / "cut.tdz", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_corrupted_payload_is_caught_by_its_checksum(tmp_path: Path) -> None:
    td = TensorDict(a=torch.zeros(64))
    td.save(tmp_path / "x.tdz")
    off = data_offsets(tmp_path / "x.tdz")["a.memmap"]
    with open(tmp_path / "x.tdz", "r+b") as f:
        f.seek(off)
        f.write(b"\x01")
    # as upstream, mapping does not read (nor check) uncompressed payloads; extracting does
    with pytest.raises(MemmapArchiveError, match=r"'a\.memmap' is damaged"):
        unpack_memmap(tmp_path / "x.tdz", tmp_path / "out")
    assert not (tmp_path / "out" / "a.memmap").exists()
    # after a deliberate in-place write, refreshing the checksums makes it valid again
    assert refresh_archive_checksums(tmp_path / "x.tdz") == tmp_path / "x.tdz"
    with zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        assert zf.testzip() is None
    assert TensorDict.load_memmap(tmp_path / "x.tdz")["a"][0] != 0


def test_zip_without_meta_and_escaping_names_are_refused(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "plain.zip", "w") as zf:
        zf.writestr("a.memmap", b"\0" * 8)
    with pytest.raises(MemmapArchiveError, match=r"no top-level meta\.json"):
        unpack_memmap(tmp_path / "plain.zip", tmp_path / "out")
    with zipfile.ZipFile(tmp_path / "evil.tdz", "w") as zf:
        zf.writestr("meta.json", b"{}")
        zf.writestr("../escape.memmap", b"\0" * 8)
    with pytest.raises(MemmapArchiveError, match="outside the target directory"):
        unpack_memmap(tmp_path / "evil.tdz", tmp_path / "out")
    assert not (tmp_path / "escape.memmap").exists()


def test_pack_refuses_a_non_directory_and_a_target_inside(tmp_path: Path) -> None:
    with pytest.raises(MemmapArchiveError, match=r"has no meta\.json"):
        pack_memmap(tmp_path, tmp_path.parent / "never.tdz")
    sample().memmap(tmp_path / "d")
    with pytest.raises(MemmapArchiveError, match="inside the directory it packs"):
        pack_memmap(tmp_path / "d", tmp_path / "d" / "x.tdz")
    assert not (tmp_path / "d" / "x.tdz").exists()


def test_failed_pack_keeps_the_previous_archive(tmp_path: Path, monkeypatch) -> None:
    sample().save(tmp_path / "x.tdz")
    before = (tmp_path / "x.tdz").read_bytes()

    def boom(*args, **kwargs):
        raise OSError("disk fell off")

    monkeypatch.setattr(tdz, "_add", boom)
    with pytest.raises(OSError, match="disk fell off"):
        TensorDict(a=torch.ones(5)).save(tmp_path / "x.tdz")
    assert (tmp_path / "x.tdz").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.tdz"]


def test_empty_leaves_get_no_file_as_upstream(tmp_path: Path) -> None:
    td = TensorDict(e=torch.empty(0, dtype=torch.int64), f=torch.ones(2))
    out = td.memmap_(tmp_path / "d")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["f.memmap", "meta.json"]
    assert out["e"].shape == (0,) and out["e"].dtype is torch.int64
    assert out.memmap_(tmp_path / "d") is out  # already written: nothing to do
    loaded = TensorDict.load_memmap(tmp_path / "d")
    assert loaded["e"].shape == (0,) and loaded["e"].dtype is torch.int64


def test_empty_leaves_in_an_archive(tmp_path: Path) -> None:
    td = TensorDict(e=torch.empty(0, dtype=torch.int64), n={"m": torch.empty(0, 3)})
    td.memmap(tmp_path / "data.tdz")
    loaded = TensorDict.load_memmap(tmp_path / "data.tdz")
    assert loaded["e"].shape == (0,) and loaded["e"].dtype is torch.int64
    assert loaded["n", "m"].shape == (0, 3)


def test_private_module_exports_the_archive_functions() -> None:
    assert archive_module.pack_memmap is pack_memmap
    assert archive_module.TENSORDICT_ARCHIVE_SUFFIX == ".tdz"


def test_leaves_are_views_into_one_copy_on_write_mapping(tmp_path: Path) -> None:
    sample().save(tmp_path / "x.tdz")
    before = (tmp_path / "x.tdz").read_bytes()
    loaded = TensorDict.load_memmap(tmp_path / "x.tdz")
    tensors = [v for v in loaded.values(True, True) if isinstance(v, torch.Tensor)]
    assert len({v.untyped_storage().data_ptr() for v in tensors}) == 1
    loaded["a"] += 1
    assert (loaded["a"] == sample()["a"] + 1).all()
    assert (tmp_path / "x.tdz").read_bytes() == before


def test_mode_r_plus_writes_through_and_refresh_fixes_checksums(tmp_path: Path) -> None:
    sample().save(tmp_path / "x.tdz")
    loaded = TensorDict.load_memmap(tmp_path / "x.tdz", mode="r+")
    loaded["b", "d"].add_(5)
    again = TensorDict.load_memmap(tmp_path / "x.tdz")
    assert again["b", "d"].tolist() == [5, 6, 7]
    with pytest.raises(zipfile.BadZipFile), zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        zf.read("b/d.memmap")
    refresh_archive_checksums(tmp_path / "x.tdz")
    with zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        assert zf.testzip() is None


def test_mode_r_plus_refuses_what_cannot_be_written_in_place(tmp_path: Path) -> None:
    sample().save(tmp_path / "c.tdz", compression="deflate")
    with pytest.raises(RuntimeError, match="is compressed"):
        TensorDict.load_memmap(tmp_path / "c.tdz", mode="r+")
    sample().memmap(tmp_path / "plain")
    with zipfile.ZipFile(tmp_path / "foreign.zip", "w") as zf:
        for path in sorted((tmp_path / "plain").rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(tmp_path / "plain").as_posix())
    with pytest.raises(RuntimeError, match="is not aligned"):
        TensorDict.load_memmap(tmp_path / "foreign.zip", mode="r+")
    with pytest.raises(ValueError, match="mode must be"):
        TensorDict.load_memmap(tmp_path / "c.tdz", mode="w")


def test_memmap_like_archive_is_a_buffer_that_writes_through(tmp_path: Path) -> None:
    buf = sample().memmap_like(tmp_path / "buf.tdz")
    buf["a"].copy_(sample()["a"])
    assert (TensorDict.load_memmap(tmp_path / "buf.tdz")["a"] == sample()["a"]).all()
    with pytest.raises(MemmapExistsError, match="already exists"):
        sample().memmap_like(tmp_path / "buf.tdz", existsok=False)
    with pytest.raises(NotImplementedError, match="return_early"):
        sample().memmap_like(tmp_path / "other.tdz", return_early=True)
    assert not (tmp_path / "other.tdz").exists()


@pytest.mark.parametrize("archive", [False, True])
def test_subpath_loads_one_nested_tensordict(tmp_path: Path, archive: bool) -> None:
    prefix = tmp_path / ("s.tdz" if archive else "s")
    sample().save(prefix)
    for subpath in ("b", ("b",), [("b",)]):
        part = TensorDict.load_memmap(prefix, subpath=subpath)
        assert part["d"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="No tensordict found under subpath"):
        TensorDict.load_memmap(prefix, subpath="b/nope")


# ---------------------------------------------------------------- interchange with upstream
# one upstream process reads the archives written here and writes its own (interpreter start-up
# dominates, so the two directions share it)
_UPSTREAM = """
import json, sys, torch
from pathlib import Path
from tensordict import TensorDict, NonTensorData, is_memmap_archive
root = Path(sys.argv[1])
out = {}
for path in sorted(root.glob("here-*.tdz")):
    td = TensorDict.load_memmap(path)
    out[path.name] = {"archive": is_memmap_archive(path), "a": td["a"].tolist(),
                      "d": td["b", "d"].tolist(), "e": td["e"], "batch": list(td.batch_size)}
td = TensorDict({"a": torch.arange(12.).reshape(3, 4), "b": {"d": torch.arange(3)},
                 "e": NonTensorData("hi", batch_size=[3])}, batch_size=[3])
for compression in ("stored", "deflate"):
    td.save(root / f"up-{compression}.tdz", compression=compression)
print(json.dumps(out))
"""


def interop_sample() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(12.0).reshape(3, 4),
            "b": {"d": torch.arange(3)},
            "e": NonTensorData("hi", batch_size=[3]),
        },
        batch_size=[3],
    )


@pytest.fixture(scope="module")
def exchanged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A folder with archives written here and by upstream, and what upstream read of ours."""
    root = tmp_path_factory.mktemp("tdz-interop")
    interop_sample().save(root / "here-stored.tdz")
    interop_sample().save(root / "here-deflate.tdz", compression="deflate")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    proc = subprocess.run(
        [str(UPSTREAM), "-c", _UPSTREAM, str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return root, json.loads(proc.stdout)


@needs_upstream
@pytest.mark.parametrize("name", ["here-stored.tdz", "here-deflate.tdz"])
def test_archive_written_here_loads_in_upstream(exchanged, name) -> None:
    _, read_by_upstream = exchanged
    expected = interop_sample()
    assert read_by_upstream[name] == {
        "archive": True,
        "a": expected["a"].tolist(),
        "d": [0, 1, 2],
        "e": "hi",
        "batch": [3],
    }


@needs_upstream
@pytest.mark.parametrize("name", ["up-stored.tdz", "up-deflate.tdz"])
def test_archive_written_by_upstream_loads_here(exchanged, name, tmp_path: Path) -> None:
    root, _ = exchanged
    assert is_memmap_archive(root / name)
    td = TensorDict.load_memmap(root / name)
    assert td.batch_size == torch.Size([3])
    assert td["a"].tolist() == interop_sample()["a"].tolist()
    assert td["b", "d"].tolist() == [0, 1, 2] and td["e"] == "hi"
    out = unpack_memmap(root / name, tmp_path / "dir")
    assert (TensorDict.load_memmap(out) == td).all()
