"""safetensors files whose tensordict metadata is hostile or damaged: a clear FormatValueError
naming the file and the entry, never a bare KeyError, TypeError or RecursionError."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from tensordict import from_safetensors
from tensordict.errors import FormatValueError


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"batch_size": [], "keys": {"w": {"tensor": "w"}}}
    for _ in range(levels):
        node = {"batch_size": [], "keys": {"a": {"td": node}}}
    return node


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ("{not json", r"not JSON"),
        (json.dumps({"version": 1}), r"'root' object"),
        (json.dumps({"root": {"keys": {}}}), r"batch_size must be a list of sizes, got None"),
        (json.dumps({"root": {"batch_size": [10**30], "keys": {}}}), r"batch_size must be"),
        (json.dumps({"root": {"batch_size": [], "keys": []}}), r"keys must be an object"),
        (
            json.dumps({"root": {"batch_size": [], "keys": {"x": {"tensor": "nope"}}}}),
            r"at 'x'.*names the tensor 'nope'",
        ),
        (json.dumps({"root": {"batch_size": [], "keys": {"x": 3}}}), r"at 'x'.*one of"),
        (json.dumps({"root": {"batch_size": [], "keys": {"x": {"odd": 1}}}}), r"unknown entry"),
        (
            json.dumps({"root": {"batch_size": [5], "keys": {"w": {"tensor": "w"}}}}),
            r"malformed: .*",
        ),
        (
            json.dumps(
                {"root": {"batch_size": [2], "stack_dim": 7, "keys": {"w": {"tensor": "w"}}}}
            ),
            r"malformed",
        ),
        (json.dumps({"root": _deep(150)}), r"nested deeper than 128 levels"),
    ],
)
def test_hostile_metadata_raises_a_clear_error(tmp_path, meta, problem):
    path = tmp_path / "x.safetensors"
    save_file({"w": torch.zeros(2, 3)}, str(path), metadata={"tensordict": meta})
    with pytest.raises(FormatValueError, match=problem) as info:
        from_safetensors(path)
    assert str(path) in str(info.value)
