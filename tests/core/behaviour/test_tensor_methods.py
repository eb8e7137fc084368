"""Masks, where, scans, autograd helpers, new_* and introspection (core/tensor_methods.py)."""

from __future__ import annotations

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    set_capture_non_tensor_stack,
    tensorclass,
)
from tensordict.errors import BatchSizeError


def make() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(6.0).reshape(3, 2), "n": {"i": torch.arange(3)}}, batch_size=[3]
    )


MASK = torch.tensor([True, False, True])


def test_masked_fill_writes_where_the_batch_mask_is_true() -> None:
    td = make()
    out = td.masked_fill(MASK, -1)
    assert out["a"].tolist() == [[-1, -1], [2, 3], [-1, -1]]
    assert out["n", "i"].tolist() == [-1, 1, -1]
    assert td["a"][0, 0] == 0  # the copy, not the source
    assert td.masked_fill_(MASK, 7) is td and td["n", "i"].tolist() == [7, 1, 7]


def test_masked_fill_refuses_a_mask_that_is_not_batch_shaped() -> None:
    td = make()
    with pytest.raises(BatchSizeError, match=r"leading batch dims \[3\]"):
        td.masked_fill_(torch.tensor([True, False]), 0)
    with pytest.raises(BatchSizeError):
        td.masked_fill_(torch.tensor([1, 0, 1]), 0)  # not bool
    assert (td == make()).all()


def test_masked_select_is_boolean_indexing() -> None:
    td = make()
    out = td.masked_select(MASK)
    assert out.batch_size == (2,) and torch.equal(out["a"], td["a"][MASK])


def test_where_with_a_number_and_with_a_tensordict() -> None:
    td = make()
    assert td.where(MASK, 0)["a"][:, 0].tolist() == [0, 0, 4]
    other = td * 10
    picked = td.where(MASK, other)
    assert picked["n", "i"].tolist() == [0, 10, 2]
    out = td.clone()
    assert td.where(~MASK, other, out=out) is out and out["n", "i"].tolist() == [0, 1, 20]
    with pytest.raises(BatchSizeError):
        td.where(torch.tensor([True]), 0)


def test_where_into_out_replaces_its_leaves_as_upstream() -> None:
    # (TorchRL's partial resets: `node.where(~reset, other=reset_td, out=node)` must not write
    # into the tensors of the step it recorded before)
    td = make()
    recorded_a, recorded_i = td["a"], td["n", "i"]
    nested = td["n"]
    assert td.where(MASK, td * 0, out=td) is td
    assert td["a"].tolist() == [[0, 1], [0, 0], [4, 5]] and td["n", "i"].tolist() == [0, 0, 2]
    assert recorded_a.tolist() == make()["a"].tolist()
    assert recorded_i.tolist() == [0, 1, 2]
    assert td["n"] is nested  # nested tensordicts stay, their leaves are replaced


def test_where_on_a_lazy_stack() -> None:
    lz = LazyStackedTensorDict(
        TensorDict({"x": torch.ones(2)}, [2]), TensorDict({"x": torch.ones(2)}, [2])
    )
    out = lz.where(torch.tensor([[True, False], [False, True]]), 0)
    assert out["x"].tolist() == [[1, 0], [0, 1]]


def test_cumsum_and_softmax_run_along_a_batch_dim() -> None:
    td = make()
    assert td.cumsum(0)["n", "i"].tolist() == [0, 1, 3]
    assert torch.allclose(td.float().softmax(0)["a"].sum(0), torch.ones(2))
    with pytest.raises(BatchSizeError, match="dim 1"):
        td.cumsum(1)  # a feature dim of "a", not a batch dim


def test_clamp_min_and_max() -> None:
    td = make()
    assert td.clamp_min(2)["n", "i"].tolist() == [2, 2, 2]
    assert td.clamp_max(1)["n", "i"].tolist() == [0, 1, 1]


