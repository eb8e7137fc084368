"""apply / named_apply, arithmetic, comparisons, reductions and casts."""

# Some tests spell membership as `key in td.keys()` on purpose (the view under test).
# ruff: noqa: SIM118

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict
from tensordict.errors import BatchSizeError, DTypeCastError, ShapeMismatchError


def make() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(1.0, 25.0).reshape(4, 3, 2),
            "b": {"c": torch.arange(1.0, 13.0).reshape(4, 3)},
        },
        [4, 3],
    )


def leaves(td: TensorDict) -> dict[Any, torch.Tensor]:
    return dict(td.items(include_nested=True, leaves_only=True))


# ---------------------------------------------------------------------- apply
def test_apply_calls_fn_on_every_leaf() -> None:
    td = make()
    out = td.apply(lambda x: x * 2)
    for key, value in leaves(td).items():
        assert torch.equal(out[key], value * 2)


def test_apply_keeps_structure_and_batch_size() -> None:
    out = make().apply(lambda x: x + 1)
    assert out.batch_size == torch.Size([4, 3]) and out["b"].batch_size == torch.Size([4, 3])


def test_apply_does_not_modify_source() -> None:
    td = make()
    td.apply(lambda x: x + 1)
    assert td["a"][0, 0, 0] == 1


def test_apply_none_result_drops_the_key() -> None:
    out = make().apply(lambda x: None if x.ndim == 3 else x)
    assert list(out.keys(True, True)) == [("b", "c")]


def test_apply_filter_empty_drops_empty_nested_tensordicts() -> None:
    out = make().apply(lambda x: None if x.ndim == 2 else x, filter_empty=True)
    assert list(out.keys(True)) == ["a"]


def test_apply_with_other_tensordicts() -> None:
    td = make()
    out = td.apply(lambda x, y: x - y, td.clone())
    assert all(v.abs().sum() == 0 for v in leaves(out).values())


def test_apply_other_missing_key_raises_naming_it() -> None:
    td = make()
    with pytest.raises(ShapeMismatchError, match="'a'"):
        td.apply(lambda x, y: x + y, td.exclude("a"))


def test_apply_other_missing_key_with_default() -> None:
    td = make()
    out = td.apply(lambda x, y: x + y, td.exclude("a"), default=0)
    assert torch.equal(out["a"], td["a"])


def test_apply_with_batch_size() -> None:
    out = make().apply(lambda x: x[0], batch_size=[3])
    assert out.batch_size == torch.Size([3]) and out["b"].batch_size == torch.Size([3])
    assert out["a"].shape == torch.Size([3, 2])


def test_apply_with_batch_size_not_matching_results_raises() -> None:
    with pytest.raises(BatchSizeError, match=r"\[5\]"):
        make().apply(lambda x: x, batch_size=[5])


def test_apply_inplace_writes_into_source() -> None:
    td = make()
    a = td["a"]
    assert td.apply(lambda x: x * 0, inplace=True) is td
    assert td["a"] is a and a.sum() == 0


def test_apply__writes_into_source() -> None:
    td = make()
    c = td["b", "c"]
    assert td.apply_(lambda x: x + 1) is td
    assert td["b", "c"] is c and c[0, 0] == 2


def test_named_apply_receives_leaf_name() -> None:
    seen: list[Any] = []
    make().named_apply(lambda k, x: seen.append(k) or x)
    assert seen == ["a", "c"]


def test_named_apply_nested_keys() -> None:
    seen: list[Any] = []
    make().named_apply(lambda k, x: seen.append(k) or x, nested_keys=True)
    assert seen == ["a", ("b", "c")]


def test_named_apply_none_drops_key() -> None:
    out = make().named_apply(lambda k, x: None if k == "a" else x)
    assert "a" not in out.keys()


def test_apply_carries_non_tensor_data() -> None:
    td = TensorDict({"x": torch.ones(2), "s": "lbl"}, [2])
    assert td.apply(lambda x: x + 1)["s"] == "lbl"


# ---------------------------------------------------------------------- arithmetic
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "pow": operator.pow,
}


@pytest.mark.parametrize("op", list(BINARY), ids=list(BINARY))
@pytest.mark.parametrize("other_kind", ["scalar", "tensor", "tensordict"])
def test_binary_op_matches_leafwise(op: str, other_kind: str) -> None:
    td = make()
    fn = BINARY[op]
    other: Any = {"scalar": 2.0, "tensor": torch.tensor(3.0), "tensordict": make() + 1}[other_kind]
    out = fn(td, other)
    for key, value in leaves(td).items():
        o = other[key] if other_kind == "tensordict" else other
        assert torch.allclose(out[key], fn(value, o)), key


