"""Argument forms upstream code uses: ``inplace=`` on shape ops and ``to``, ``reshape(size=)``,
``max``/``min`` with indices, reductions over ``dim="feature"``, ``where(pad=)``, ``gather``."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import LazyStackedTensorDict, TensorDict

INDEX = torch.tensor([[0, 2], [1, 3], [2, 0]])


def nested() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(12.0).reshape(3, 4),
            "nested": {"b": torch.arange(24.0).reshape(3, 4, 2)},
        },
        [3, 4],
    )


@pytest.mark.parametrize(
    "op",
    [
        lambda t, i: t.repeat(2, 3, inplace=i),
        lambda t, i: t.gather(dim=1, index=INDEX, inplace=i),
        lambda t, i: t.reshape((12,), inplace=i),
        lambda t, i: t.reshape(size=(2, 6), inplace=i),
        lambda t, i: t.flatten(0, 1, inplace=i),
        lambda t, i: t.unflatten(1, (2, 2), inplace=i),
        lambda t, i: t.contiguous(inplace=i),
        lambda t, i: t.to(torch.float64, inplace=i),
    ],
)
def test_inplace_form_gives_the_same_result_in_the_tensordict_itself(
    op: Callable[[TensorDict, bool], Any],
) -> None:
    expected = op(nested(), False)
    td = nested()
    inner = td["nested"]
    out = op(td, True)
    assert out is td and td["nested"] is inner
    assert td.batch_size == expected.batch_size
    assert td["nested"].batch_size == expected["nested"].batch_size
    for key, value in expected.items(include_nested=True, leaves_only=True):
        assert torch.equal(td[key], value), key


def test_inplace_form_releases_the_old_leaves() -> None:
    td = TensorDict({"a": torch.zeros(4, 5, 8)}, [4, 5])
    old = weakref.ref(td["a"])
    td.repeat(2, 1, inplace=True)
    gc.collect()
    assert old() is None


def test_inplace_gather_on_a_lazy_stack_is_refused_by_name() -> None:
    lazy = LazyStackedTensorDict.lazy_stack([TensorDict({"x": torch.zeros(4)}, [4])] * 3)
    with pytest.raises(NotImplementedError, match="gather"):
        lazy.gather(dim=0, index=torch.zeros(3, 4, dtype=torch.long), inplace=True)


def test_gather_argument_errors() -> None:
    td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    with pytest.raises(NotImplementedError, match=r"index\.ndim"):
        td.gather(dim=0, index=torch.tensor([0, 1]), inplace=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        td.gather(0, torch.zeros(3, 4, dtype=torch.long), out=td.clone(), inplace=True)


def test_gather_with_fewer_index_dims_spreads_the_index_over_the_rest() -> None:
    td = TensorDict({"a": torch.arange(12.0).reshape(3, 4)}, [3, 4])
    out = td.gather(dim=0, index=torch.tensor([0, 2]))
    assert out.batch_size == (2,) and torch.equal(out["a"], td["a"][[0, 2]])


def test_gather_writes_into_out() -> None:
    td = nested()
    out = td.clone().gather(1, INDEX)
    target = out.zero_()
    assert torch.gather(td, 1, INDEX, out=target) is target
    assert torch.equal(target["nested", "b"], nested().gather(1, INDEX)["nested", "b"])


def test_reshape_size_keyword_and_positional_together_raise() -> None:
    assert nested().reshape(size=(4, 3)).batch_size == (4, 3)
    with pytest.raises(TypeError, match="not both"):
        nested().reshape(4, 3, size=(4, 3))


# ---------------------------------------------------------------------- max / min
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_over_a_dim_return_values_and_indices_like_torch(name: str, keepdim: bool) -> None:
    td = nested()
    values, indices = getattr(td, name)(dim=1, keepdim=keepdim)
    for key, leaf in td.items(include_nested=True, leaves_only=True):
        expected = getattr(torch, name)(leaf, dim=1, keepdim=keepdim)
        assert torch.equal(values[key], expected.values), key
        assert torch.equal(indices[key], expected.indices), key
    plain = getattr(td, name)(dim=1, return_indices=False)
    assert torch.equal(plain["a"], getattr(torch, name)(td["a"], 1).values)


def test_max_with_a_tuple_dim_reduces_its_first_dim_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match="first dim"):
        values, _ = nested().max(dim=(0, 1))
    assert values.batch_size == (4,)


# ---------------------------------------------------------------------- dim="feature"
@pytest.mark.filterwarnings("ignore::UserWarning")  # (std/var of one element: torch warns)
@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["sum", "mean", "prod", "nansum", "nanmean", "std", "var"]),
    st.lists(st.integers(1, 3), min_size=0, max_size=2),
    st.integers(0, 2**16),
)
def test_feature_reduction_reduces_each_leaf_past_its_batch_dims(
    name: str, feature: list[int], seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    leaf = torch.rand(3, 2, *feature, generator=gen)
    deep = torch.rand(3, 2, 4, *feature, generator=gen)
    td = TensorDict({"a": leaf, "n": TensorDict({"b": deep}, [3, 2, 4])}, [3, 2])
    out = getattr(td, name)(dim="feature")
    fn = getattr(torch, name)
    for key, value, bd in (("a", leaf, 2), (("n", "b"), deep, 3)):
        expected = fn(value.reshape(*value.shape[:bd], -1), dim=-1)
        assert torch.allclose(out[key], expected, equal_nan=True), key
    assert out.batch_size == (3, 2) and out["n"].batch_size == (3, 2, 4)


def test_feature_reduction_argument_errors() -> None:
    with pytest.raises(TypeError, match="keepdim"):
        nested().sum(dim="feature", keepdim=True)
    with pytest.raises(RuntimeError, match="call_on_nested"):
        nested().max(dim="feature")
    with pytest.raises(ValueError, match="feature"):
        nested().sum(dim="features")


# ---------------------------------------------------------------------- where(pad=)
def test_where_pads_the_entries_one_side_lacks() -> None:
    td = nested()
    mask = torch.tensor([[True, False, True, False]] * 3)
    out = td.where(mask, td.empty(), pad=-1.0)
    assert torch.equal(out["a"], torch.where(mask, td["a"], -1.0))
    assert (out["nested", "b"][~mask] == -1).all()
    target = td.empty()
    assert td.empty().where(~mask, td, pad=-1.0, out=target) is target
    assert torch.equal(target["a"], torch.where(~mask, -1.0, td["a"]))
    with pytest.raises(KeyError, match="not found and no pad value provided"):
        td.where(mask, td.empty())
