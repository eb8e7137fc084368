"""``python -m tensordict info``: the tree, ``--json``, damaged directories and exit statuses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict
from tensordict.cli import main
from tests.memmap import writers
from tests.tensorclass.classes import Sample


class Explosive:
    """Unpickling it raises: proves that ``info`` never unpickles."""

    def __reduce__(self):
        return (_explode, ())


def _explode():
    raise AssertionError("info unpickled a file")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["info", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def _row(out: str, key: str) -> str:
    """The tree row of ``key`` (its name, after the branch drawing)."""
    rows = [line for line in out.splitlines() if line.split("── ")[-1].split(" ")[0] == key]
    assert len(rows) == 1, out
    return rows[0]


def _cells(out: str, key: str) -> list[str]:
    """The words of ``key``'s row after the key."""
    return _row(out, key).split("── ")[-1].split()[1:]


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    td = TensorDict(
        {
            "a": torch.zeros(4, 3),
            "nested": {"b": torch.ones(4, dtype=torch.int64), "deep": {"c": torch.zeros(4, 2)}},
            "lazy": LazyStackedTensorDict(
                *[TensorDict({"e": torch.zeros(2)}, [2]) for _ in range(4)], stack_dim=0
            ),
            "sample": Sample(obs=torch.zeros(4, 5), label="hi", batch_size=[4]),
            "text": "hello",
            "words": NonTensorStack.from_list(["w", "x", "y", "z"]),
        },
        [4],
    )
    td.memmap(tmp_path / "td")
    return tmp_path / "td"


# ---------------------------------------------------------------------- the tree
def test_header_shows_kind_batch_size_and_format_version(capsys, saved):
    status, out, _ = _run(capsys, str(saved))
    assert status == 0
    assert out.splitlines()[0] == f"{saved}: TensorDict, batch size [4], format version 1"


def test_tensor_rows_show_dtype_shape_and_bytes(capsys, saved):
    out = _run(capsys, str(saved))[1]
    assert _cells(out, "a") == ["float32", "[4,", "3]", "48", "B"]
    assert _cells(out, "b") == ["int64", "[4]", "32", "B"]


def test_nested_entries_are_indented_under_their_parent(capsys, saved):
    out = _run(capsys, str(saved))[1]
    lines = out.splitlines()
    nested, deep, c = (lines.index(_row(out, k)) for k in ("nested", "deep", "c"))
    assert nested < deep < c
    indent = [len(lines[i]) - len(lines[i].lstrip("│├└─ ")) for i in (nested, deep, c)]
    assert indent[0] < indent[1] < indent[2]
    assert "TensorDict" in lines[nested] and "batch [4]" in lines[nested]
    assert "64 B" in lines[nested]  # 32 B of b + 32 B of deep/c


def test_total_line_counts_bytes_and_tensors(capsys, saved):
    out = _run(capsys, str(saved))[1]
    # a 48 + b 32 + c 32 + 4 members * e 8 + sample.obs 80
    assert out.splitlines()[-1] == "total: 224 B in 8 tensors"


def test_lazy_stack_shows_stacked_batch_size_and_collapses_members_alike(capsys, saved):
    out = _run(capsys, str(saved))[1]
    row = _row(out, "lazy")
    assert "LazyStackedTensorDict" in row and "batch [4, 2]" in row and "stack_dim 0" in row
    assert "batch [2]" in _row(out, "0")
    assert "3 more members like 0" in _row(out, "1..3")
    assert "24 B" in _row(out, "1..3")


def test_lazy_stack_of_different_members_lists_each(capsys, tmp_path):
    members = [TensorDict({"e": torch.zeros(2)}, [2]), TensorDict({"f": torch.zeros(2, 3)}, [2])]
    members.append(TensorDict({"e": torch.zeros(2)}, [2]))
    LazyStackedTensorDict(*members, stack_dim=1).memmap(tmp_path / "lazy")
    status, out, _ = _run(capsys, str(tmp_path / "lazy"))
    assert status == 0
    assert "LazyStackedTensorDict, batch size [2, 3]" in out.splitlines()[0]
    assert [_cells(out, k)[:2] for k in ("0", "1", "2")] == [["TensorDict", "batch"]] * 3
    assert _cells(out, "f")[:3] == ["float32", "[2,", "3]"]


def test_tensorclass_shows_its_class_and_fields(capsys, saved):
    out = _run(capsys, str(saved))[1]
    row = _row(out, "sample")
    assert "tensorclass tests.tensorclass.classes.Sample" in row and "batch [4]" in row
    assert "float32" in _row(out, "obs") and "[4, 5]" in _row(out, "obs")
    assert "'hi'" in _row(out, "label")
    assert _cells(out, "reward") == ["field", "None"]  # an attribute kept in the class's meta.json


