"""torch.vmap over tensordicts, and tensordicts as pytree nodes."""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_map_with_path, tree_unflatten

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
        torch.vmap(lambda t: t, (2,))(td)  # beyond the leaves' dims too


def test_vmap_over_a_leaf_dim_beyond_the_batch_dims():
    # as upstream: the batch size grows to the leading dims the leaves share, then the dim is
    # mapped like a batch dim (jacrev's basis tensordicts are built this way)
    seen = []

    def fn(t):
        seen.append((t.batch_size, t["x"].shape, t["n"].batch_size))
        return t

    td = TensorDict({"x": torch.randn(2, 4, 3), "n": {"y": torch.randn(2, 4, 3, 5)}}, [2])
    out = torch.vmap(fn, (1,))(td)
    assert seen == [(torch.Size([2]), torch.Size([2, 3]), torch.Size([2]))]
    assert out.batch_size == torch.Size([4, 2])
    torch.testing.assert_close(out["x"], td["x"].transpose(0, 1))
    torch.testing.assert_close(out["n", "y"], td["n", "y"].transpose(0, 1))


def test_vmap_over_a_leaf_dim_needs_leaves_that_share_it():
    td = TensorDict({"x": torch.randn(2, 4), "y": torch.randn(2, 5)}, [2])
    with pytest.raises(ValueError, match="batch_size=\\[2\\]"):
        torch.vmap(lambda t: t, (1,))(td)


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_jacrev_and_jacfwd_of_a_function_of_a_tensordict(batch):
    td = TensorDict({"a": torch.randn(*batch, 2), "b": torch.randn(*batch, 4)}, batch)

    def f(t):
        return TensorDict({"x": t["a"] ** 2, "y": t["b"].sum(-1, keepdim=True)}, t.batch_size)

    eye_a = torch.eye(td["a"].numel()).reshape(*td["a"].shape, *td["a"].shape)
    for jac in (torch.func.jacrev(f), torch.func.jacfwd(f)):
        out = jac(td)
        assert out.batch_size == td.batch_size
        assert out["x", "b"].shape == (*batch, 2, *batch, 4)
        torch.testing.assert_close(out["x", "a"], eye_a * 2 * td["a"])
        assert out["y", "a"].abs().sum() == 0


def test_hessian_of_a_function_of_a_tensordict():
    td = TensorDict({"a": torch.randn(3, 2)}, [3])
    hess = torch.func.hessian(lambda t: (t["a"] ** 3).sum())(td)
    assert hess.batch_size == torch.Size([3])
    expected = torch.diag(6 * td["a"].flatten()).reshape(3, 2, 3, 2)
    torch.testing.assert_close(hess["a", "a"], expected)


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


def test_tree_map_takes_the_leading_dims_the_new_leaves_share():
    # as upstream: at most as many dims as before, read from the leaves themselves
    td = TensorDict({"a": torch.ones(1, 3, 4), "b": torch.ones(1, 3)}, [1, 3])
    assert tree_map(lambda x: x[0], td).batch_size == torch.Size([3])
    td = TensorDict({"a": torch.ones(2, 3), "b": torch.ones(2, 4)}, [2])
    assert tree_map(lambda x: x.T, td).batch_size == torch.Size([])


def test_tree_unflatten_with_one_extra_leading_dim_adds_a_batch_dim():
    td = TensorDict({"a": torch.ones(3, 2), "b": torch.ones(3, 5)}, [3], names=["n"])
    flat, spec = tree_flatten(td)
    out = tree_unflatten([torch.zeros(7, *t.shape) for t in flat], spec)
    assert out.batch_size == torch.Size([7, 3])
    assert out.names == [None, None]


def test_pytree_structure_ignores_the_batch_sizes_but_not_their_number():
    _, spec3 = tree_flatten(TensorDict({"a": torch.ones(3)}, [3]))
    _, spec4 = tree_flatten(TensorDict({"a": torch.ones(4)}, [4]))
    _, spec0 = tree_flatten(TensorDict({"a": torch.ones(4)}, []))
    assert spec3 == spec4
    assert spec3 != spec0


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


def test_exclude_td_from_pytree_set_and_unset_bracket_the_exclusion():
    td = TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)}, [1])
    excluder = _exclude_td_from_pytree()
    excluder.set()
    try:
        assert tree_flatten(td)[0] == [td]
    finally:
        excluder.unset()
    assert len(tree_flatten(td)[0]) == 2


def test_registered_pytree_classes_are_listed_under_upstreams_names():
    import tensordict
    from tensordict.nn import functional_modules

    assert TensorDict in functional_modules.PYTREE_REGISTERED_TDS
    assert LazyStackedTensorDict in functional_modules.PYTREE_REGISTERED_LAZY_TDS
    with pytest.warns(DeprecationWarning, match="functional_modules.PYTREE_REGISTERED_TDS"):
        assert tensordict.PYTREE_REGISTERED_TDS is functional_modules.PYTREE_REGISTERED_TDS