@pytest.mark.parametrize("op", list(BINARY), ids=list(BINARY))
def test_reflected_binary_op_with_scalar(op: str) -> None:
    td = make()
    fn = BINARY[op]
    out = fn(2.0, td)
    for key, value in leaves(td).items():
        assert torch.allclose(out[key], fn(2.0, value)), key


def test_tensor_operand_lines_up_with_batch_dims_not_trailing_dims() -> None:
    td = TensorDict({"a": torch.ones(4, 3)}, [4])
    with pytest.raises(RuntimeError, match="does not broadcast with batch_size"):
        td * torch.tensor([1.0, 2.0, 3.0])
    out = td * torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert out["a"][:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_neg_and_abs() -> None:
    td = make()
    assert torch.equal((-td)["a"], -td["a"])
    assert torch.equal(abs(-td)["b", "c"], td["b", "c"])
    assert torch.equal(td.neg()["a"], -td["a"]) and torch.equal((-td).abs()["a"], td["a"])


INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "iadd": operator.iadd,
    "isub": operator.isub,
    "imul": operator.imul,
    "itruediv": operator.itruediv,
    "ipow": operator.ipow,
}


@pytest.mark.parametrize("op", list(INPLACE), ids=list(INPLACE))
def test_inplace_op_writes_into_leaves(op: str) -> None:
    td = make()
    a = td["a"]
    expected = INPLACE[op](td["a"].clone(), 2.0)
    out = INPLACE[op](td, 2.0)
    assert out is td and td["a"] is a and torch.allclose(a, expected)


def test_inplace_op_with_tensordict() -> None:
    td = make()
    td += make()
    assert torch.equal(td["a"], make()["a"] * 2)


def mixed() -> TensorDict:
    return TensorDict(
        {"f": torch.zeros(3, 2), "n": {"i": torch.zeros(3, dtype=torch.long)}, "z": torch.zeros(3)},
        [3],
    )


@pytest.mark.parametrize("op", list(INPLACE), ids=list(INPLACE))
def test_inplace_op_with_a_misfit_leaf_changes_nothing(op: str) -> None:
    td = mixed().float()  # (dtypes are another test)
    other = td + 1
    other.set("z", torch.ones(3, 4), inplace=False)  # the last leaf cannot broadcast to [3]
    with pytest.raises(ShapeMismatchError, match=r"'z' has shape \[3, 4\]"):
        INPLACE[op](td, other)
    assert (td == mixed().float()).all()


def test_inplace_op_whose_dtype_cannot_be_stored_changes_nothing() -> None:
    td = mixed()
    with pytest.raises(DTypeCastError, match=r"\('n', 'i'\).*torch.float32.*torch.int64"):
        td += 0.5  # "f" comes first and would have been updated
    assert (td == mixed()).all()
    with pytest.raises(RuntimeError):  # same family as torch's own error
        td /= 2
    assert (td == mixed()).all()
    td *= 3  # int results fit every leaf
    td += 1
    assert torch.equal(td["n", "i"], torch.ones(3, dtype=torch.long))


def test_apply__writes_as_it_goes_and_update_of_apply_is_all_or_nothing() -> None:
    def misfit(x: torch.Tensor) -> torch.Tensor:
        return torch.ones(4) if x.shape == (3,) and x.is_floating_point() else x + 1

    td = mixed()
    with pytest.raises(RuntimeError):  # torch refuses to copy [4] into [3]
        td.apply_(misfit)
    assert td["f"].sum() == 6  # written before "z" failed: one result in memory at a time
    td = mixed()
    with pytest.raises(ShapeMismatchError, match="'z'"):
        td.update_(td.apply(misfit))  # the all-or-nothing spelling the docstring gives
    assert (td == mixed()).all()


def test_inplace_op_checks_numpy_scalars_too() -> None:
    td = mixed()
    with pytest.raises(DTypeCastError):
        td += np.float32(0.5)
    assert (td == mixed()).all()
    td *= np.int64(2)
    assert (td == mixed()).all()


