"""torch.vmap over tensordicts, and tensordicts as pytree nodes."""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_map_with_path

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn.functional_modules import _exclude_td_from_pytree


def test_vmap_removes_the_mapped_batch_dim_inside():
    seen = []

    def fn(td):
        seen.append(td.batch_size)
        return td.set("b", td["a"] * 2)

    td = TensorDict({"a": torch.arange(12.0).reshape(3, 4)}, [3, 4])
    out = torch.vmap(fn, (1,))(td)
    assert seen == [torch.Size([3])]
    assert out.batch_size == torch.Size([4, 3])
    torch.testing.assert_close(out["b"], td["a"].T * 2)


def test_vmap_keeps_names_and_inserts_none_for_the_mapped_dim():
    def fn(a, b):
        b["c"] = a["a"] + b["b"]
        return b

    a = TensorDict({"a": torch.randn(3, 4)}, [3], names=["0"])
    b = TensorDict({"b": torch.randn(3, 5, 4)}, [3, 5], names=["A", "B"])
    assert torch.vmap(fn, (None, 1))(a, b).names == [None, "A"]


def test_vmap_mixes_tensordicts_and_tensors():
    td = TensorDict({"x": torch.ones(4, 2)}, [4])
    scale = torch.arange(4.0)
    out = torch.vmap(lambda t, s: t["x"] * s)(td, scale)
    torch.testing.assert_close(out, torch.ones(4, 2) * scale[:, None])


def test_vmap_in_dim_out_of_range_is_a_value_error():
    td = TensorDict({"x": torch.ones(4, 2)}, [4])
    with pytest.raises(ValueError, match="batch_size=\\[4\\]"):
        torch.vmap(lambda t: t, (1,))(td)


def test_vmap_sizes_must_agree():
    td = TensorDict({"x": torch.ones(4, 2)}, [4])
    with pytest.raises(ValueError, match="same size"):
        torch.vmap(lambda t, y: t["x"] + y)(td, torch.ones(3, 2))


def test_vmap_without_tensordicts_is_torch_unchanged():
    out = torch.vmap(lambda x: x.sum())(torch.ones(3, 2))
    assert torch.equal(out, torch.full((3,), 2.0))


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize("in_dim", [0, 1])
def test_vmap_over_lazy_stacks_returns_lazy_stacks(stack_dim, in_dim):
    def member(v):
        return TensorDict({"a": torch.full((1,), v)}, [1])

    x = LazyStackedTensorDict.lazy_stack([member(1.0), member(1.0)], stack_dim)
    y = LazyStackedTensorDict.lazy_stack([member(2.0), member(2.0)], stack_dim)
    out = torch.vmap(lambda x, y: x.set("a", x["a"] + y["a"]), (in_dim, in_dim))(x, y)
    assert isinstance(out, LazyStackedTensorDict)
    assert (out["a"] == 3).all()


def test_vmap_of_a_locked_tensordict_stays_locked():
    td = TensorDict({"a": torch.zeros(2)}, [2]).lock_()
    with pytest.raises(RuntimeError):
        torch.vmap(lambda t: t.set("b", t["a"]))(td)


def test_tree_map_rebuilds_tensordicts():
    td = TensorDict({"a": {"b": torch.ones(2, 3)}, "c": torch.ones(2)}, [2])
    out = tree_map(lambda x: x + 1, td)
    assert isinstance(out, TensorDict)
    assert out.batch_size == torch.Size([2])
    assert (out["a", "b"] == 2).all()


def test_tree_map_shrinks_the_batch_size_to_what_leaves_share():
    td = TensorDict({"a": torch.ones(1, 3)}, [1, 3])
    assert tree_map(lambda x: x[0], td).batch_size == torch.Size([])


def test_tree_map_keeps_non_tensor_entries():
    td = TensorDict({"a": torch.zeros(2), "s": "text"}, [2])
    out = tree_map(lambda x: x + 1, td)
    assert out["s"] == "text"


def test_tree_paths_name_the_keys():
    paths = []
    td = TensorDict({"a": {"b": torch.zeros(1)}}, [1])
    tree_map_with_path(lambda p, x: paths.append([k.key for k in p]) or x, td)
    assert paths == [["a", "b"]]


def test_lazy_stacks_flatten_into_members():
    td = LazyStackedTensorDict.lazy_stack(
        [TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2))]
    )
    out = tree_map(lambda x: x + 1, td)
    assert isinstance(out, LazyStackedTensorDict)
    assert torch.equal(out["a"], td["a"] + 1)


def test_exclude_td_from_pytree_makes_tensordicts_leaves_for_the_block():
    td = TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)}, [1])
    with _exclude_td_from_pytree():
        leaves, _ = tree_flatten(td)
        assert len(leaves) == 1 and leaves[0] is td
    assert len(tree_flatten(td)[0]) == 2