def test_non_tensor_entries_show_their_inline_data(capsys, saved):
    out = _run(capsys, str(saved))[1]
    assert "NonTensorData" in _row(out, "text") and "'hello'" in _row(out, "text")
    words = _row(out, "words")
    assert "NonTensorStack" in words and "4 values: ['w', 'x', 'y', 'z']" in words


def test_pickled_data_is_reported_not_unpickled(capsys, tmp_path):
    TensorDict({"obj": Explosive(), "x": torch.zeros(2)}, [2]).memmap(tmp_path / "td")
    status, out, _ = _run(capsys, str(tmp_path / "td"))
    assert status == 0
    assert "pickled in obj/other.pickle" in _row(out, "obj") and "not read" in _row(out, "obj")


def test_data_files_are_never_mapped(capsys, saved, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("info mapped a data file")

    # `tensordict.memmap` is also upstream's top-level function: import the module by path
    from tensordict.memmap import mapping

    monkeypatch.setattr(mapping, "_map_file", refuse)
    monkeypatch.setattr(torch, "from_file", refuse)
    assert _run(capsys, str(saved))[0] == 0


def test_directory_without_format_version_is_an_older_format(capsys, tmp_path):
    TensorDict({"x": torch.zeros(3)}, [3]).memmap(tmp_path / "old")
    meta_path = tmp_path / "old" / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["_format_version"], meta["_class"]
    meta_path.write_text(json.dumps(meta))
    status, out, _ = _run(capsys, str(tmp_path / "old"))
    assert status == 0
    assert out.splitlines()[0].endswith("format version none (older format)")
    assert json.loads(_run(capsys, str(tmp_path / "old"), "--json")[1])["format_version"] is None


# ---------------------------------------------------------------------- --json
def test_json_summary(capsys, saved):
    status, out, _ = _run(capsys, str(saved), "--json")
    doc = json.loads(out)
    assert status == 0
    assert doc["path"] == str(saved)
    assert doc["kind"] == "TensorDict" and doc["batch_size"] == [4]
    assert doc["format_version"] == 1
    assert doc["total_bytes"] == 224 and doc["num_tensors"] == 8
    assert doc["problems"] == []


def test_json_tree_structure(capsys, saved):
    tree = json.loads(_run(capsys, str(saved), "--json")[1])["tree"]
    children = {c["key"]: c for c in tree["children"]}
    assert list(children) == ["a", "nested", "lazy", "sample", "text", "words"]
    assert children["a"] == {
        "key": "a",
        "kind": "tensor",
        "path": "a.memmap",
        "dtype": "float32",
        "shape": [4, 3],
        "nbytes": 48,
    }
    deep = {c["key"]: c for c in children["nested"]["children"]}["deep"]
    assert deep["children"][0]["path"] == os.path.join("nested", "deep", "c.memmap")
    lazy = children["lazy"]
    assert lazy["batch_size"] == [4, 2] and lazy["stack_dim"] == 0
    assert [m["key"] for m in lazy["children"]] == ["0", "1", "2", "3"]  # never collapsed
    sample = children["sample"]
    assert sample["kind"] == "tensorclass"
    assert sample["class_name"] == "tests.tensorclass.classes.Sample"
    assert children["text"]["kind"] == "NonTensorData" and children["text"]["value"] == "'hello'"
    assert children["words"]["kind"] == "NonTensorStack"


# ---------------------------------------------------------------------- damaged or wrong paths
@pytest.mark.parametrize("make", ["file", "missing", "empty_dir", "bad_json", "not_tensordict"])
def test_not_a_tensordict_directory_exits_2_with_one_line(capsys, tmp_path, make):
    path = tmp_path / "target"
    if make == "file":
        path.write_text("hello")
    elif make != "missing":
        path.mkdir()
    if make == "bad_json":
        (path / "meta.json").write_text("{not json")
    if make == "not_tensordict":
        (path / "meta.json").write_text('{"hello": 1}')
    status, out, err = _run(capsys, str(path))
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("python -m tensordict info: error: ")
    assert str(path) in err


def test_missing_data_file_is_marked_and_exits_1(capsys, saved):
    os.unlink(saved / "nested" / "b.memmap")
    status, out, _ = _run(capsys, str(saved))
    assert status == 1
    assert "! data file missing" in _row(out, "b")
    assert out.splitlines()[-1].endswith("1 problem(s) marked with !")


def test_truncated_data_file_is_a_problem_in_json(capsys, saved):
    with open(saved / "a.memmap", "r+b") as f:
        f.truncate(10)
    status, out, _ = _run(capsys, str(saved), "--json")
    assert status == 1
    assert json.loads(out)["problems"] == ["a.memmap: file holds 10 bytes, metadata says 48"]


def test_unreadable_nested_metadata_is_a_problem_not_a_crash(capsys, saved):
    (saved / "nested" / "deep" / "meta.json").write_text("[]")
    status, out, _ = _run(capsys, str(saved))
    assert status == 1
    assert "! " in _row(out, "deep") and "JSON object" in _row(out, "deep")


def _info_forked(path) -> tuple[int, str, str]:
    """``info`` in a forked child with a deadline: a regression fails instead of hanging."""
    code, value = writers.run_forked(writers.info, str(path), deadline=60)
    assert code == 0 and value[0] == "ok", f"info hung or crashed: {code} {value}"
    return value[1]


def test_short_lazy_stack_is_a_problem(capsys, tmp_path):
    members = [TensorDict({"x": torch.zeros(2)}, [2]) for _ in range(5)]
    LazyStackedTensorDict(*members, stack_dim=0).memmap(tmp_path / "p")
    os.rename(tmp_path / "p" / "2", tmp_path / "gone")
    status, out, _ = _run(capsys, str(tmp_path / "p"), "--json")
    assert status == 1
    assert any("5 members" in p and "2/" in p for p in json.loads(out)["problems"])


def test_meta_json_fifo_exits_2_at_once(tmp_path):
    (tmp_path / "p").mkdir()
    os.mkfifo(tmp_path / "p" / "meta.json")
    status, _, err = _info_forked(tmp_path / "p")
    assert status == 2 and "regular file" in err


def test_nested_meta_json_fifo_is_a_problem(capsys, saved):
    os.unlink(saved / "nested" / "meta.json")
    os.mkfifo(saved / "nested" / "meta.json")
    status, out, _ = _info_forked(saved)
    assert status == 1 and "regular file" in out


def test_symlink_loop_is_a_problem_counted_once(capsys, tmp_path):
    TensorDict({"x": torch.zeros(2), "n": {"y": torch.zeros(2)}}, [2]).memmap(tmp_path / "p")
    shutil.rmtree(tmp_path / "p" / "n")
    os.symlink(".", tmp_path / "p" / "n")
    status, out, _ = _run(capsys, str(tmp_path / "p"), "--json")
    summary = json.loads(out)
    assert status == 1 and summary["num_tensors"] == 1
    assert any("loop" in p for p in summary["problems"])


def test_deep_nesting_is_a_problem_not_a_crash(capsys, tmp_path):
    from tensordict.memmap import format as fmt
    from tests.memmap.helpers import td_meta, write_json

    path = tmp_path / "p"
    for _ in range(fmt.MAX_DEPTH + 10):
        write_json(str(path), td_meta({"a": {"type": "TensorDict"}}, []))
        path = path / "a"
    status, out, _ = _run(capsys, str(tmp_path / "p"), "--json")
    assert status == 1 and any("deeper than" in p for p in json.loads(out)["problems"])


def test_data_file_with_trailing_bytes_is_noted_not_a_problem(capsys, tmp_path):
    TensorDict({"x": torch.zeros(2, dtype=torch.int64)}, [2]).memmap(tmp_path / "p")
    with open(tmp_path / "p" / "x.memmap", "ab") as f:
        f.write(b"\0")
    status, out, _ = _run(capsys, str(tmp_path / "p"))
    assert status == 0 and "1 trailing byte ignored" in _row(out, "x")


# ---------------------------------------------------------------------- the entry point
def test_python_m_tensordict_info(saved, tmp_path):
    cmd = [sys.executable, "-m", "tensordict", "info"]
    ok = subprocess.run([*cmd, str(saved)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"{saved}: TensorDict")
    bad = subprocess.run([*cmd, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stdout == "" and len(bad.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        ([10**30], r"'shape' is not a list of sizes: \[1000000000000000000000000000000\]"),
        ([5], r"shape \[4\] does not start with the batch size \[5\]"),
    ],
)
def test_a_batch_size_load_memmap_refuses_is_a_problem(capsys, tmp_path, shape, problem):
    TensorDict({"x": torch.zeros(4)}, [4]).memmap(tmp_path / "p")
    meta = json.loads((tmp_path / "p" / "meta.json").read_text())
    meta["shape"] = shape
    (tmp_path / "p" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError):
        TensorDict.load_memmap(tmp_path / "p")
    status, out, _ = _run(capsys, str(tmp_path / "p"))
    assert status == 1 and re.search(rf"! {problem}", out), out


def test_version_prints_the_package_torch_and_python_versions_on_one_line():
    res = subprocess.run(
        [sys.executable, "-m", "tensordict", "--version"], capture_output=True, text=True
    )
    import tensordict

    assert res.returncode == 0, res.stderr
    line = res.stdout.strip()
    assert "\n" not in line
    assert line.startswith(f"tensordict {tensordict.__version__} (torch {torch.__version__}")
    assert line.endswith(os.path.dirname(tensordict.__file__))


def test_the_package_metadata_takes_its_version_from_the_module():
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = { attr = "tensordict.__version__" }' in pyproject
