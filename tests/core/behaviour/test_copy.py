"""``copy.copy`` / ``copy.deepcopy`` of tensordicts: the shallow and deep copies, never a pickle
round trip (whose placeholders would leak into the result)."""

from __future__ import annotations

import copy

import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict


def sample() -> TensorDict:
    return TensorDict(
        {"a": torch.zeros(3), "n": {"b": torch.zeros(3)}, "s": NonTensorData("x", batch_size=[3])},
        [3],
    )


def test_copy_copy_shares_leaves_in_new_tensordicts() -> None:
    td = sample().lock_()
    out = copy.copy(td)
    assert type(out) is TensorDict and not out.is_locked
    assert out["a"] is td["a"] and out["n", "b"] is td["n", "b"]
    assert out["n"] is not td["n"] and out["s"] == "x"


def test_copy_copy_of_a_view_holds_tensors() -> None:
    # the SAC losses copy.copy() an indexed tensordict: its leaves must be torch tensors
    td = sample()
    out = copy.copy(td[1:])
    assert out.batch_size == (2,) and type(out["a"]) is torch.Tensor
    assert out["a"].data_ptr() == td["a"][1:].data_ptr()


def test_deepcopy_copies_leaves_and_unlocks() -> None:
    td = sample().lock_()
    out = copy.deepcopy(td)
    assert not out.is_locked and type(out["a"]) is torch.Tensor
    out["a"] += 1
    assert td["a"].sum() == 0 and out["s"] == "x"


def test_copy_of_a_lazy_stack_has_new_members_over_the_same_tensors() -> None:
    members = [TensorDict({"a": torch.zeros(())}), TensorDict({"a": torch.ones(())})]
    ls = LazyStackedTensorDict(*members)
    out = copy.copy(ls)
    assert type(out) is LazyStackedTensorDict
    assert out.tensordicts[0] is not members[0] and out.tensordicts[0]["a"] is members[0]["a"]


def test_deepcopy_of_a_memmap_td_is_in_memory(tmp_path) -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3]).memmap_(tmp_path)
    out = copy.deepcopy(td)
    assert not out.is_memmap() and not out.is_locked and type(out["a"]) is torch.Tensor