def test_autograd_helpers() -> None:
    td = TensorDict({"w": torch.ones(2), "b": torch.zeros(2)}, [2])
    assert not td.requires_grad
    td.requires_grad_()
    assert td.requires_grad and all(t.requires_grad for t in td.values())
    (td["w"] * 2 + td["b"]).sum().backward()
    assert td["w"].grad.tolist() == [2.0, 2.0]
    assert not td.data.requires_grad and td.data["w"].data_ptr() == td["w"].data_ptr()
    td.zero_grad(set_to_none=False)
    assert td["w"].grad.tolist() == [0.0, 0.0]
    td.zero_grad()
    assert td["w"].grad is None


def test_new_constructors_keep_keys_dtypes_and_trailing_shapes() -> None:
    td = make()
    z = td.new_zeros(5)
    assert z.batch_size == (5,) and z["a"].shape == (5, 2) and z["n", "i"].dtype == torch.long
    assert td.new_ones(2, 4)["a"].shape == (2, 4, 2)
    assert td.new_full([2], 3.0)["n", "i"].tolist() == [3, 3]
    assert td.new_empty((1,), dtype=torch.float64)["n", "i"].dtype == torch.float64


def test_introspection() -> None:
    td = make()
    assert td.dtype is None and td.select("a").dtype == torch.float32
    assert td.entry_class("n") is TensorDict and td.entry_class("a") is torch.Tensor
    assert (
        td.is_contiguous() and not td.apply(lambda x: x.t() if x.ndim == 2 else x).is_contiguous()
    )
    assert td.param_count() == 9 and td.bytes() == 6 * 4 + 3 * 8
    t = torch.zeros(4)
    shared = TensorDict({"x": t, "y": t}, [4])
    assert shared.bytes() == 16 and shared.bytes(count_duplicates=True) == 32


@tensorclass
class Item:
    data: torch.Tensor  # "data" is a field name tensorclasses may use, as upstream
    label: torch.Tensor


def test_tensorclasses_answer_the_new_methods() -> None:
    item = Item(data=torch.arange(3.0), label=torch.zeros(3), batch_size=[3])
    assert item.data.tolist() == [0.0, 1.0, 2.0]  # the field, not TensorDict.data
    filled = item.masked_fill(MASK, 9)
    assert type(filled) is Item and filled.data.tolist() == [9, 1, 9]
    assert type(item.new_zeros(2)) is Item and item.dtype == torch.float32
    assert item.masked_fill_(MASK, 0) is item and item.bytes() == 24


@pytest.mark.parametrize(
    "name", ["log1p", "expm1", "sin", "cos", "tanh", "floor", "ceil", "round", "trunc", "frac"]
)
def test_unary_maths_match_torch_per_entry(name: str) -> None:
    td = TensorDict({"a": torch.linspace(-2, 2, 6).reshape(3, 2), "n": {"b": torch.rand(3)}}, [3])
    fn = getattr(torch, name)
    out = getattr(td, name)()
    assert torch.allclose(out["a"], fn(td["a"]), equal_nan=True)
    assert torch.allclose(out["n", "b"], fn(td["n", "b"]))
    copy = td.clone()
    assert getattr(copy, name + "_")() is copy
    assert torch.allclose(copy["a"], out["a"], equal_nan=True)


def test_inplace_unary_on_an_integer_entry_changes_nothing() -> None:
    from tensordict.errors import DTypeCastError

    td = TensorDict({"f": torch.ones(3), "i": torch.ones(3, dtype=torch.long)}, [3])
    with pytest.raises(DTypeCastError, match=r"sin_\(\).*torch.int64"):
        td.sin_()
    assert td["f"].tolist() == [1.0, 1.0, 1.0]
    td.floor_()  # floor keeps integers as they are
    assert td["i"].dtype == torch.long


def test_nan_to_num_with_arguments() -> None:
    td = TensorDict({"a": torch.tensor([float("nan"), 1.0])}, [2])
    assert td.nan_to_num(nan=-1.0)["a"].tolist() == [-1.0, 1.0]
    td.nan_to_num_(0.0)
    assert td["a"].tolist() == [0.0, 1.0]


