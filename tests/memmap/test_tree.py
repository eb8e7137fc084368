"""print_directory_tree, the key file-name codec, the shared executor and writability."""

from __future__ import annotations

import logging
import os

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tensordict import TensorDict
from tensordict.memmap import _is_writable
from tensordict.utils import (
    _decode_key_from_filesystem,
    _encode_key_for_filesystem,
    _get_shared_executor,
    print_directory_tree,
)


def test_tree_lists_directories_then_files_and_logs_each_line(tmp_path, caplog) -> None:
    TensorDict(
        a=torch.zeros(3), b=TensorDict(c=torch.ones(3), batch_size=[3]), batch_size=[3]
    ).memmap(tmp_path / "saved")
    with caplog.at_level(logging.INFO, logger="tensordict"):
        text = print_directory_tree(tmp_path / "saved")
    lines = text.splitlines()
    assert lines[0].startswith("Directory size: ")
    assert lines[1] == "saved/"
    assert lines.index("    b/") < lines.index("    meta.json")
    assert "        c.memmap" in lines and "    a.memmap" in lines
    assert [r.getMessage() for r in caplog.records] == lines


def test_tree_without_metadata(tmp_path) -> None:
    (tmp_path / "f").write_text("x")
    assert print_directory_tree(tmp_path, display_metadata=False).splitlines()[1] == "    f"


@pytest.mark.parametrize(
    ("key", "encoded"),
    [("a", "a"), ("a b", "a%20b"), ("a/b", "a%2Fb"), ("%", "%25"), ("", "%"), ("..", "%2E%2E")],
)
def test_encode_key(key: str, encoded: str) -> None:
    assert _encode_key_for_filesystem(key) == encoded
    assert _encode_key_for_filesystem(key, robust=False) == key


@given(st.text(max_size=12))
def test_decode_inverts_encode(key: str) -> None:
    assert _decode_key_from_filesystem(_encode_key_for_filesystem(key)) == key


def test_shared_executor_is_one_pool_per_thread_count() -> None:
    pool = _get_shared_executor(2)
    assert _get_shared_executor(2) is pool and _get_shared_executor(3) is not pool
    assert pool.submit(lambda: 1).result() == 1
    with pytest.raises(ValueError, match="positive"):
        _get_shared_executor(0)


def test_is_writable(tmp_path) -> None:
    path = tmp_path / "file"
    assert _is_writable(path)  # missing: writable
    path.write_text("x")
    os.chmod(path, 0o444)
    try:
        assert _is_writable(path) is (os.geteuid() == 0)  # root writes read-only files
    finally:
        os.chmod(path, 0o644)
