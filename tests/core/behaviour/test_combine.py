"""stack / cat / split / chunk / unbind and the torch functions dispatched on TensorDicts."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import tensordict
import tensordict._torch_func
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict, tensorclass
from tensordict.errors import BatchSizeError, KeyMismatchError, ShapeMismatchError


def make(offset: float = 0.0) -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(24.0).reshape(4, 3, 2) + offset,
            "b": {"c": torch.arange(12).reshape(4, 3)},
            "n": TensorDict({"x": torch.zeros(4, 3, 5)}, [4, 3, 5]),
        },
        [4, 3],
    )


# ---------------------------------------------------------------------- split / chunk / unbind
def test_split_int() -> None:
    parts = make().split(3, 0)
    assert [p.batch_size for p in parts] == [torch.Size([3, 3]), torch.Size([1, 3])]
    assert torch.equal(parts[1]["a"], make()["a"][3:])


def test_split_list_along_negative_dim() -> None:
    parts = make().split([1, 2], -1)
    assert [p.batch_size for p in parts] == [torch.Size([4, 1]), torch.Size([4, 2])]
    assert torch.equal(parts[1]["b", "c"], make()["b", "c"][:, 1:])
    assert parts[1]["n"].batch_size == torch.Size([4, 2, 5])


def test_split_sizes_not_summing_to_dim_raise_naming_batch_size_and_dim() -> None:
    with pytest.raises(BatchSizeError) as info:
        make().split([1, 1], 1)
    assert "[4, 3]" in str(info.value) and "dim 1" in str(info.value)


def test_split_non_positive_size_raises() -> None:
    with pytest.raises(ValueError, match="split_size"):
        make().split(0)


def test_split_results_are_views() -> None:
    td = make()
    td.split(2)[1]["a"].zero_()
    assert td["a"][2:].sum() == 0 and td["a"][:2].sum() > 0


def test_chunk_like_torch_chunk() -> None:
    td = TensorDict({"x": torch.arange(10)}, [10])
    parts = td.chunk(3)
    expected = torch.arange(10).chunk(3)
    assert [p["x"].tolist() for p in parts] == [e.tolist() for e in expected]


def test_chunk_along_dim() -> None:
    assert [p.batch_size[1] for p in make().chunk(2, 1)] == [2, 1]


def test_unbind() -> None:
    rows = make().unbind(1)
    assert len(rows) == 3 and rows[0].batch_size == torch.Size([4])
    assert torch.equal(rows[2]["a"], make()["a"][:, 2])


def test_unbind_results_are_views() -> None:
    td = make()
    td.unbind(0)[0]["a"].zero_()
    assert td["a"][0].sum() == 0


def test_unbind_pieces_refuse_an_in_place_write_that_needs_grad_as_upstream() -> None:
    # (torch.unbind's views, as upstream: TorchRL's SerialEnv turns this error into its advice
    # to set share_individual_td=True; an indexing view made the whole leaf require grad)
    td = TensorDict({"a": torch.zeros(2, 3), "n": {"b": torch.zeros(2)}}, [2], names=["env"])
    td.lock_()
    first = td.unbind(0)[0]
    assert first.is_locked and first["n"].batch_size == torch.Size([]) and first.names == []
    with pytest.raises(RuntimeError, match="no_grad mode"):
        first["a"].copy_(torch.ones(3, requires_grad=True))
    assert not td["a"].requires_grad
    with torch.no_grad():
        first["n", "b"].copy_(torch.ones(()))
    assert td["n", "b"].tolist() == [1.0, 0.0]


def test_unbind_out_of_range_raises_naming_dim() -> None:
    with pytest.raises(BatchSizeError, match="dim 2"):
        make().unbind(2)


# ---------------------------------------------------------------------- stack
def test_torch_stack_of_identical_structures_is_dense() -> None:
    out = torch.stack([make(), make(1.0)], 0)
    assert type(out) is TensorDict
    assert out.batch_size == torch.Size([2, 4, 3])
    assert torch.equal(out["a"], torch.stack([make()["a"], make(1.0)["a"]]))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_torch_stack_dims(dim: int) -> None:
    out = torch.stack([make(), make(1.0)], dim)
    expected = torch.stack([make()["a"], make(1.0)["a"]], dim if dim >= 0 else dim - 1)
    assert torch.equal(out["a"], expected)
    assert out["n"].batch_size == out.batch_size + torch.Size([5])


def test_stack_copies() -> None:
    td = make()
    torch.stack([td[0], td[1]])["a"].zero_()
    assert torch.equal(td["a"], make()["a"])


def test_tensordict_stack_classmethod() -> None:
    assert TensorDict.stack([make(), make()], 1).batch_size == torch.Size([4, 2, 3])


def test_stack_different_batch_sizes_raises_naming_them() -> None:
    with pytest.raises(ShapeMismatchError) as info:
        torch.stack([make(), make()[:2]])
    assert "[4, 3]" in str(info.value) and "[2, 3]" in str(info.value)


def test_stack_dim_out_of_range_raises() -> None:
    with pytest.raises(BatchSizeError, match="dim 3"):
        torch.stack([make(), make()], 3)


# torch.stack refuses members that differ, as upstream (TorchRL's rollout reads these messages:
# it matches their first words to explain which env output is at fault)
KEYS_DIFFER = "The sets of keys in the tensordicts to stack are exclusive"
SHAPES_DIFFER = "The shapes of the tensors to stack is incompatible"


@pytest.mark.parametrize(
    "stack_fn",
    [torch.stack, TensorDict.stack, tensordict.stack, tensordict._torch_func._stack],
    ids=["torch.stack", "TensorDict.stack", "tensordict.stack", "_torch_func._stack"],
)
def test_stack_of_members_with_different_keys_raises_naming_them(stack_fn: Any) -> None:
    with pytest.raises(KeyMismatchError, match=f"^{KEYS_DIFFER}") as info:
        stack_fn([make(), make().exclude("a")], 0)
    assert isinstance(info.value, RuntimeError)  # what upstream raises
    assert "Member 1 lacks ['a']" in str(info.value)
    assert "maybe_dense_stack" in str(info.value)


def test_stack_of_members_whose_nested_keys_differ_raises() -> None:
    other = make()
    other["b", "d"] = torch.zeros(4, 3)
    with pytest.raises(KeyMismatchError, match=f"^{KEYS_DIFFER}") as info:
        torch.stack([make(), other], 1)
    assert "has ['d']" in str(info.value)


def test_stack_of_an_empty_nested_tensordict_and_none_raises() -> None:
    with pytest.raises(KeyMismatchError, match=f"^{KEYS_DIFFER}"):
        torch.stack([TensorDict(a=torch.zeros(1), s=TensorDict()), TensorDict(a=torch.zeros(1))])


@pytest.mark.parametrize(
    ("second", "shapes"),
    [
        (torch.zeros(4), "torch.Size([4]) vs torch.Size([3])"),
        (TensorDict(x=torch.zeros(3)), "torch.Size([]) vs torch.Size([3])"),
        (NonTensorData("s"), "torch.Size([]) vs torch.Size([3])"),
    ],
    ids=["tensor", "tensordict", "non-tensor"],
)
def test_stack_of_entries_of_different_shapes_raises_naming_the_key(
    second: Any, shapes: str
) -> None:
    members = [TensorDict(n=TensorDict(a=torch.zeros(3))), TensorDict(n=TensorDict(a=second))]
    with pytest.raises(ShapeMismatchError, match=f"^{SHAPES_DIFFER}") as info:
        torch.stack(members)
    assert f"{shapes} for key a" in str(info.value)


def test_stack_of_lazy_stacks_stacks_member_by_member_and_refuses_members_that_differ() -> None:
    a, c = make(), make().exclude("a")
    mixed = LazyStackedTensorDict.lazy_stack([a, c])
    out = torch.stack([mixed, mixed.clone()])
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == torch.Size([2, 2, 4, 3])
    swapped = LazyStackedTensorDict.lazy_stack([c, a])  # same common keys, members differ
    with pytest.raises(KeyMismatchError, match=f"^{KEYS_DIFFER}"):
        torch.stack([mixed, swapped])


def test_stack_of_a_lazy_stack_and_a_dense_member_with_its_common_keys_is_dense() -> None:
    mixed = LazyStackedTensorDict.lazy_stack([make(), make().exclude("a")])
    dense = mixed.to_tensordict()
    assert set(dense.keys()) == {"b", "n"}
    out = torch.stack([mixed, dense])
    assert isinstance(out, TensorDict) and out.batch_size == torch.Size([2, 2, 4, 3])


def test_stack_of_tensorclasses_whose_fields_are_set_differently_raises() -> None:
    @tensorclass
    class Pair:
        x: torch.Tensor
        y: Any = None

    with pytest.raises(KeyMismatchError, match=f"^{KEYS_DIFFER}"):
        torch.stack([Pair(x=torch.zeros(2)), Pair(x=torch.zeros(2), y=torch.ones(2))])


def test_lazy_stack_maybe_dense_stack_and_the_lenient_flag_stack_members_that_differ() -> None:
    members = [make(), make().exclude("a")]
    assert isinstance(LazyStackedTensorDict.lazy_stack(members), LazyStackedTensorDict)
    assert isinstance(LazyStackedTensorDict.maybe_dense_stack(members), LazyStackedTensorDict)
    lenient = tensordict._torch_func._stack(members, 0, maybe_dense_stack=True)
    assert isinstance(lenient, LazyStackedTensorDict) and "a" in lenient.tensordicts[0]
    shapes = [TensorDict({"a": torch.zeros(3)}), TensorDict({"a": torch.zeros(4)})]
    assert isinstance(LazyStackedTensorDict.maybe_dense_stack(shapes), LazyStackedTensorDict)


def _members() -> list[TensorDict]:
    return [
        TensorDict(
            a=torch.full((3,), float(i)),
            b=torch.ones(3),
            n={"x": torch.zeros(3), "y": torch.ones(3)},
            batch_size=[3],
        )
        for i in range(2)
    ]


def _out(**entries: Any) -> TensorDict:
    return TensorDict(entries, batch_size=[2, 3])


def test_stack_into_an_out_with_fewer_keys_writes_only_its_keys() -> None:
    out = _out(a=torch.full((2, 3), 5.0), n=_out(x=torch.full((2, 3), 5.0)))
    res = torch.stack(_members(), 0, out=out)
    assert res is out
    assert set(out.keys(True, True)) == {"a", ("n", "x")}
    assert out["a"].tolist() == [[0.0] * 3, [1.0] * 3] and out["n", "x"].eq(0).all()
    for entry in (TensorDict.stack, tensordict.stack, LazyStackedTensorDict.maybe_dense_stack):
        out = _out(a=torch.full((2, 3), 5.0))
        assert entry(_members(), 0, out=out) is out and list(out.keys()) == ["a"]
        assert out["a"][1].eq(1).all()


def test_stack_into_an_out_with_more_keys_leaves_the_others_alone() -> None:
    out = _out(a=torch.zeros(2, 3), b=torch.zeros(2, 3), c=torch.full((2, 3), 7.0))
    out["n"] = _out(x=torch.ones(2, 3), y=torch.zeros(2, 3), z=torch.full((2, 3), 7.0))
    torch.stack(_members(), 0, out=out)
    assert out["c"].eq(7).all() and out["n", "z"].eq(7).all() and out["n", "y"].eq(1).all()
    missing_sub = _out(a=torch.zeros(2, 3))
    torch.stack(_members(), 0, out=missing_sub)
    assert list(missing_sub.keys()) == ["a"]


def test_stack_into_a_lazy_out_or_a_tensorclass_out_writes_only_its_keys() -> None:
    lazy = LazyStackedTensorDict(
        *[TensorDict(a=torch.full((3,), 5.0), batch_size=[3]) for _ in range(2)], stack_dim=0
    )
    assert torch.stack(_members(), 0, out=lazy) is lazy
    assert list(lazy.keys()) == ["a"] and lazy["a"][1].eq(1).all()

    @tensorclass
    class Pair:
        a: torch.Tensor
        b: Any = None

    members = [Pair(a=torch.zeros(3), b=torch.ones(3), batch_size=[3]) for _ in range(2)]
    out = Pair(a=torch.full((2, 3), 5.0), batch_size=[2, 3])
    torch.stack(members, 0, out=out)
    assert out.b is None and out.a.eq(0).all()


@pytest.mark.parametrize(
    "entry",
    [
        TensorDict.stack,
        LazyStackedTensorDict.stack,
        tensordict.stack,
        TensorDict.lazy_stack,
        LazyStackedTensorDict.lazy_stack,
        tensordict.lazy_stack,
        TensorDict.maybe_dense_stack,
        LazyStackedTensorDict.maybe_dense_stack,
        tensordict.maybe_dense_stack,
    ],
)
@pytest.mark.parametrize("keyword", ["maybe_dense_stack", "contiguous", "foo"])
def test_stack_entry_points_refuse_keywords_upstream_refuses(entry: Any, keyword: str) -> None:
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{keyword}'"):
        entry(_members(), 0, **{keyword: True})


def test_stack_entry_points_refuse_the_keywords_of_the_lazy_one_only() -> None:
    for entry in (TensorDict.stack, tensordict.stack, tensordict.maybe_dense_stack):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            entry(_members(), 0, strict_shape=True)
    for entry in (TensorDict.stack, tensordict.stack):
        with pytest.raises(TypeError, match="unexpected keyword argument 'strict'"):
            entry(_members(), 0, strict=True)
    assert isinstance(tensordict.maybe_dense_stack(_members(), strict=True), TensorDict)
    named = tensordict.lazy_stack(_members(), 0, strict_shape=True, stack_dim_name="env")
    assert named.names == ["env", None]


def test_stack_in_legacy_lazy_mode_stacks_members_that_differ_lazily() -> None:
    with pytest.warns(DeprecationWarning), tensordict.set_lazy_legacy(True):
        out = torch.stack([make(), make().exclude("a")])
    assert isinstance(out, LazyStackedTensorDict)


def test_stack_into_out() -> None:
    out = make()[:2].clone().zero_()
    res = TensorDict.stack([make()[2], make()[3]], 0, out=out)
    assert res is out and torch.equal(out["a"], make()["a"][2:])


def test_stack_of_equal_non_tensor_values_is_a_stack_as_upstream() -> None:
    out = torch.stack([TensorDict({"s": "a"}), TensorDict({"s": "a"})])
    assert not isinstance(out.get("s"), NonTensorData) and out["s"] == ["a", "a"]


# ---------------------------------------------------------------------- cat
def test_torch_cat() -> None:
    out = torch.cat([make(), make(1.0)], 0)
    assert out.batch_size == torch.Size([8, 3])
    assert torch.equal(out["a"], torch.cat([make()["a"], make(1.0)["a"]]))
    assert out["n"].batch_size == torch.Size([8, 3, 5])


def test_torch_cat_negative_dim() -> None:
    out = torch.cat([make(), make()], -1)
    assert out.batch_size == torch.Size([4, 6]) and out["a"].shape == torch.Size([4, 6, 2])


def test_cat_of_slices_gives_back_source() -> None:
    td = make()
    assert (torch.cat([td[:1], td[1:]]) == td).all()


def test_tensordict_cat_classmethod() -> None:
    assert TensorDict.cat([make(), make()], 0).batch_size == torch.Size([8, 3])


def test_cat_different_keys_raises_naming_keys() -> None:
    with pytest.raises(ShapeMismatchError) as info:
        torch.cat([make(), make().exclude("a")])
    assert "'a'" in str(info.value)


def test_cat_different_batch_sizes_raises_naming_them() -> None:
    with pytest.raises(ShapeMismatchError) as info:
        torch.cat([make(), make()[:, :2]], 0)
    assert "[4, 3]" in str(info.value) and "[4, 2]" in str(info.value)


def test_cat_0d_raises() -> None:
    with pytest.raises(BatchSizeError, match="stack"):
        torch.cat([TensorDict(), TensorDict()])


def test_cat_into_out() -> None:
    out = make(5.0)
    res = TensorDict.cat([make()[:2], make()[2:]], 0, out=out)
    assert res is out and torch.equal(out["a"], make()["a"])


# ---------------------------------------------------------------------- other torch functions
def test_torch_split() -> None:
    parts = torch.split(make(), [1, 3])
    assert [p.batch_size[0] for p in parts] == [1, 3]


def test_torch_split_with_dim() -> None:
    parts = torch.split(make(), 2, dim=1)
    assert [p.batch_size[1] for p in parts] == [2, 1]


def test_torch_unbind() -> None:
    assert len(torch.unbind(make(), 1)) == 3


def test_torch_zeros_like() -> None:
    out = torch.zeros_like(make())
    assert out["a"].sum() == 0 and out["b", "c"].dtype == torch.int64
    assert out.batch_size == torch.Size([4, 3])


def test_torch_ones_like() -> None:
    out = torch.ones_like(make())
    assert (out["b", "c"] == 1).all() and (out["n", "x"] == 1).all()


def test_torch_empty_like() -> None:
    out = torch.empty_like(make())
    assert out["a"].shape == torch.Size([4, 3, 2]) and out["a"].data_ptr() != make()["a"].data_ptr()


def test_torch_full_like() -> None:
    out = torch.full_like(make(), 3)
    assert (out["a"] == 3).all() and (out["b", "c"] == 3).all()


def test_torch_clone() -> None:
    td = make()
    out = torch.clone(td)
    assert out["a"] is not td["a"] and (out == td).all()


def test_torch_where_with_batch_shaped_condition() -> None:
    td = make()
    cond = torch.tensor([True, False, True, False]).unsqueeze(-1).expand(4, 3)
    out = torch.where(cond, td, torch.zeros_like(td))
    expected = torch.where(cond.unsqueeze(-1), td["a"], torch.zeros(()))
    assert torch.equal(out["a"], expected)
    assert torch.equal(out["b", "c"], torch.where(cond, td["b", "c"], 0))


def test_torch_where_with_scalar_other() -> None:
    td = make()
    cond = td["b", "c"] > 5
    out = torch.where(cond, td, 0)
    assert torch.equal(out["b", "c"], torch.where(cond, td["b", "c"], 0))


def test_torch_where_with_scalar_input() -> None:
    td = make()
    cond = td["b", "c"] > 5
    out = torch.where(cond, -1, td)
    assert torch.equal(out["b", "c"], torch.where(cond, -1, td["b", "c"]))


def test_unsupported_torch_function_raises_type_error() -> None:
    with pytest.raises(TypeError):
        torch.sort(make())  # type: ignore[call-overload]


def test_torch_reductions_maximum_masked_select_and_flip_dispatch_to_the_methods() -> None:
    td = TensorDict({"a": torch.arange(6.0).reshape(3, 2), "n": {"b": torch.ones(3)}}, [3])
    assert torch.equal(torch.mean(td, dim=0)["a"], td.mean(dim=0)["a"])
    assert torch.equal(torch.sum(td)["a"], td["a"].sum())
    assert torch.equal(torch.var(td, dim=0)["a"], td["a"].var(0))
    assert torch.equal(torch.std(td)["n", "b"], td["n", "b"].std())
    assert torch.masked_select(td, torch.tensor([True, False, True])).batch_size == (2,)
    assert torch.equal(torch.maximum(td, td + 1)["a"], td["a"] + 1)
    assert torch.equal(torch.flip(td, [0])["a"], td["a"].flip(0))


@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "smooth_l1_loss"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_losses_of_two_tensordicts_are_taken_entry_by_entry(name: str, reduction: str) -> None:
    fn = getattr(torch.nn.functional, name)
    td = TensorDict({"a": torch.randn(3, 2), "n": {"b": torch.randn(3)}}, [3])
    other = td.apply(lambda x: x * 2)
    out = fn(td, other, reduction=reduction)
    for key in ["a", ("n", "b")]:
        assert torch.equal(out[key], fn(td[key], other[key], reduction=reduction)), key


def test_autograd_grad_of_tensordicts_matches_entries_by_key() -> None:
    inputs = TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3, 2)}}, [3]).requires_grad_()
    outputs = inputs * 3
    grads = torch.autograd.grad(outputs, inputs, torch.ones_like(outputs))
    assert (grads == 3).all() and grads["n", "b"].shape == (3, 2)


def test_stack_into_an_out_of_another_batch_size_writes_nothing() -> None:
    td = TensorDict(a=torch.ones(4), batch_size=[4])
    out = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4])
    with pytest.raises(ShapeMismatchError, match=r"out\.batch_size and stacked batch size"):
        torch.stack([td, td], 0, out=out)
    assert (out["a"] == 0).all()


@tensorclass
class _Pair:
    x: torch.Tensor
    inner: Any = None
    label: str = "p"


def test_where_over_a_tensorclass_takes_the_matching_leaf_of_the_other_operand() -> None:
    def make_pair(v: float) -> _Pair:
        inner = _Pair(x=torch.full((4,), v), batch_size=[4])
        return _Pair(x=torch.full((4, 2), v), inner=inner, batch_size=[4])

    mask = torch.tensor([True, False, True, False])
    td = TensorDict({"p": make_pair(1.0), "a": torch.ones(4)}, [4])
    other = TensorDict({"p": make_pair(5.0), "a": torch.full((4,), 5.0)}, [4])
    out = torch.where(mask, td, other)
    assert isinstance(out["p"].x, torch.Tensor)  # (it was a _Pair: the whole operand was used)
    assert out["p"].x[:, 0].tolist() == [1.0, 5.0, 1.0, 5.0]
    assert out["p"].inner.x.tolist() == [1.0, 5.0, 1.0, 5.0] and out["p"].label == "p"
    flipped = torch.where(mask, 0.0, td)  # a number first: the tensordict fills the rest
    assert flipped["p"].x[:, 1].tolist() == [0.0, 1.0, 0.0, 1.0]
    target = td.clone()
    torch.where(mask, td, other, out=target)  # written in place through the tensorclass
    assert target["p"].inner.x.tolist() == [1.0, 5.0, 1.0, 5.0]


def test_a_tensorclass_compares_equal_to_its_dict_and_tensordict_forms() -> None:
    # fields held as None (inner, label here) appear as None entries once converted; they are
    # not missing keys (as upstream); a real extra key still is
    from tensordict.errors import KeyMismatchError

    pair = _Pair(x=torch.ones(4, 2), inner=_Pair(x=torch.ones(4), batch_size=[4]), batch_size=[4])
    pair.inner.label = None
    td = TensorDict({"p": pair, "a": torch.ones(4)}, [4])
    as_dict = td.to_dict()
    assert as_dict["p"]["inner"]["inner"] is None
    assert (td == as_dict).all()
    assert (TensorDict.from_dict(as_dict, auto_batch_size=False) == td).all()
    assert (pair.inner == TensorDict({"x": torch.ones(4), "inner": None}, [4])).all()
    assert not (
        td == TensorDict.from_dict(as_dict, auto_batch_size=False).apply(lambda x: x * 2)
    ).all()
    with pytest.raises(KeyMismatchError):
        _ = pair.inner == TensorDict({"x": torch.ones(4), "w": torch.ones(4)}, [4])


@tensorclass
class _Nest:
    X: torch.Tensor
    z: str
    y: Any = None


def test_maybe_dense_stack_of_tensorclasses_whose_shapes_differ_is_lazy_and_keeps_the_class():
    # torch.stack refuses them (as upstream); maybe_dense_stack keeps the members apart
    def make(last: int) -> _Nest:
        inner = _Nest(X=torch.ones(3, 4, last), z="t", batch_size=[3, 4])
        return _Nest(X=torch.ones(3, 4, last), z="t", y=inner, batch_size=[3, 4])

    a, b = make(5), make(4)
    out = LazyStackedTensorDict.maybe_dense_stack([a, b], 0)
    assert type(out) is _Nest and type(out.y) is _Nest
    assert out[0].X.shape == (3, 4, 5) and out[1].y.X.shape == (3, 4, 4)
    with pytest.raises(RuntimeError):
        torch.stack([a, b], 0)


@tensorclass
class _Turn:
    x: torch.Tensor


def test_maybe_dense_stack_of_tensorclass_entries_that_differ() -> None:
    # TorchRL's batched envs stack per-env outputs holding tensorclasses (a chat history)
    a = TensorDict(
        h=_Turn(x=torch.zeros(2, 2), batch_size=[2, 2]), y=torch.zeros(2), batch_size=[2]
    )
    b = TensorDict(h=_Turn(x=torch.ones(2, 3), batch_size=[2, 3]), y=torch.ones(2), batch_size=[2])
    # different batch sizes: a lazy stack, whose entry is still the tensorclass
    out = LazyStackedTensorDict.maybe_dense_stack([a, b], 1)
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == (2, 2)
    assert type(out["h"]) is _Turn
    with pytest.raises(ShapeMismatchError):
        torch.stack([a, b], 1)
    # same batch size, leaves that differ: dense, the tensorclass wrapping a lazy stack
    c = TensorDict(h=_Turn(x=torch.zeros(2, 5), batch_size=[2]), batch_size=[2])
    d = TensorDict(h=_Turn(x=torch.ones(2, 6), batch_size=[2]), batch_size=[2])
    out = LazyStackedTensorDict.maybe_dense_stack([c, d], 0)
    assert type(out) is TensorDict and type(out["h"]) is _Turn
    assert isinstance(out["h"]._tensordict, LazyStackedTensorDict)
    assert out["h"][1].x.shape == (2, 6)