def test_inplace_ops_on_a_lazy_stack_of_different_shapes() -> None:
    lz = LazyStackedTensorDict(TensorDict({"x": torch.zeros(3)}), TensorDict({"x": torch.zeros(4)}))
    lz += 1
    lz.add_(1)
    assert [m["x"].tolist() for m in lz.tensordicts] == [[2.0] * 3, [2.0] * 4]
    other = LazyStackedTensorDict(
        TensorDict({"x": torch.zeros(3)}), TensorDict({"x": torch.zeros(5)})
    )
    with pytest.raises(ShapeMismatchError):
        lz += other  # the second member does not fit: the first is left as it was
    assert lz.tensordicts[0]["x"].tolist() == [2.0] * 3
    lz.named_apply(lambda key, x: x.add_(1), inplace=True)
    assert lz.tensordicts[1]["x"].tolist() == [3.0] * 4


def test_named_inplace_methods() -> None:
    td = make()
    td.add_(1).mul_(2).sub_(2).div_(2)
    assert torch.equal(td["a"], make()["a"])


def test_binary_op_with_different_keys_raises_naming_keys() -> None:
    with pytest.raises(ShapeMismatchError) as info:
        make() + make().exclude("a")
    assert "'a'" in str(info.value)


def test_inplace_op_with_different_keys_raises_and_writes_nothing() -> None:
    td = make()
    with pytest.raises(ShapeMismatchError):
        td += make().exclude("a")
    assert torch.equal(td["b", "c"], make()["b", "c"])


# ---------------------------------------------------------------------- comparisons
COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


@pytest.mark.parametrize("op", list(COMPARE), ids=list(COMPARE))
def test_comparison_gives_bool_tensordict(op: str) -> None:
    td = make()
    out = COMPARE[op](td, 5.0)
    assert isinstance(out, TensorDict) and out.batch_size == td.batch_size
    for key, value in leaves(td).items():
        assert out[key].dtype == torch.bool
        assert torch.equal(out[key], COMPARE[op](value, 5.0))


def test_equality_of_clones_is_all_true() -> None:
    td = make()
    assert (td == td.clone()).all() is True
    assert (td != td.clone()).any() is False


def test_equality_detects_a_difference() -> None:
    td = make()
    other = td.clone()
    other["b", "c"][0, 0] = -1
    assert (td == other).all() is False
    assert (td != other).any() is True


def test_equality_with_different_keys_raises() -> None:
    with pytest.raises(ShapeMismatchError, match="'a'"):
        make() == make().exclude("a")  # noqa: B015


def test_equality_with_none_is_false() -> None:
    assert (make() == None) is False  # noqa: E711
    assert (make() != None) is True  # noqa: E711


def test_truth_value_of_tensordict_raises() -> None:
    with pytest.raises(RuntimeError, match="all\\(\\)"):
        bool(make())


def test_equality_compares_non_tensor_data() -> None:
    x = TensorDict({"a": torch.ones(2), "s": "x"}, [2])
    y = TensorDict({"a": torch.ones(2), "s": "y"}, [2])
    assert (x == x.clone()).all() is True
    assert (x == y).all() is False


# ---------------------------------------------------------------------- all / any
def test_all_and_any_return_python_bools() -> None:
    td = make()
    assert (td > 0).all() is True
    assert (td > 100).any() is False
    assert (td > 20).any() is True


def test_all_with_dim_gives_tensordict() -> None:
    out = (make() > 2).all(dim=0)
    assert out.batch_size == torch.Size([3])
    assert torch.equal(out["a"], (make()["a"] > 2).all(dim=0))


# ---------------------------------------------------------------------- reductions
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1, (0, 1)])
def test_reduction_over_batch_dims_matches_leafwise(name: str, dim: Any) -> None:
    td = make()
    if name in ("max", "min"):
        if isinstance(dim, tuple):
            pytest.skip("max/min reduce one dim (a tuple: its first, as upstream)")
        out = getattr(td, name)(dim=dim, return_indices=False)
    else:
        out = getattr(td, name)(dim=dim)
    dims = (dim,) if isinstance(dim, int) else dim
    kept = [s for i, s in enumerate(td.batch_size) if i not in {d % 2 for d in dims}]
    assert out.batch_size == torch.Size(kept)
    torch_fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[name]
    for key, value in leaves(td).items():
        expected = torch_fn(value, dim=tuple(d % 2 for d in dims))
        assert torch.allclose(out[key], expected), key


def test_reduction_keepdim() -> None:
    out = make().sum(dim=0, keepdim=True)
    assert out.batch_size == torch.Size([1, 3]) and out["a"].shape == torch.Size([1, 3, 2])


def test_reduction_without_dim_reduces_each_leaf() -> None:
    out = make().sum()
    assert out.batch_size == torch.Size([]) and out["a"].item() == make()["a"].sum().item()