def test_binary_maths_with_a_tensordict_or_a_number() -> None:
    td = make().float()
    assert td.maximum(2)["n", "i"].tolist() == [2, 2, 2]
    assert td.minimum(td * 0 + 1)["n", "i"].tolist() == [0, 1, 1]
    flags = TensorDict({"x": torch.tensor([True, False])}, [2])
    assert flags.logical_and(True)["x"].tolist() == [True, False]
    assert flags.logical_or(flags.logical_xor(True))["x"].tolist() == [True, True]
    assert td.isclose(td + 1e-9)["a"].all() and td.allclose(td + 1e-9)
    assert not td.allclose(td + 1)
    assert td.is_floating_point() and not make().is_floating_point()


def test_argmax_and_argmin_along_a_batch_dim() -> None:
    td = TensorDict({"x": torch.tensor([[1, 5], [7, 0]])}, [2, 2])
    assert td.argmax(1)["x"].tolist() == [1, 0] and td.argmax(1).batch_size == (2,)
    assert td.argmin(0, keepdim=True)["x"].tolist() == [[0, 1]]
    assert td.argmin(0, keepdim=True).batch_size == (1, 2)


def test_reshape_as_view_as_separates_and_numpy() -> None:
    td = TensorDict({"x": torch.arange(6), "y": torch.zeros(6, 2)}, [6])
    assert td.reshape_as(torch.zeros(2, 3)).batch_size == (2, 3)
    assert td.view_as(TensorDict({}, [3, 2])).batch_size == (3, 2)
    arrays = td.numpy()
    arrays["x"][0] = 42
    assert td["x"][0] == 42  # shares memory
    part = td.separates("y")
    assert list(part.keys()) == ["y"] and list(td.keys()) == ["x"]


# ---------------------------------------------------------------------- from the second review
def lazy_pair(stack_dim: int = 0) -> LazyStackedTensorDict:
    return LazyStackedTensorDict(
        TensorDict({"a": torch.tensor([0.0, 1.0])}, [2]),
        TensorDict({"a": torch.tensor([10.0, 20.0])}, [2]),
        stack_dim=stack_dim,
    )


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_and_softmax_on_a_lazy_stack_match_the_dense_result(stack_dim, dim) -> None:
    lz = lazy_pair(stack_dim)
    dense = lz.to_tensordict()
    assert torch.equal(lz.cumsum(dim)["a"], dense.cumsum(dim)["a"])
    assert torch.allclose(lz.softmax(dim)["a"], dense.softmax(dim)["a"])


def test_masked_fill_on_a_lazy_stack_with_a_mask_over_the_stack_dim() -> None:
    lz = lazy_pair()
    lz.masked_fill_(torch.tensor([[True, False], [False, True]]), -1.0)
    assert [m["a"].tolist() for m in lz.tensordicts] == [[-1.0, 1.0], [10.0, -1.0]]
    scalar = TensorDict({"x": torch.zeros(2)}, [])
    assert scalar.masked_fill(torch.tensor(True), 3.0)["x"].tolist() == [3.0, 3.0]
    assert scalar.masked_fill(torch.tensor(False), 3.0)["x"].tolist() == [0.0, 0.0]


def test_binary_maths_take_tensorclasses_and_keep_the_entry_dtype_for_numbers() -> None:
    td = TensorDict({"a": torch.ones(3)}, [3])
    assert td.isclose(1)["a"].all() and td.allclose(1)  # int number vs float entries
    assert td.clamp_min(TensorDict({"a": torch.full((3,), 2.0)}, [3]))["a"].tolist() == [2.0] * 3
    assert td.clamp_max(0.5)["a"].tolist() == [0.5] * 3

    item = Item(data=torch.zeros(3), label=torch.ones(3), batch_size=[3])
    other = Item(data=torch.ones(3), label=torch.zeros(3), batch_size=[3])
    picked = item.where(torch.tensor([True, False, True]), other=other)  # keyword: unwrapped
    assert type(picked) is Item and picked.data.tolist() == [0.0, 1.0, 0.0]
    plain = TensorDict({"data": torch.zeros(3), "label": torch.zeros(3)}, [3])
    assert torch.is_tensor(plain.where(torch.tensor([False] * 3), other)["data"])


