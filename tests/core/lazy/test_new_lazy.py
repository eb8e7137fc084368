"""``new_zeros`` / ``new_empty`` / ... with ``empty_lazy=True``, as upstream: lazy stacks stay lazy
(members with the first member's structure, no leaves), to be filled by indexed writes."""

from __future__ import annotations

import torch

from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict


def _ragged() -> LazyStackedTensorDict:
    return LazyStackedTensorDict(
        TensorDict(a=torch.ones(3), batch_size=[3]),
        TensorDict(a=torch.ones(3), b=torch.ones(3, 2), batch_size=[3]),
        stack_dim=1,
    )


def test_empty_lazy_keeps_a_lazy_stack_with_structure_only_members() -> None:
    out = _ragged().new_zeros((4, 5), empty_lazy=True)
    assert isinstance(out, LazyStackedTensorDict)
    assert out.stack_dim == 1 and out.batch_size == (4, 5) and len(out.tensordicts) == 5
    assert all(m.batch_size == (4,) and m.is_empty() for m in out.tensordicts)
    # fewer dims than the stack dim needs: a dense result, filled
    short = _ragged().new_ones((4,), empty_lazy=True)
    assert not isinstance(short, LazyStackedTensorDict) and (short["a"] == 1).all()


def test_empty_lazy_reaches_nested_lazy_stacks_and_fills_tensors() -> None:
    td = TensorDict(
        dense=torch.randn(1, 10),
        sparse=LazyStackedTensorDict(
            *[TensorDict(x=torch.ones(1), batch_size=[1]) for _ in range(10)], stack_dim=1
        ),
        batch_size=[1, 10],
    )
    out = td.new_empty((1, 7, 2), empty_lazy=True)
    assert isinstance(out.get("sparse"), LazyStackedTensorDict) and out.get("sparse").is_empty()
    assert out["dense"].shape == (1, 7, 2)
    full = td.new_full((1, 10), 3.0, empty_lazy=True)
    assert (full["dense"] == 3).all() and full.get("sparse").batch_size == (1, 10)
    assert not isinstance(td.new_zeros((1, 10)), LazyStackedTensorDict)


def test_non_tensor_stacks_repeat_their_first_element() -> None:
    stack = NonTensorStack("a", "b").unsqueeze(-1)
    out = stack.new_empty((3, 1), empty_lazy=True)
    assert isinstance(out, NonTensorStack) and out.tolist() == [["a"]] * 3
    td = TensorDict(s=stack, batch_size=[2])
    assert td.new_zeros((4,), empty_lazy=True).get("s").tolist() == [["a"]] * 4


def test_indexed_writes_fill_the_members_independently() -> None:
    inner = TensorDict(b=NonTensorStack("a", "b", "c").unsqueeze(-1), batch_size=[3])
    td = TensorDict(a=inner, batch_size=[3]).to_lazystack()
    out = td.new_zeros((4,), empty_lazy=True)
    out[torch.tensor([True, True, False, True])] = td
    assert out.get(("a", "b")).tolist() == [["a"], ["b"], ["a"], ["c"]]


def test_indexing_keeps_a_non_tensor_stack_s_own_trailing_dims() -> None:
    td = TensorDict(s=NonTensorStack("a", "b", "c").unsqueeze(-1), batch_size=[3])
    first = td[0].get("s")
    assert isinstance(first, NonTensorStack) and first.batch_size == (1,)
    assert first.tolist() == ["a"]


def test_empty_recurse_keeps_non_tensor_entries() -> None:
    s = NonTensorData("x", batch_size=[2])
    td = TensorDict(a=torch.zeros(2), s=s, n={"t": torch.ones(2)}, batch_size=[2])
    out = td.empty(recurse=True)
    assert set(out.keys()) == {"s", "n"} and out.get("s").data == "x"
    assert out.get("n").is_empty()
