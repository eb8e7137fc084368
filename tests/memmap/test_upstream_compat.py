"""Directories written by upstream tensordict (written here by hand, byte for byte) load unchanged.

Upstream 0.15 writes no ``_format_version``/``_class``; with orjson its JSON is compact with raw
UTF-8, with the stdlib it has default separators and ``\\uXXXX`` escapes; older versions wrote raw
(unencoded) file names and escaped spaces.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorData,
    NonTensorStack,
    TensorDict,
)
from tensordict.errors import MemmapFormatError, PickleNotAllowedError

from .helpers import (
    TYPE_LAZY,
    TYPE_NON_TENSOR,
    TYPE_NON_TENSOR_STACK,
    leaf_meta,
    td_meta,
    write_array,
    write_json,
)


def write_issue_example(root: Path, compact: bool) -> None:
    a = np.zeros((3, 4), np.float32)
    c = np.ones(3, np.int64)
    write_array(str(root / "a.memmap"), a)
    write_array(str(root / "b" / "c.memmap"), c)
    entries = {"a": leaf_meta(a, "torch.float32"), "b": {"type": "TensorDict"}}
    write_json(str(root), td_meta(entries, [3]), compact)
    write_json(str(root / "b"), td_meta({"c": leaf_meta(c, "torch.int64")}, [3]), compact)


@pytest.mark.parametrize("compact", [True, False], ids=["orjson", "stdlib-json"])
def test_upstream_tensordict_without_version_fields_loads(tmp_path: Path, compact: bool) -> None:
    write_issue_example(tmp_path, compact)
    td = TensorDict.load_memmap(tmp_path)
    assert td.batch_size == (3,) and td["b"].batch_size == (3,)
    assert isinstance(td["a"], MemoryMappedTensor) and td["a"].dtype == torch.float32
    assert td["a"].shape == (3, 4) and not td["a"].any()
    assert td["b", "c"].dtype == torch.int64 and td["b", "c"].tolist() == [1, 1, 1]


def test_stdlib_json_unicode_escapes_load(tmp_path: Path) -> None:
    x = np.arange(2, dtype=np.float64)
    write_array(str(tmp_path / "été.memmap"), x)
    write_json(str(tmp_path), td_meta({"été": leaf_meta(x, "torch.float64")}, [2]))
    assert b"\\u00e9" in (tmp_path / "meta.json").read_bytes()
    assert TensorDict.load_memmap(tmp_path)["été"].tolist() == [0.0, 1.0]


def test_legacy_raw_file_names_load(tmp_path: Path) -> None:
    x = np.arange(3, dtype=np.int32)
    write_array(str(tmp_path / "a:b|c.memmap"), x)
    write_array(str(tmp_path / "n?m" / "y.memmap"), x * 2)
    write_json(
        str(tmp_path),
        td_meta({"a:b|c": leaf_meta(x, "torch.int32"), "n?m": {"type": "TensorDict"}}, [3]),
    )
    write_json(str(tmp_path / "n?m"), td_meta({"y": leaf_meta(x, "torch.int32")}, [3]))
    td = TensorDict.load_memmap(tmp_path)
    assert td["a:b|c"].tolist() == [0, 1, 2] and td["n?m", "y"].tolist() == [0, 2, 4]


def test_space_escaped_file_names_load(tmp_path: Path) -> None:
    x = np.arange(2, dtype=np.int64)
    write_array(str(tmp_path / "a%20b.memmap"), x)
    write_array(str(tmp_path / "c%20d" / "e.memmap"), x)
    write_json(
        str(tmp_path),
        td_meta({"a b": leaf_meta(x, "torch.int64"), "c d": {"type": "TensorDict"}}, [2]),
    )
    write_json(str(tmp_path / "c%20d"), td_meta({"e": leaf_meta(x, "torch.int64")}, [2]))
    td = TensorDict.load_memmap(tmp_path)
    assert td["a b"].tolist() == [0, 1] and td["c d", "e"].tolist() == [0, 1]


def test_missing_device_and_shape_mean_none_and_no_batch(tmp_path: Path) -> None:
    x = np.arange(2, dtype=np.int64)
    write_array(str(tmp_path / "x.memmap"), x)
    write_json(str(tmp_path), {"x": leaf_meta(x, "torch.int64"), "_type": td_meta({}, [])["_type"]})
    td = TensorDict.load_memmap(tmp_path)
    assert td.batch_size == () and td["x"].tolist() == [0, 1]


def test_device_string_none_loads(tmp_path: Path) -> None:
    write_json(str(tmp_path), {**td_meta({}, [4]), "device": "None"})
    td = TensorDict.load_memmap(tmp_path)
    assert td.batch_size == (4,) and td.device is None


def test_unknown_scalar_entries_are_ignored(tmp_path: Path) -> None:
    write_json(str(tmp_path), {"note": "hello", "n": 3, **td_meta({}, [2])})
    assert list(TensorDict.load_memmap(tmp_path).keys()) == []


def test_zero_element_leaf_without_file_loads_empty(tmp_path: Path) -> None:
    meta = {"device": "cpu", "shape": [2, 0], "dtype": "torch.float32", "is_nested": False}
    write_json(str(tmp_path), td_meta({"e": meta}, [2]))
    assert TensorDict.load_memmap(tmp_path)["e"].shape == (2, 0)


# ====================================================================== non-tensor data
def write_non_tensor(root: Path, meta: dict, parent_shape: list[int]) -> None:
    write_json(str(root), td_meta({"s": {"type": "NonTensorData"}}, parent_shape), True)
    write_json(str(root / "s"), meta, True)


def test_upstream_non_tensor_data_loads(tmp_path: Path) -> None:
    meta = {"_type": TYPE_NON_TENSOR, "data": "hello", "_is_non_tensor": True, "_metadata": None}
    write_non_tensor(tmp_path, meta, [3])
    td = TensorDict.load_memmap(tmp_path)
    assert td["s"] == "hello"
    assert isinstance(td.get("s"), NonTensorData) and td.get("s").batch_size == (3,)


def test_old_non_tensor_data_with_tensordict_subfolder_loads(tmp_path: Path) -> None:
    meta = {"_type": TYPE_NON_TENSOR, "data": {"k": [1, 2]}, "_metadata": None}
    write_non_tensor(tmp_path, meta, [2])
    write_json(str(tmp_path / "s" / "_tensordict"), td_meta({}, []), True)
    assert TensorDict.load_memmap(tmp_path)["s"] == {"k": [1, 2]}


def test_pickled_non_tensor_data_loads_as_plain_data(tmp_path: Path) -> None:
    write_non_tensor(tmp_path, {"_type": TYPE_NON_TENSOR, "_is_non_tensor": True}, [2])
    with open(tmp_path / "s" / "other.pickle", "wb") as f:
        pickle.dump({"data": {1, 2}, "_metadata": None}, f)
    with pytest.raises(PickleNotAllowedError, match=r"other\.pickle"):
        TensorDict.load_memmap(tmp_path, allow_pickle=False)
    assert TensorDict.load_memmap(tmp_path)["s"] == {1, 2}
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True)["s"] == {1, 2}


def test_upstream_non_tensor_stack_loads(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [3]), True)
    meta = {"_type": TYPE_NON_TENSOR_STACK, "stack_dim": 0, "device": None, "data": ["a", "b", 3]}
    write_json(str(tmp_path / "s"), meta, True)
    td = TensorDict.load_memmap(tmp_path)
    assert isinstance(td.get("s"), NonTensorStack)
    assert td["s"] == ["a", "b", 3] and td[1]["s"] == "b"


def test_non_tensor_stack_of_lists_keeps_the_lists_as_elements(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [2]), True)
    meta = {"_type": TYPE_NON_TENSOR_STACK, "stack_dim": 0, "device": None, "data": [[1], [2]]}
    write_json(str(tmp_path / "s"), meta, True)
    td = TensorDict.load_memmap(tmp_path)
    assert td.get("s").batch_size == (2,) and td[0]["s"] == [1]


def test_old_non_tensor_stack_with_member_folders_loads(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [2]), True)
    write_json(str(tmp_path / "s"), {"_type": TYPE_NON_TENSOR_STACK, "stack_dim": 0}, True)
    for i, value in enumerate(["x", "y"]):
        meta = {"_type": TYPE_NON_TENSOR, "data": value, "_metadata": None}
        write_json(str(tmp_path / "s" / str(i)), meta, True)
    td = TensorDict.load_memmap(tmp_path)
    assert isinstance(td.get("s"), NonTensorStack) and td["s"] == ["x", "y"]


def test_pickled_non_tensor_stack_loads_as_plain_data(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [2]), True)
    meta = {"_type": TYPE_NON_TENSOR_STACK, "stack_dim": 0, "device": None, "data": "pickle.pkl"}
    write_json(str(tmp_path / "s"), meta, True)
    with open(tmp_path / "s" / "pickle.pkl", "wb") as f:
        pickle.dump([b"raw", b"bytes"], f)
    with pytest.raises(PickleNotAllowedError, match=r"pickle\.pkl"):
        TensorDict.load_memmap(tmp_path, allow_pickle=False)
    assert TensorDict.load_memmap(tmp_path)["s"] == [b"raw", b"bytes"]
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True)["s"] == [b"raw", b"bytes"]


# ====================================================================== lazy stacks
def write_lazy(root: Path, stack_dim: int) -> None:
    write_json(str(root), {"_type": TYPE_LAZY, "stack_dim": stack_dim}, True)
    for i in range(2):
        x = np.full((2, 3), i, np.float32)
        entries = {"x": leaf_meta(x, "torch.float32")}
        write_array(str(root / str(i) / "x.memmap"), x)
        if i == 1:
            z = np.arange(2, dtype=np.int64)
            write_array(str(root / str(i) / "z.memmap"), z)
            entries["z"] = leaf_meta(z, "torch.int64")
        write_json(str(root / str(i)), td_meta(entries, [2]), True)


def test_upstream_lazy_stack_loads_as_a_lazy_stack(tmp_path: Path) -> None:
    write_lazy(tmp_path, 0)
    td = TensorDict.load_memmap(tmp_path)
    assert isinstance(td, LazyStackedTensorDict) and td.stack_dim == 0
    assert td.batch_size == (2, 2) and list(td.keys()) == ["x"]
    assert td["x"][1].sum().item() == 6.0
    assert td.tensordicts[1]["z"].tolist() == [0, 1]
    assert isinstance(td.tensordicts[0]["x"], MemoryMappedTensor)


def test_upstream_lazy_stack_keeps_its_stack_dim(tmp_path: Path) -> None:
    write_lazy(tmp_path, 1)
    td = TensorDict.load_memmap(tmp_path)
    assert td.stack_dim == 1 and td.batch_size == (2, 2)
    assert td["x"][:, 1].sum().item() == 6.0


def test_lazy_stack_nested_in_a_tensordict_loads(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"ls": {"type": "LazyStackedTensorDict"}}, [2]), True)
    write_lazy(tmp_path / "ls", 0)
    td = TensorDict.load_memmap(tmp_path)
    assert isinstance(td.get("ls"), LazyStackedTensorDict) and td["ls"].batch_size == (2, 2)


# ====================================================================== classes
def test_unknown_tensorclass_is_named_in_the_error(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"tc": {"type": "MyData"}}, [2]), True)
    write_json(str(tmp_path / "tc"), {"_type": "<class 'not_imported_mod.MyData'>", "y": None})
    write_json(str(tmp_path / "tc" / "_tensordict"), td_meta({}, [2]), True)
    with pytest.raises(MemmapFormatError, match=r"not_imported_mod\.MyData"):
        TensorDict.load_memmap(tmp_path)


# ====================================================================== what upstream 0.15.3 writes
def test_non_tensor_stack_with_upstreams_class_tag_loads(tmp_path: Path) -> None:
    # upstream 0.15.3 tags a NonTensorStack with "_class" as well as "_type"
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [3]), True)
    meta = {
        "_type": TYPE_NON_TENSOR_STACK,
        "_format_version": 1,
        "_class": "tensordict:NonTensorStack",
        "stack_dim": 0,
        "device": None,
        "data": ["a", "b", "c"],
    }
    write_json(str(tmp_path / "s"), meta, True)
    td = TensorDict.load_memmap(tmp_path)
    assert isinstance(td.get("s"), NonTensorStack) and td["s"] == ["a", "b", "c"]


def test_pickled_non_tensor_stack_with_upstreams_class_tag_loads(tmp_path: Path) -> None:
    write_json(str(tmp_path), td_meta({"s": {"type": "NonTensorStack"}}, [2]), True)
    meta = {
        "_type": TYPE_NON_TENSOR_STACK,
        "_format_version": 1,
        "_class": "tensordict:NonTensorStack",
        "stack_dim": 0,
        "device": None,
        "data": "pickle.pkl",
    }
    write_json(str(tmp_path / "s"), meta, True)
    with open(tmp_path / "s" / "pickle.pkl", "wb") as f:
        pickle.dump([{1}, {2}], f)
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True)["s"] == [{1}, {2}]


def test_lazy_stack_with_upstreams_stack_dim_name_loads(tmp_path: Path) -> None:
    write_lazy(tmp_path, 0)
    meta = {
        "_type": TYPE_LAZY,
        "_format_version": 1,
        "_class": "tensordict:LazyStackedTensorDict",
        "stack_dim": 0,
        "stack_dim_name": None,
    }
    write_json(str(tmp_path), meta)
    assert TensorDict.load_memmap(tmp_path).batch_size == (2, 2)


def test_tensorclass_with_non_tensor_fields_inside_its_tensordict_loads(tmp_path: Path) -> None:
    # upstream 0.15.3 keeps a tensorclass's non-tensor fields as NonTensorData entries
    from tests.tensorclass.classes import Sample

    x = np.arange(4, dtype=np.float32).reshape(4, 1).repeat(5, 1)
    write_json(str(tmp_path), {"_type": "<class 'tests.tensorclass.classes.Sample'>"})
    inner = {"obs": leaf_meta(x, "torch.float32"), "label": {"type": "NonTensorData"}}
    write_json(str(tmp_path / "_tensordict"), td_meta(inner, [4]))
    write_array(str(tmp_path / "_tensordict" / "obs.memmap"), x)
    meta = {"_type": TYPE_NON_TENSOR, "data": "lbl", "_metadata": None, "_is_non_tensor": True}
    write_json(str(tmp_path / "_tensordict" / "label"), meta)
    out = TensorDict.load_memmap(tmp_path)
    assert isinstance(out, Sample) and out.label == "lbl" and out.obs[2].tolist() == [2.0] * 5


# ====================================================================== trailing bytes
def test_data_files_longer_than_their_metadata_load_the_described_bytes(tmp_path: Path) -> None:
    # upstream maps the bytes its metadata describes and ignores what follows: files saved with a
    # trailing byte (a NUL, a newline added by a tool) load there, and here
    x = np.array([[1], [2]], dtype=np.int64)
    b = np.ones((2, 1), dtype=np.float32)
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "x.memmap").write_bytes(x.tobytes() + b"\0")
    (tmp_path / "n" / "b.memmap").write_bytes(b.tobytes() + b"\n\0")
    entries = {"x": leaf_meta(x, "torch.int64"), "b": leaf_meta(b, "torch.float32")}
    write_json(str(tmp_path / "n"), td_meta(entries, [2, 1]))
    write_json(str(tmp_path), td_meta({"n": {"type": "TensorDict"}}, [2, 1]))
    td = TensorDict.load_memmap(tmp_path)
    assert td["n", "x"].tolist() == [[1], [2]] and td["n", "b"].tolist() == [[1.0], [1.0]]
    assert td["n", "x"].shape == (2, 1)


def test_writes_into_a_file_with_trailing_bytes_keep_them(tmp_path: Path) -> None:
    x = np.zeros(2, dtype=np.int64)
    (tmp_path / "x.memmap").write_bytes(x.tobytes() + b"\0")
    write_json(str(tmp_path), td_meta({"x": leaf_meta(x, "torch.int64")}, [2]))
    td = TensorDict.load_memmap(tmp_path)
    td["x"][1] = 7
    raw = (tmp_path / "x.memmap").read_bytes()
    assert len(raw) == 17 and np.frombuffer(raw[:16], np.int64).tolist() == [0, 7]


def test_non_tensor_data_holding_a_list_loads_as_is(tmp_path: Path) -> None:
    # upstream's saved example holds a one-element list for a [2, 1] tensordict
    write_non_tensor(
        tmp_path, {"_type": TYPE_NON_TENSOR, "data": ["a string!"], "_metadata": None}, [2, 1]
    )
    assert TensorDict.load_memmap(tmp_path)["s"] == ["a string!"]