def test_reduction_without_dim_and_reduce_gives_a_tensor() -> None:
    assert make().sum(reduce=True).item() == make()["a"].sum().item() + make()["b", "c"].sum()


def test_reduction_dim_out_of_range_raises_naming_dim_and_batch_size() -> None:
    with pytest.raises(BatchSizeError) as info:
        make().sum(dim=2)
    assert "dim 2" in str(info.value) and "[4, 3]" in str(info.value)


# ---------------------------------------------------------------------- elementwise tests and casts
def test_isfinite_and_isnan() -> None:
    td = make() / 0
    assert (td.isfinite() == False).all()  # noqa: E712
    assert not td.isnan().any()
    assert (make() * float("nan")).isnan().all()


def test_torch_isfinite_dispatches() -> None:
    assert torch.isfinite(make()).all()


@pytest.mark.parametrize(
    ("method", "dtype"), [("float", torch.float32), ("int", torch.int32), ("bool", torch.bool)]
)
def test_dtype_shortcuts(method: str, dtype: torch.dtype) -> None:
    out = getattr(make(), method)()
    assert all(v.dtype == dtype for v in leaves(out).values())


def test_to_dtype() -> None:
    out = make().to(torch.float16)
    assert all(v.dtype == torch.float16 for v in leaves(out).values())


def test_casts_keep_non_tensor_data() -> None:
    td = TensorDict({"a": torch.ones(2), "s": "x"}, [2])
    assert td.int()["s"] == "x"


@pytest.mark.parametrize(
    "op",
    [operator.add, operator.eq, lambda a, b: a.maximum(b), lambda a, b: a.add_(b)],
)
def test_tensordicts_with_different_keys_raise_a_key_error(op: Callable[..., Any]) -> None:
    td = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2)}, [2])
    other = TensorDict({"a": torch.zeros(2), "c": torch.zeros(2)}, [2])
    with pytest.raises(KeyError, match=r"keys in tensordicts mismatch.*'b'.*'c'"):
        op(td, other)
    assert td["a"].eq(0).all()


class _Sub(TensorDict):
    pass


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t + t,
        lambda t: t * 2,
        lambda t: -t,
        lambda t: t.clone(),
        lambda t: t[0],
        lambda t: t.apply(lambda x: x),
        lambda t: t.sum(0),
        lambda t: torch.stack([t, t]),
        lambda t: torch.cat([t, t]),
        lambda t: t.unsqueeze(0),
        lambda t: t.select("a"),
        lambda t: t.float(),
        lambda t: t.unbind(0)[0],
    ],
)
def test_results_of_a_subclass_are_of_that_subclass(op: Callable[..., Any]) -> None:
    t = _Sub({"a": torch.zeros(3)}, [3])
    assert type(op(t)) is _Sub


def test_apply_returning_none_everywhere_gives_none_and_drops_emptied_nested() -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}, "e": {}}, [2])
    assert TensorDict({"a": torch.zeros(2)}, [2]).apply(lambda x: None) is None
    out = td.apply(lambda x: None)
    assert list(out.keys()) == ["e"]  # an empty source tensordict stays, an emptied one goes
    assert td.apply(lambda x: None, filter_empty=False) is not None
    assert td.named_apply(lambda k, x: None, filter_empty=True) is None


def test_apply_out_and_propagate_lock() -> None:
    td = TensorDict({"a": torch.arange(3)}, [3]).lock_()
    target = TensorDict({"a": torch.zeros(3)}, [3])
    assert td.apply(lambda x: x.float() + 1, out=target) is target
    assert target["a"].dtype == torch.float32 and target["a"].tolist() == [1.0, 2.0, 3.0]
    assert td.apply(lambda x: x, propagate_lock=True).is_locked
    assert not td.apply(lambda x: x).is_locked


@pytest.mark.parametrize("other", ["z", [1], None, (1,), object()])
def test_comparing_with_something_that_is_not_a_tensor_gives_a_bool(other: object) -> None:
    td = make()
    assert (td == other) is False and (td != other) is True


def test_comparing_with_a_dict_compares_entries() -> None:
    td = make()
    assert (td == td.to_dict()).all()


def test_feature_reduction_with_reduce_gives_one_tensor_of_the_batch_shape() -> None:
    td = make()  # leaves [4, 3, 2] and [4, 3]
    out = td.sum(dim="feature", reduce=True)
    assert torch.equal(out, td["a"].sum(-1) + td["b", "c"])


