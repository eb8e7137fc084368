"""Deep nesting: storing more than 128 levels is refused, and a tree grown deeper level by level
gets a clear NestingDepthError from repr, pickle and clone instead of a bare RecursionError."""

from __future__ import annotations

import pickle

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import NestingDepthError

MAX_NESTING = 128  # the documented limit (docs/guarantees-formats.md)


def _wrapped(levels: int) -> TensorDict:
    td = TensorDict({"x": torch.zeros(1)}, [])
    for _ in range(levels):
        td = TensorDict({"a": td}, [])
    return td


def test_wrapping_past_the_limit_is_refused():
    td = _wrapped(MAX_NESTING)  # 128 levels below its root
    with pytest.raises(NestingDepthError, match=r"more than the 128 a tensordict allows"):
        TensorDict({"a": td}, [])
    with pytest.raises(RecursionError):  # what code catching the old failure expects
        TensorDict({}, []).set("a", td)


def test_a_nested_key_deeper_than_the_limit_is_refused():
    with pytest.raises(NestingDepthError, match="129"):
        TensorDict({}, []).set(("k",) * (MAX_NESTING + 1), TensorDict({"x": torch.zeros(1)}, []))


def test_the_deepest_allowed_tree_pickles_prints_and_clones():
    td = _wrapped(MAX_NESTING - 1)
    assert torch.equal(
        pickle.loads(pickle.dumps(td))[("a",) * (MAX_NESTING - 1) + ("x",)], torch.zeros(1)
    )
    assert repr(td) and td.clone() is not td


@pytest.mark.parametrize("op", [repr, pickle.dumps, lambda t: t.clone(), lambda t: t.clone(False)])
def test_a_tree_grown_deeper_level_by_level_raises_a_clear_error(op):
    root = cur = TensorDict({}, [])
    for _ in range(1000):  # each step stores one level: only the whole tree is too deep
        cur["a"] = TensorDict({}, [])
        cur = cur["a"]
    with pytest.raises(NestingDepthError, match="Flatten the structure"):
        op(root)
