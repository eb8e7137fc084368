"""Autograd over tensordicts: ``backward`` as upstream (only leaves that require gradients, its
errors, ``inputs``) and lazy stacks, whose gradients live in their members' graph leaves."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import BackwardError, NotATensorDictError, TensorDictKeyError


def _stack() -> LazyStackedTensorDict:
    members = [
        TensorDict(a=torch.randn(3, 2), b={"c": torch.randn(3)}, batch_size=[3]) for _ in range(2)
    ]
    return LazyStackedTensorDict(*members, stack_dim=0).requires_grad_()


def test_grad_of_a_lazy_stack_gathers_its_members_gradients() -> None:
    td = _stack()
    sum(v.sum() for v in (td * 2).values(True, True)).backward()
    grad = td.grad
    assert grad is not None and grad.batch_size == td.batch_size
    assert (grad == 2).all()
    td.zero_grad(set_to_none=True)
    assert td.grad is None


def test_autograd_grad_of_lazy_stacks_follows_the_members() -> None:
    inputs = _stack()
    outputs = inputs * 3
    grads = torch.autograd.grad(outputs, inputs, torch.ones_like(outputs))
    assert isinstance(grads, LazyStackedTensorDict) and (grads == 3).all()


def test_backward_ignores_leaves_without_grad_and_takes_inputs() -> None:
    x = torch.ones(3, requires_grad=True)
    y = torch.ones(3, requires_grad=True)
    losses = TensorDict(a=(x * y).sum(), fixed=torch.zeros(4))
    losses.backward(inputs=TensorDict(x=x))
    assert torch.equal(x.grad, torch.ones(3)) and y.grad is None


def test_backward_errors_say_what_is_wrong() -> None:
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(BackwardError, match="no leaf tensor requiring gradients"):
        TensorDict(a=torch.zeros(2)).backward()
    with pytest.raises(BackwardError, match="scalar outputs"):
        TensorDict(a=x * 2).backward()
    with pytest.raises(TensorDictKeyError, match="Missing gradient entry for key 'a'"):
        TensorDict(a=x * 2).backward(TensorDict(b=torch.ones(3)))
    with pytest.raises(BackwardError, match="Mismatch in shape"):
        TensorDict(a=x * 2).backward(TensorDict(a=torch.ones(2)))
    with pytest.raises(NotATensorDictError, match="gradient must be a TensorDictBase"):
        TensorDict(a=x * 2).backward(torch.ones(3))
    assert x.grad is None  # nothing ran


def _grad_td() -> TensorDict:
    return TensorDict(a=torch.zeros(3, requires_grad=True), batch_size=[3])


@pytest.mark.parametrize(
    ("op", "call"),
    [
        ("gather", lambda td, out: torch.gather(td, 0, torch.tensor([2, 1, 0]), out=out)),
        ("stack", lambda td, out: torch.stack([td[0], td[1], td[2]], 0, out=out)),
        ("cat", lambda td, out: torch.cat([td[:1], td[1:]], 0, out=out)),
    ],
)
def test_out_forms_refuse_tensors_requiring_grad_as_torch(op, call) -> None:
    td = _grad_td()
    out = TensorDict(a=torch.ones(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=rf"{op}\(\): functions with out=\.\.\. arguments"):
        call(td, out)
    assert (out["a"] == 1).all()  # nothing written
    with torch.no_grad():
        assert call(td, out) is out
    assert (out["a"] == 0).all()
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        call(TensorDict(a=torch.zeros(3), batch_size=[3]), _grad_td().detach().requires_grad_())


def test_grad_of_an_unbatched_entry_stays_unbatched() -> None:
    from tensordict import UnbatchedTensor

    td = TensorDict({"a": torch.zeros(4, 3), "u": UnbatchedTensor(torch.zeros(7, 11))}, [4])
    inputs = td.requires_grad_()
    outputs = inputs * 2
    outputs.backward(torch.ones_like(outputs))
    grad = inputs.grad  # (building it raised BatchSizeError: [7, 11] is not the batch size)
    assert isinstance(grad["u"], UnbatchedTensor) and grad["u"].shape == torch.Size([7, 11])
    assert (grad == 2).all()
