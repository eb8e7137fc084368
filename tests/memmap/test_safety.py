"""Reliability and security: interrupted writes, pickle refusal, keys escaping the prefix,
malformed directories, read-only directories."""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tensordict import MemoryMappedTensor, NonTensorData, TensorDict
from tensordict.errors import (
    IncompleteMemmapError,
    MemmapFormatError,
    MemmapSymlinkError,
    PickleNotAllowedError,
    RawKeyPathError,
    UnsafeKeyError,
)
from tensordict.memmap import io, mapping

from . import helpers, writers
from .helpers import td_meta, write_array, write_json


def make() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(12.0).reshape(3, 4),
            "b": {"c": torch.arange(3), "d": torch.ones(3, 2)},
            "e": torch.zeros(3, dtype=torch.int16),
        },
        [3],
    )


# ====================================================================== interrupted writes
# (overwrites of an existing save, killed at every step: test_overwrite.py)
def crash_memmap(prefix: Path, where: str, after: int) -> None:
    """Save to ``prefix`` in a forked child that dies (``os._exit``) at the ``after``-th
    data or metadata write."""
    code, _ = writers.run_forked(writers.crash_overwrite, str(prefix), where, after)
    assert code == 17


@pytest.mark.parametrize(("where", "after"), [("data", 0), ("data", 1), ("data", 3), ("meta", 1)])
def test_crash_while_writing_a_new_save_never_loads(tmp_path: Path, where: str, after: int):
    crash_memmap(tmp_path / "p", where, after)
    with pytest.raises(IncompleteMemmapError, match="does not exist"):
        TensorDict.load_memmap(tmp_path / "p")
    assert not (tmp_path / "p").exists()  # the new version was still beside it, never switched


