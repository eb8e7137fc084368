"""The on-disk format: meta.json bytes, raw data files, key encoding, every dtype."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensordict import MemoryMappedTensor, TensorDict
from tensordict.errors import MemmapFormatError
from tensordict.memmap.format import encode_key

from .helpers import DTYPES, raw_bytes, sample

TD_TYPE = "<class 'tensordict._td.TensorDict'>"


def all_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# ====================================================================== the example of the issue
def issue_example() -> TensorDict:
    return TensorDict(
        {"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, dtype=torch.int64)}}, batch_size=[3]
    )


def test_root_meta_json_is_byte_exact(tmp_path: Path) -> None:
    issue_example().memmap(tmp_path / "p")
    assert (tmp_path / "p" / "meta.json").read_bytes() == (
        b'{"a":{"device":"cpu","shape":[3,4],"dtype":"torch.float32","is_nested":false},'
        b'"b":{"type":"TensorDict"},"shape":[3],"device":"cpu",'
        b'"_type":"<class \'tensordict._td.TensorDict\'>","_format_version":1,'
        b'"_class":"tensordict:TensorDict"}'
    )


def test_nested_meta_json_is_byte_exact(tmp_path: Path) -> None:
    issue_example().memmap(tmp_path / "p")
    assert (tmp_path / "p" / "b" / "meta.json").read_bytes() == (
        b'{"c":{"device":"cpu","shape":[3],"dtype":"torch.int64","is_nested":false},'
        b'"shape":[3],"device":"cpu","_type":"<class \'tensordict._td.TensorDict\'>",'
        b'"_format_version":1,"_class":"tensordict:TensorDict"}'
    )


def test_directory_holds_exactly_the_expected_files(tmp_path: Path) -> None:
    issue_example().memmap(tmp_path / "p")
    assert all_files(tmp_path / "p") == {"meta.json", "a.memmap", "b/meta.json", "b/c.memmap"}


def test_data_files_are_raw_bytes_without_header(tmp_path: Path) -> None:
    issue_example().memmap(tmp_path / "p")
    assert (tmp_path / "p" / "a.memmap").read_bytes() == b"\0" * 48
    assert (tmp_path / "p" / "b" / "c.memmap").read_bytes() == np.ones(3, "<i8").tobytes()


def test_entries_follow_key_insertion_order(tmp_path: Path) -> None:
    td = TensorDict({"z": torch.zeros(2), "a": torch.zeros(2), "m": {"q": torch.zeros(2)}}, [2])
    td.memmap(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_bytes())
    assert list(meta) == ["z", "a", "m", "shape", "device", "_type", "_format_version", "_class"]


def test_meta_json_is_utf8_without_escapes(tmp_path: Path) -> None:
    TensorDict({"clé": torch.zeros(1)}, [1]).memmap(tmp_path)
    raw = (tmp_path / "meta.json").read_bytes()
    assert "clé".encode() in raw and b"\\u" not in raw


def test_meta_json_has_no_trailing_newline(tmp_path: Path) -> None:
    issue_example().memmap(tmp_path)
    assert (tmp_path / "meta.json").read_bytes().endswith(b"}")


def test_batch_size_is_the_shape_entry(tmp_path: Path) -> None:
    TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3]).memmap(tmp_path)
    assert json.loads((tmp_path / "meta.json").read_bytes())["shape"] == [2, 3]


def test_no_temporary_files_are_left_behind(tmp_path: Path) -> None:
    issue_example().memmap(tmp_path, num_threads=2)
    assert not [f for f in all_files(tmp_path) if "tmp" in f]


# ====================================================================== dtypes
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_is_written_as_raw_bytes_with_its_name(tmp_path: Path, dtype: torch.dtype):
    src = sample(dtype)
    TensorDict({"x": src}, [3]).memmap(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_bytes())
    assert meta["x"] == {"device": "cpu", "shape": [3, 4], "dtype": str(dtype), "is_nested": False}
    assert (tmp_path / "x.memmap").read_bytes() == raw_bytes(src)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_round_trips(tmp_path: Path, dtype: torch.dtype) -> None:
    src = sample(dtype)
    TensorDict({"x": src}, [3]).memmap(tmp_path)
    out = TensorDict.load_memmap(tmp_path)["x"]
    assert isinstance(out, MemoryMappedTensor) and out.dtype == dtype
    assert torch.equal(out.as_subclass(torch.Tensor), src)


def test_zero_dim_and_empty_leaves_round_trip(tmp_path: Path) -> None:
    td = TensorDict({"scalar": torch.tensor(3.5), "empty": torch.zeros(0, 4)}, [])
    td.memmap(tmp_path)
    out = TensorDict.load_memmap(tmp_path)
    assert out["scalar"].item() == 3.5 and out["scalar"].shape == ()
    assert out["empty"].shape == (0, 4)


def test_unsupported_leaf_raises_before_writing_anything(tmp_path: Path) -> None:
    td = TensorDict({"ok": torch.zeros(2), "bad": torch.zeros(2).to_sparse()}, [2])
    with pytest.raises(MemmapFormatError, match="bad"):
        td.memmap(tmp_path / "p")
    assert not (tmp_path / "p").exists() or not all_files(tmp_path / "p")


# ====================================================================== key encoding
ENCODED = {
    "a/b": "a%2Fb",
    "a<b>c": "a%3Cb%3Ec",
    "c:d": "c%3Ad",
    'q"uote': "q%22uote",
    "p|i?pe*": "p%7Ci%3Fpe%2A",
    "back\\slash": "back%5Cslash",
    "nul\0": "nul%00",
    "per%cent": "per%25cent",
    "tab\tnl\n": "tab%09nl%0A",
    "del\x7f": "del%7F",
    ".": "%2E",
    "..": "%2E%2E",
    "": "%",
    "sp ace": "sp ace",
    "dot.ted": "dot.ted",
    "...": "...",
    "ünï©ødé": "ünï©ødé",
    "%2F": "%252F",
}


@pytest.mark.parametrize("key", list(ENCODED), ids=repr)
def test_encode_key(key: str) -> None:
    assert encode_key(key) == ENCODED[key]


def test_encode_key_is_injective_on_the_examples() -> None:
    assert len(set(ENCODED.values())) == len(ENCODED)


@pytest.mark.parametrize("key", list(ENCODED), ids=repr)
def test_awkward_leaf_key_is_stored_under_its_encoded_name(tmp_path: Path, key: str) -> None:
    TensorDict({key: torch.arange(2)}, [2]).memmap(tmp_path)
    assert all_files(tmp_path) == {"meta.json", ENCODED[key] + ".memmap"}


@pytest.mark.parametrize("key", list(ENCODED), ids=repr)
def test_awkward_nested_keys_round_trip(tmp_path: Path, key: str) -> None:
    td = TensorDict({key: {key: torch.arange(2), "x": torch.ones(2)}}, [2])
    td.memmap(tmp_path / "p")
    assert (tmp_path / "p" / ENCODED[key] / "meta.json").is_file()
    out = TensorDict.load_memmap(tmp_path / "p")
    assert set(out.keys(True, True)) == {(key, key), (key, "x")}
    assert out[key, key].tolist() == [0, 1]


def test_awkward_keys_never_write_outside_the_prefix(tmp_path: Path) -> None:
    keys = ["..", "../x", "/abs", "a/../../b", "."]
    td = TensorDict({k: {k: torch.zeros(1)} for k in keys}, [1])
    td.memmap(tmp_path / "inner" / "p")
    assert set(os.listdir(tmp_path)) == {"inner"}
    assert os.listdir(tmp_path / "inner") == ["p"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(keys=st.lists(st.text(max_size=12), min_size=1, max_size=4, unique=True))
def test_any_text_keys_round_trip(tmp_path_factory: pytest.TempPathFactory, keys: list[str]):
    # names the format reserves are refused by design (tests below)
    reserved = ("shape", "device", "_type", "_format_version", "_class", "meta.json")
    keys = [k for k in keys if k not in reserved]
    td = TensorDict({k: {"v": torch.tensor([i])} for i, k in enumerate(keys)}, [1])
    td["leaves"] = TensorDict({k: torch.tensor([i]) for i, k in enumerate(keys)}, [1])
    prefix = tmp_path_factory.mktemp("k")
    td.memmap(prefix)
    out = TensorDict.load_memmap(prefix)
    assert set(out.keys(True, True)) == set(td.keys(True, True))
    for i, k in enumerate(keys):
        assert out[k, "v"].item() == i and out["leaves", k].item() == i


@pytest.mark.parametrize("key", ["shape", "device", "_type", "_format_version", "_class"])
def test_key_clashing_with_the_metadata_is_refused(tmp_path: Path, key: str) -> None:
    td = TensorDict({"ok": torch.zeros(2), key: torch.zeros(2)}, [2])
    with pytest.raises(MemmapFormatError, match=key):
        td.memmap(tmp_path / "p")
    assert not (tmp_path / "p" / "meta.json").exists()


def test_nested_key_named_meta_json_is_refused(tmp_path: Path) -> None:
    td = TensorDict({"meta.json": {"a": torch.zeros(2)}}, [2])
    with pytest.raises(MemmapFormatError, match=r"meta\.json"):
        td.memmap(tmp_path / "p")


def test_leaf_named_meta_json_is_fine(tmp_path: Path) -> None:
    TensorDict({"meta.json": torch.arange(2)}, [2]).memmap(tmp_path)
    assert TensorDict.load_memmap(tmp_path)["meta.json"].tolist() == [0, 1]


def test_leaf_and_nested_entry_with_the_same_file_name_are_refused(tmp_path: Path) -> None:
    td = TensorDict({"x": torch.zeros(2), "x.memmap": {"y": torch.zeros(2)}}, [2])
    with pytest.raises(MemmapFormatError, match=r"x\.memmap"):
        td.memmap(tmp_path / "p")


@pytest.mark.parametrize(
    ("key", "as_leaf", "as_folder"),
    [
        ("obs", True, True),
        ("a b%c", True, True),
        ("a..b", True, True),
        ("../x", False, False),
        ("a/b", False, False),
        ("a\\b", False, False),
        ("/abs", False, False),
        ("C:x", False, False),
        ("", True, False),
        (".", True, False),
        ("..", True, False),
    ],
)
def test_safe_legacy_name_keeps_raw_names_inside_the_prefix(
    key: str, as_leaf: bool, as_folder: bool
) -> None:
    from tensordict.memmap.format import safe_legacy_name

    assert safe_legacy_name(key) is as_leaf
    assert safe_legacy_name(key, is_collection=True) is as_folder


@pytest.mark.parametrize(("given", "expected"), [(None, True), (True, True), (False, False)])
def test_robust_key_setting_defaults_to_encoding(given, expected) -> None:
    from tensordict.memmap.format import robust_key_setting, robust_key_setting_for

    assert robust_key_setting(given) is expected
    assert robust_key_setting_for("a/b", given) is expected
