"""Members of a lazy stack: construction, append/insert/extend, empty stacks, to_tensordict."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import (
    DeviceMismatchError,
    LockedError,
    NotATensorDictError,
    ShapeMismatchError,
)


def member(value: float, n: int = 4) -> TensorDict:
    return TensorDict({"a": torch.full((n,), value)}, [n])


def test_varargs_constructor_with_stack_dim_keyword() -> None:
    td = LazyStackedTensorDict(member(0), member(1), stack_dim=1)
    assert td.batch_size == torch.Size([4, 2]) and td.stack_dim == 1


def test_empty_stack_takes_the_members_batch_size_and_device() -> None:
    assert LazyStackedTensorDict(stack_dim=0).batch_size == torch.Size([0])
    td = LazyStackedTensorDict(stack_dim=1, batch_size=[1, 2], device="cpu")
    assert td.batch_size == torch.Size([1, 0, 2]) and td.device == torch.device("cpu")
    assert list(td.keys()) == []


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_append_adds_a_member_at_the_end(stack_dim: int) -> None:
    td = LazyStackedTensorDict(member(0), member(0), stack_dim=stack_dim)
    new = TensorDict({"a": torch.ones(4), "extra": torch.ones(4)}, [4])
    td.append(new)
    assert td.tensordicts[-1] is new
    assert td.batch_size[stack_dim] == 3 and list(td.keys()) == ["a"]
    assert (td["a"].select(stack_dim, 2) == 1).all()


@pytest.mark.parametrize("index", [0, 1])
def test_insert_adds_a_member_before_the_index(index: int) -> None:
    td = LazyStackedTensorDict(member(0), member(0))
    new = member(1)
    td.insert(index, new)
    assert td.tensordicts[index] is new and (td["a"][index] == 1).all()


def test_extend_appends_every_member() -> None:
    td = LazyStackedTensorDict(member(0))
    td.extend([member(1), member(2)])
    assert td["a"][:, 0].tolist() == [0, 1, 2]


def test_extend_checks_every_member_before_adding_any() -> None:
    td = LazyStackedTensorDict(member(0))
    with pytest.raises(ShapeMismatchError):
        td.extend([member(1), member(2, n=3)])
    assert len(td.tensordicts) == 1


def test_append_of_a_tensor_raises_type_error() -> None:
    td = LazyStackedTensorDict(member(0))
    with pytest.raises(NotATensorDictError, match="Expected new value to be TensorDictBase"):
        td.append(torch.zeros(4))  # type: ignore[arg-type]


def test_append_of_another_batch_size_raises_value_error() -> None:
    td = LazyStackedTensorDict(member(0))
    with pytest.raises(ValueError, match="Batch sizes in tensordicts differs"):
        td.append(member(0, n=17))


def test_append_on_another_device_raises() -> None:
    td = LazyStackedTensorDict(member(0).to("meta"))
    with pytest.raises(DeviceMismatchError, match="Devices differ"):
        td.append(member(0))


def test_append_to_a_locked_stack_raises() -> None:
    td = LazyStackedTensorDict(member(0)).lock_()
    with pytest.raises(LockedError):
        td.append(member(1))


def test_append_to_an_empty_stack() -> None:
    td = LazyStackedTensorDict(stack_dim=0, batch_size=[4])
    td.append(member(3))
    assert td.batch_size == torch.Size([1, 4]) and (td["a"] == 3).all()


def test_constructor_of_a_non_tensordict_raises() -> None:
    with pytest.raises(NotATensorDictError):
        LazyStackedTensorDict(member(0), {"a": torch.zeros(4)})  # type: ignore[arg-type]


def test_to_tensordict_keeps_the_shared_keys() -> None:
    a = TensorDict({"x": torch.zeros(3), "only_a": torch.zeros(1)})
    b = TensorDict({"x": torch.ones(3), "only_b": torch.zeros(1)})
    out = LazyStackedTensorDict(a, b).to_tensordict()
    assert type(out) is TensorDict and list(out.keys()) == ["x"]


def test_to_tensordict_makes_nested_lazy_stacks_dense() -> None:
    inner = LazyStackedTensorDict(member(0), member(1))
    outer = LazyStackedTensorDict(inner, inner.clone())
    assert type(outer.to_tensordict()) is TensorDict
    holder = TensorDict({"lazy": inner}, [2])
    assert type(holder.to_tensordict()["lazy"]) is TensorDict
    assert type(holder.clone()["lazy"]) is LazyStackedTensorDict


def test_to_tensordict_of_ragged_members_raises_upstream_wording() -> None:
    td = LazyStackedTensorDict(member(0, 3), member(0, 3))
    td.tensordicts[1].set("r", torch.zeros(3, 2))
    td.tensordicts[0].set("r", torch.zeros(3, 5))
    with pytest.raises(RuntimeError, match="Failed to stack tensors within a tensordict"):
        td.to_tensordict()


def test_deprecated_accessors_warn() -> None:
    td = LazyStackedTensorDict(member(0), member(1))
    with pytest.deprecated_call():
        assert list(td.valid_keys) == ["a"]
    with pytest.deprecated_call():
        assert td.hook_in is None
    with pytest.deprecated_call():
        assert td.hook_out is None
