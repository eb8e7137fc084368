"""Tensorclasses whose fields hold stacks of python objects (TorchRL's chat ``History``) through
update, filter_empty_, clear_device_ and apply, as upstream."""

from __future__ import annotations

import torch

from tensordict import NonTensorStack, TensorClass, TensorDict, set_capture_non_tensor_stack


class Turn(TensorClass["nocast"]):  # as TorchRL's History: bools stay python objects
    role: str
    done: bool = True


def turns(n: int) -> Turn:
    with set_capture_non_tensor_stack(False):
        return torch.stack([Turn(role=f"r{i}") for i in range(n)])


def test_update_carries_a_stack_of_objects_as_it_is() -> None:
    source = TensorDict(history=turns(3))
    dest = source.new_zeros(())  # its stacks of objects: empty tensordicts of the batch size
    assert type(dest["history"]._tensordict.get("role")) is TensorDict
    dest.update(source)
    inner = dest["history"]._tensordict
    # the stacks replace the placeholders as they are (a bool stack's getter gives a tensor)
    assert type(inner.get("role")) is NonTensorStack and type(inner.get("done")) is NonTensorStack
    assert dest["history"].role == ["r0", "r1", "r2"]


def test_filter_empty_removes_tensorclasses_left_empty() -> None:
    td = TensorDict(
        kept=Turn(role="x"),
        none=Turn(role=None, done=None),
        emptied=turns(2).exclude("role", "done"),
        sub=TensorDict(inner=Turn(role=None, done=None)),
    )
    assert sorted(td.filter_empty_().keys()) == ["kept"]


def test_clear_device_reaches_tensorclasses() -> None:
    td = TensorDict(history=turns(3), x=torch.zeros(()), device="cpu")
    td.clear_device_()
    assert td.device is None and td["history"].device is None
    assert torch.stack(list(td["history"].unbind(0))).device is None


def test_apply_keeps_a_tensorclass_holding_stacks_of_objects() -> None:
    td = TensorDict(history=turns(3), x=torch.zeros(()))
    out = td.apply(lambda x: x.clone(), filter_empty=True, is_leaf=lambda cls: True)
    assert out["history"].role == ["r0", "r1", "r2"]