def test_non_tensor_entries_under_comparisons_with_a_number() -> None:
    td = TensorDict(a=torch.ones(2), s="x", batch_size=[2])
    equal = td == 1
    assert equal.all() and list(equal["s"].keys()) == []  # an empty tensordict: all() skips it
    assert (td < 2)["s"] == "x"  # carried over, as upstream
    other = td.clone()
    other["s"] = "y"
    assert (td == other)["s"].tolist() == [False, False]


def test_reduce_over_a_batch_dim_joins_the_leaves_along_it() -> None:
    td = TensorDict({"a": torch.ones(3, 4, 5), "n": {"c": torch.ones(3, 4, 5)}}, [3, 4])
    out = td.sum(dim=1, reduce=True)
    assert out.shape == (3, 5) and (out == 8).all()


def test_filter_empty_drops_a_tensorclass_left_with_only_non_tensor_fields() -> None:
    from tensordict import tensorclass

    @tensorclass
    class Pair:
        x: torch.Tensor
        label: str

    td = TensorDict(p=Pair(x=torch.zeros(3), label="a", batch_size=[3]), batch_size=[3])
    assert td.apply(lambda t: None, filter_empty=True) is None  # (as upstream)
    kept = td.apply(lambda t: t + 1, filter_empty=True)
    assert kept.get("p").label == "a" and (kept.get("p").x == 1).all()


def test_named_and_fast_apply_call_fn_on_non_tensor_leaves_with_is_leaf() -> None:
    # TorchRL's _skip_tensordict copies every leaf, strings included, through _fast_apply
    from tensordict.base import _is_leaf_nontensor

    td = TensorDict({"obs": torch.zeros(1), "s": "x", "n": {"t": "y"}}, [])
    other = TensorDict({"obs": torch.ones(1), "s": "zero", "n": {"t": "z"}}, [])
    seen: list = []

    def record(name, x, y):
        seen.append((name, type(x).__name__, y.data if hasattr(y, "data") else None))
        return x.clone()

    out = td._fast_apply(
        record, other, default=None, is_leaf=_is_leaf_nontensor, named=True, nested_keys=True
    )
    assert ("s", "NonTensorData", "zero") in seen and (("n", "t"), "NonTensorData", "z") in seen
    assert out["s"] == "x" and out["n", "t"] == "y"
    names: list = []
    td.named_apply(lambda n, x: names.append(n) or x, nested_keys=True, is_leaf=_is_leaf_nontensor)
    assert names == ["obs", "s", ("n", "t")]
    names.clear()
    td.named_apply(lambda n, x: names.append(n) or x, nested_keys=True)
    assert names == ["obs"]


def test_apply_to_a_new_batch_size_drops_a_stack_of_different_objects() -> None:
    # as upstream: TorchRL's batched envs index a step's data with a mask through apply
    td = TensorDict({"obs": torch.zeros(2, 1), "s": NonTensorStack("a", "b")}, [2])
    mask = torch.tensor([False, True])
    out = td.apply(lambda x: x[mask], batch_size=[1])
    assert out.batch_size == (1,) and set(out.keys()) == {"obs"}
    same = TensorDict({"obs": torch.zeros(2, 1), "s": NonTensorStack("a", "a")}, [2])
    assert same.apply(lambda x: x[mask], batch_size=[1])["s"] == "a"


def test_apply_builds_a_ragged_batch_of_nested_tensors() -> None:
    # TorchRL's split_trajectories(as_nested=True): batch_size=[n, -1] over nested leaves
    td = TensorDict({"a": torch.arange(5.0)}, [5])
    sizes = [2, 3]

    def nest(x):
        return torch.nested.nested_tensor(list(x.split(sizes)))

    out = td.apply(nest, batch_size=[2, -1])
    assert out.batch_size == (2, -1) and out["a"].is_nested
    assert [t.tolist() for t in out["a"].unbind()] == [[0.0, 1.0], [2.0, 3.0, 4.0]]


def test_named_apply_sets_the_result_device() -> None:
    # TorchRL's DeviceCastTransform: named_apply(..., device=None) leaves the result deviceless
    td = TensorDict({"a": torch.zeros(1), "n": {"b": torch.zeros(1)}}, [], device="cpu")
    out = td.named_apply(lambda name, x: x + 1, nested_keys=True, device=None)
    assert out.device is None and out["n"].device is None and out["a"].tolist() == [1.0]
    assert td.apply(lambda n, x: x, named=True, device=None).device is None
    assert td.named_apply(lambda name, x: x).device == torch.device("cpu")