def test_error_during_write_leaves_the_tensordict_unchanged(tmp_path: Path, monkeypatch):
    calls = [0]
    real = io.write_file

    def disk_full(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(28, "No space left on device")
        real(*args, **kwargs)

    monkeypatch.setattr(io, "write_file", disk_full)
    td = make()
    with pytest.raises(OSError, match="No space"):
        td.memmap_(tmp_path / "p")
    assert not td.is_locked and not td.is_memmap() and type(td["a"]) is torch.Tensor
    with pytest.raises(IncompleteMemmapError):
        TensorDict.load_memmap(tmp_path / "p")
    assert os.listdir(tmp_path) == []


def test_missing_nested_meta_json_is_named(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    os.unlink(tmp_path / "b" / "meta.json")
    with pytest.raises(IncompleteMemmapError, match=re.escape(str(tmp_path / "b" / "meta.json"))):
        TensorDict.load_memmap(tmp_path)


def test_missing_data_file_is_named(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    os.unlink(tmp_path / "b" / "d.memmap")
    with pytest.raises(IncompleteMemmapError, match=r"d\.memmap"):
        TensorDict.load_memmap(tmp_path)


def test_missing_nested_directory_is_named(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    for name in os.listdir(tmp_path / "b"):
        os.unlink(tmp_path / "b" / name)
    os.rmdir(tmp_path / "b")
    with pytest.raises(IncompleteMemmapError, match="'b'"):
        TensorDict.load_memmap(tmp_path)


@pytest.mark.parametrize("size", [0, 10, 47], ids=lambda n: f"{n}B")
def test_data_file_too_short_is_named(tmp_path: Path, size: int) -> None:
    make().memmap(tmp_path)
    os.truncate(tmp_path / "a.memmap", size)
    with pytest.raises(MemmapFormatError, match=rf"a\.memmap holds {size} bytes.*48"):
        TensorDict.load_memmap(tmp_path)


def test_unpickling_a_view_of_a_deleted_file_names_it(tmp_path: Path) -> None:
    td = make().memmap(tmp_path)
    payload = pickle.dumps(td["e"][1:])
    mapping._cache.clear()
    os.unlink(tmp_path / "e.memmap")
    with pytest.raises(IncompleteMemmapError, match=r"e\.memmap"):
        pickle.loads(payload)


# ====================================================================== pickle refusal
class _Marker:
    """Unpickling this creates a file: proof that something was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_load_memmap_never_unpickles_code_by_default(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    write_json(str(tmp_path / "p"), td_meta({"s": {"type": "NonTensorData"}}, [1]), True)
    write_json(str(tmp_path / "p" / "s"), {"_type": helpers.TYPE_NON_TENSOR}, True)
    with open(tmp_path / "p" / "s" / "other.pickle", "wb") as f:
        pickle.dump({"data": _Marker(str(marker))}, f)
    with pytest.raises(PickleNotAllowedError, match="allow_pickle=True"):
        TensorDict.load_memmap(tmp_path / "p")
    assert not marker.exists()


def test_allow_pickle_false_refuses_even_plain_data(tmp_path: Path) -> None:
    TensorDict({"o": NonTensorData(b"\x00bytes", batch_size=[2])}, [2]).memmap(tmp_path)
    with pytest.raises(PickleNotAllowedError):
        TensorDict.load_memmap(tmp_path, allow_pickle=False)
    assert TensorDict.load_memmap(tmp_path)["o"] == b"\x00bytes"
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True)["o"] == b"\x00bytes"


def test_non_tensor_stack_pointing_at_another_file_is_refused(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [2]), True)
    meta = {"_type": helpers.TYPE_NON_TENSOR_STACK, "stack_dim": 0, "data": "../x.pkl"}
    write_json(str(tmp_path / "s"), meta, True)
    with pytest.raises(MemmapFormatError, match=r"x\.pkl"):
        TensorDict.load_memmap(tmp_path, allow_pickle=True)


# ====================================================================== keys escaping the prefix
def leaf_entry(n: int = 2) -> dict[str, Any]:
    return {"device": "cpu", "shape": [n], "dtype": "torch.float32", "is_nested": False}


@pytest.mark.parametrize("key", ["../outside", "..", "../../etc/passwd", "/etc/passwd", "a/../.."])
def test_leaf_keys_escaping_the_prefix_are_refused(tmp_path: Path, key: str) -> None:
    write_array(str(tmp_path / "outside.memmap"), np.zeros(2, np.float32))
    write_array(str(tmp_path / "..memmap"), np.zeros(2, np.float32))
    write_json(str(tmp_path / "p"), td_meta({key: leaf_entry()}, [2]))
    with pytest.raises(UnsafeKeyError, match="outside"):
        TensorDict.load_memmap(tmp_path / "p")


@pytest.mark.parametrize("key", ["..", "../q", "/tmp"])
def test_nested_keys_escaping_the_prefix_are_refused(tmp_path: Path, key: str) -> None:
    write_json(str(tmp_path / "q"), td_meta({}, [2]))
    write_json(str(tmp_path / "p"), td_meta({key: {"type": "TensorDict"}}, [2]))
    with pytest.raises(UnsafeKeyError):
        TensorDict.load_memmap(tmp_path / "p")


def test_nested_key_dot_never_resolves_to_the_prefix_itself(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({".": {"type": "TensorDict"}}, [2]))
    with pytest.raises(IncompleteMemmapError, match="%2E"):
        TensorDict.load_memmap(tmp_path)


def test_symlinked_data_file_pointing_outside_is_refused(tmp_path: Path) -> None:
    write_array(str(tmp_path / "secret.memmap"), np.arange(2, dtype=np.float32))
    write_json(str(tmp_path / "p"), td_meta({"a": leaf_entry()}, [2]))
    os.symlink(tmp_path / "secret.memmap", tmp_path / "p" / "a.memmap")
    with pytest.raises(UnsafeKeyError, match=r"secret\.memmap"):
        TensorDict.load_memmap(tmp_path / "p")


def test_symlinked_directory_pointing_outside_is_refused(tmp_path: Path) -> None:
    make().memmap(tmp_path / "elsewhere")
    write_json(str(tmp_path / "p"), td_meta({"b": {"type": "TensorDict"}}, [3]))
    os.symlink(tmp_path / "elsewhere" / "b", tmp_path / "p" / "b")
    with pytest.raises(UnsafeKeyError, match="elsewhere"):
        TensorDict.load_memmap(tmp_path / "p")


def test_symlinked_lazy_stack_member_pointing_outside_is_refused(tmp_path: Path) -> None:
    make().memmap(tmp_path / "elsewhere")
    write_json(str(tmp_path / "p"), {"_type": helpers.TYPE_LAZY, "stack_dim": 0})
    os.symlink(tmp_path / "elsewhere", tmp_path / "p" / "0")
    with pytest.raises(UnsafeKeyError, match="elsewhere"):
        TensorDict.load_memmap(tmp_path / "p")


def test_symlinks_inside_the_prefix_are_followed(tmp_path: Path) -> None:
    write_array(str(tmp_path / "p" / "real.memmap"), np.arange(2, dtype=np.float32))
    write_json(str(tmp_path / "p"), td_meta({"a": leaf_entry()}, [2]))
    os.symlink(tmp_path / "p" / "real.memmap", tmp_path / "p" / "a.memmap")
    assert TensorDict.load_memmap(tmp_path / "p")["a"].tolist() == [0.0, 1.0]


def test_prefix_reached_through_a_symlink_loads(tmp_path: Path) -> None:
    make().memmap(tmp_path / "real")
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert TensorDict.load_memmap(tmp_path / "link")["b", "c"].tolist() == [0, 1, 2]


def test_writing_over_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    # as upstream: a RuntimeError, and nothing written through the link
    (tmp_path / "outside").mkdir()
    (tmp_path / "p").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "p" / "b")
    with pytest.raises(MemmapSymlinkError, match="TensorDict through symlink"):
        make().memmap(tmp_path / "p")
    assert list((tmp_path / "outside").iterdir()) == []
    assert (tmp_path / "p" / "b").is_symlink()  # left as it was
    assert not (tmp_path / "p" / "meta.json").exists()


def test_writing_in_place_through_a_symlinked_directory_is_refused(tmp_path, monkeypatch):
    from tensordict.memmap import transaction as tx

    (tmp_path / "outside").mkdir()
    make().memmap(tmp_path / "p")
    shutil.rmtree(tmp_path / "p" / "b")
    os.symlink(tmp_path / "outside", tmp_path / "p" / "b")
    real_init = tx.Staging.__init__

    def no_staging(self, root: str, real: str) -> None:  # as on a mount point
        real_init(self, root, real)
        if not self.in_place:
            os.rmdir(self.target)
            self.target, self.in_place = real, True

    monkeypatch.setattr(tx.Staging, "__init__", no_staging)
    with pytest.raises(MemmapSymlinkError, match="outside"):
        make().memmap(tmp_path / "p")
    assert list((tmp_path / "outside").iterdir()) == []


def test_robust_load_skips_a_path_like_key_whose_encoded_file_is_gone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # as upstream: the raw name ("../outside") is never read, the key is left out
    td = TensorDict({"../outside": torch.arange(3.0), "a": torch.zeros(3)}, [])
    td.memmap(tmp_path / "p", robust_key=True)
    (tmp_path / "p" / "..%2Foutside.memmap").replace(tmp_path / "outside.memmap")
    with caplog.at_level(logging.WARNING, logger="tensordict"):
        loaded = TensorDict.load_memmap(tmp_path / "p", robust_key=True)
    assert "never read" in caplog.text
    assert list(loaded.keys()) == ["a"]
    with pytest.raises(UnsafeKeyError):  # without robust_key: refused, as before
        TensorDict.load_memmap(tmp_path / "p")


def test_robust_key_false_refuses_a_key_that_is_a_path(tmp_path: Path) -> None:
    td = TensorDict({"a/b/c": torch.zeros(3), "n": {"..": torch.zeros(1)}})
    with pytest.raises(RawKeyPathError, match="No such file or directory"):
        td.memmap(tmp_path / "p", robust_key=False)
    with pytest.raises(RuntimeError):
        TensorDict({"n": {"..": torch.zeros(1)}}).memmap_(tmp_path / "q", robust_key=False)
    assert not (tmp_path / "p").exists() and not (tmp_path / "q").exists()
    TensorDict({"x y": torch.zeros(1)}).memmap(tmp_path / "r", robust_key=False)  # a file name


def test_subpath_as_a_tuple_takes_each_part_as_one_key(tmp_path: Path) -> None:
    td = TensorDict({"../up": {"x": torch.arange(3)}, "a": {"b": {"y": torch.ones(2)}}}, [])
    td.memmap(tmp_path / "p", robust_key=True)
    assert TensorDict.load_memmap(tmp_path / "p", subpath=("../up",))["x"].tolist() == [0, 1, 2]
    assert TensorDict.load_memmap(tmp_path / "p", subpath="a/b")["y"].tolist() == [1.0, 1.0]
    assert TensorDict.load_memmap(tmp_path / "p", subpath=("a", "b"))["y"].shape == (2,)


def test_writing_over_a_symlinked_file_never_writes_its_target(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"keep")
    (tmp_path / "p").mkdir()
    os.symlink(tmp_path / "target", tmp_path / "p" / "e.memmap")
    make().memmap(tmp_path / "p")
    assert (tmp_path / "target").read_bytes() == b"keep"
    assert TensorDict.load_memmap(tmp_path / "p")["e"].tolist() == [0, 0, 0]


# ====================================================================== malformed metadata
def write_meta_bytes(root: Path, raw: bytes) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta.json").write_bytes(raw)


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"", b'{"a": 1', "{}".encode("utf-16"), b"[1, 2]", b'"text"'],
    ids=["garbage", "empty", "truncated", "utf16", "list", "string"],
)
def test_malformed_meta_json_is_named(tmp_path: Path, raw: bytes) -> None:
    write_meta_bytes(tmp_path / "p", raw)
    with pytest.raises(MemmapFormatError, match=re.escape(str(tmp_path / "p" / "meta.json"))):
        TensorDict.load_memmap(tmp_path / "p")


def test_malformed_nested_meta_json_is_named(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    (tmp_path / "b" / "meta.json").write_bytes(b"{oops")
    with pytest.raises(MemmapFormatError, match=re.escape(str(tmp_path / "b" / "meta.json"))):
        TensorDict.load_memmap(tmp_path)


@pytest.mark.parametrize("dtype", ["torch.float128", "float32", "torch.Tensor", 5, None])
def test_unknown_dtype_is_named_with_its_file(tmp_path: Path, dtype: Any) -> None:
    write_array(str(tmp_path / "a.memmap"), np.zeros(2, np.float32))
    write_json(str(tmp_path), td_meta({"a": {**leaf_entry(), "dtype": dtype}}, [2]))
    where = re.escape(str(tmp_path / "meta.json"))
    with pytest.raises(MemmapFormatError, match=f"unknown dtype.*{where}"):
        TensorDict.load_memmap(tmp_path)


@pytest.mark.parametrize("shape", [[-2], ["2"], [2.0], 2, [True], None])
def test_bad_leaf_shape_is_named_with_its_file(tmp_path: Path, shape: Any) -> None:
    write_array(str(tmp_path / "a.memmap"), np.zeros(2, np.float32))
    write_json(str(tmp_path), td_meta({"a": {**leaf_entry(), "shape": shape}}, []))
    with pytest.raises(MemmapFormatError, match=re.escape(str(tmp_path / "meta.json"))):
        TensorDict.load_memmap(tmp_path)


@pytest.mark.parametrize("shape", [[-1], "ab", 3, [None]])
def test_bad_batch_size_is_named_with_its_file(tmp_path: Path, shape: Any) -> None:
    write_json(str(tmp_path), td_meta({}, shape))
    with pytest.raises(MemmapFormatError, match=re.escape(str(tmp_path / "meta.json"))):
        TensorDict.load_memmap(tmp_path)


def test_leaf_not_matching_the_batch_size_is_named(tmp_path: Path) -> None:
    write_array(str(tmp_path / "a.memmap"), np.zeros(2, np.float32))
    write_json(str(tmp_path), td_meta({"a": leaf_entry()}, [3]))
    with pytest.raises(MemmapFormatError, match=r"'a'.*batch size"):
        TensorDict.load_memmap(tmp_path)


def test_bad_device_is_named_with_its_file(tmp_path: Path) -> None:
    write_json(str(tmp_path), {**td_meta({}, [2]), "device": "warp-drive"})
    with pytest.raises(MemmapFormatError, match=r"meta\.json.*warp-drive"):
        TensorDict.load_memmap(tmp_path)


@pytest.mark.parametrize("stack_dim", ["x", 1.5, None, 5])
def test_bad_stack_dim_is_named_with_its_file(tmp_path: Path, stack_dim: Any) -> None:
    write_json(str(tmp_path), {"_type": helpers.TYPE_LAZY, "stack_dim": stack_dim})
    write_json(str(tmp_path / "0"), td_meta({}, [2]))
    with pytest.raises(MemmapFormatError, match=re.escape(str(tmp_path / "meta.json"))):
        TensorDict.load_memmap(tmp_path)


def test_lazy_stack_without_members_is_incomplete(tmp_path: Path) -> None:
    write_json(str(tmp_path), {"_type": helpers.TYPE_LAZY, "stack_dim": 0})
    with pytest.raises(IncompleteMemmapError, match="0/"):
        TensorDict.load_memmap(tmp_path)


def test_non_tensor_stack_of_the_wrong_length_is_named(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [3]), True)
    meta = {"_type": helpers.TYPE_NON_TENSOR_STACK, "stack_dim": 0, "data": ["a", "b"]}
    write_json(str(tmp_path / "s"), meta, True)
    with pytest.raises(MemmapFormatError, match=re.escape(str(tmp_path / "s" / "meta.json"))):
        TensorDict.load_memmap(tmp_path)


def test_nested_tensor_entry_is_refused_clearly(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"j": {**leaf_entry(), "is_nested": True}}, []))
    with pytest.raises(MemmapFormatError, match="nested"):
        TensorDict.load_memmap(tmp_path)


def test_errors_are_value_errors_and_missing_files_file_not_found() -> None:
    assert issubclass(MemmapFormatError, ValueError)
    assert issubclass(IncompleteMemmapError, FileNotFoundError)
    assert issubclass(UnsafeKeyError, MemmapFormatError)


# ====================================================================== read-only directories
def make_read_only(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)


@pytest.fixture
def read_only_save(tmp_path: Path):
    td = TensorDict({"a": torch.arange(4.0), "b": {"c": torch.ones(4)}}, [4])
    td.memmap(tmp_path / "ro")
    make_read_only(tmp_path / "ro")
    yield tmp_path / "ro"
    for dirpath, _dirs, _files in os.walk(tmp_path / "ro"):
        os.chmod(dirpath, 0o755)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="capabilities are Linux-only")
def test_read_only_directory_loads_read_only(read_only_save: Path) -> None:
    # As root, file modes are not enforced: the worker drops CAP_DAC_OVERRIDE first, so the
    # files really are read-only to it (as they are to any other user, who needs no drop).
    # spawn: a fresh process, with none of the mappings this one made while writing the files
    report = helpers.run_in_process("spawn", helpers.load_read_only, str(read_only_save))
    if "skip" in report:
        pytest.skip(report["skip"])
    assert report["type"] == "MemoryMappedTensor"
    assert report["a"].tolist() == [0.0, 1.0, 2.0, 3.0] and report["c"].tolist() == [1.0] * 4
    assert report["a_after_write"] == 1000.0  # a private copy-on-write mapping
    assert np.fromfile(read_only_save / "a.memmap", np.float32).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_shared_mapping_refused_falls_back_to_a_private_one(tmp_path: Path, monkeypatch):
    make().memmap(tmp_path)
    mapping._cache.clear()
    real = torch.from_file
    modes: list[bool] = []

    def refuse_shared(filename: str, shared: bool, size: int, dtype: torch.dtype) -> Any:
        modes.append(shared)
        if shared:
            raise RuntimeError(f"unable to open {filename} read-write: Read-only file system")
        return real(filename, shared=shared, size=size, dtype=dtype)

    monkeypatch.setattr(torch, "from_file", refuse_shared)
    td = TensorDict.load_memmap(tmp_path)
    assert isinstance(td["a"], MemoryMappedTensor) and td["a"].sum().item() == 66.0
    assert modes.count(False) == 4
    mapping._cache.clear()


def test_meta_json_written_is_valid_json_everywhere(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    for path in tmp_path.rglob("meta.json"):
        assert isinstance(json.loads(path.read_bytes()), dict)