def test_requires_grad_skips_integer_entries() -> None:
    td = TensorDict({"a": torch.zeros(3), "i": torch.zeros(3, dtype=torch.long)}, [3])
    td.requires_grad_()
    assert td["a"].requires_grad and not td["i"].requires_grad


def test_bytes_counts_jagged_tensor_components_and_gradients_once() -> None:
    shared = torch.zeros(3)  # 12 bytes
    with_grad = torch.ones(3, requires_grad=True)
    (with_grad * 2).sum().backward()  # 12 bytes of data + 12 of gradient
    offsets, lengths = torch.tensor([0, 1, 3]), torch.tensor([1, 2])  # 24 + 16 bytes
    jagged = torch.nested.nested_tensor_from_jagged(torch.ones(3), offsets, lengths=lengths)
    again = torch.nested.nested_tensor_from_jagged(shared, offsets, lengths=lengths)
    td = TensorDict(shared=shared, with_grad=with_grad, n={"jagged": jagged, "again": again})
    assert td.bytes() == 12 + 24 + (12 + 24 + 16)  # `again` holds memory counted already
    assert td.bytes(count_duplicates=True) == 12 + 24 + 2 * (12 + 24 + 16)


def _ragged(*sizes: int, fill: float) -> LazyStackedTensorDict:
    members = [TensorDict(obs=torch.full((3, n, 2), fill), x=torch.full((), fill)) for n in sizes]
    return LazyStackedTensorDict(*members, stack_dim=0)


def test_where_on_a_ragged_lazy_stack_answers_member_by_member() -> None:
    node, reset = _ragged(5, 2, fill=0.0), _ragged(1, 3, fill=1.0)
    # (TorchRL's partial reset of envs whose observations change shape)
    assert node.where(torch.tensor([False, True]), reset, out=node, pad=0) is node
    assert [tuple(m["obs"].shape) for m in node.tensordicts] == [(3, 1, 2), (3, 2, 2)]
    assert node.tensordicts[0]["obs"].eq(1).all() and node.tensordicts[1]["obs"].eq(0).all()
    mixed = _ragged(2, 2, fill=0.0).where(torch.tensor([True, False]), _ragged(2, 2, fill=1.0))
    assert isinstance(mixed, LazyStackedTensorDict) and mixed["x"].tolist() == [0.0, 1.0]


@tensorclass
class _Labels:
    role: str


def test_new_zeros_keeps_non_tensor_structure_as_upstream() -> None:
    # TorchRL's batched envs build a partial step's result with new_zeros, then fill it by key:
    # every key must still be there, at the new size with its own trailing batch dims
    with set_capture_non_tensor_stack(False):
        labels = torch.stack(
            [torch.stack([_Labels(role=f"{i}{j}") for j in range(4)]) for i in range(2)]
        )
    td = TensorDict(
        a=torch.ones(2, 3),
        one=NonTensorData("same", batch_size=[2]),
        many=NonTensorStack("x", "y"),
        sub=TensorDict(z=NonTensorData("q", batch_size=[2, 1]), batch_size=[2, 1]),
        labels=labels,
        batch_size=[2],
    )
    for out in (td.new_zeros(3), td.new_ones(3), td.new_empty(3), td.new_full((3,), 7.0)):
        assert out["a"].shape == (3, 3)
        assert isinstance(out.get("one"), NonTensorData) and out["one"] == "same"
        assert out.get("one").batch_size == (3,)
        many = out.get("many")  # a stack of different objects: an empty tensordict of that size
        assert type(many) is TensorDict and many.batch_size == (3,) and not list(many.keys())
        assert out.get("sub").batch_size == (3, 1) and out.get(("sub", "z")).batch_size == (3, 1)
        kept = out.get("labels")
        assert type(kept) is _Labels and kept.batch_size == (3, 4)
        assert kept._tensordict.get("role").batch_size == (3, 4)
