"""``td.backward(...)`` and ``td.grad``: autograd over every leaf of a tensordict at once.

``backward`` differentiates the leaves that require gradients in one
:func:`torch.autograd.backward` call (the others are ignored, as upstream); ``grad`` gathers the
gradients of the graph leaves, member by member for a lazy stack (its stacked tensors are not
graph leaves).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch

from tensordict.core import factory
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.unbatched import UnbatchedTensor, is_unbatched
from tensordict.errors import BackwardError, NotATensorDictError, TensorDictKeyError

__all__ = ["backward", "grad_of", "out_writes", "refuse_out_with_grad"]


def backward(
    td: Any,
    gradient: Any,
    retain_graph: bool | None,
    create_graph: bool,
    inputs: Any,
) -> None:
    """See :meth:`~tensordict.TensorDictBase.backward`."""
    pairs = [
        (key, value)
        for key, value in td.items(True, True, is_leaf=leaf_or_non_tensor)
        if isinstance(value, torch.Tensor) and value.requires_grad
    ]
    if not pairs:
        raise BackwardError(
            "backward() cannot be called on a tensordict that has no leaf tensor requiring "
            "gradients: compute the tensordict from tensors with requires_grad=True."
        )
    tensors = [t for _, t in pairs]
    grads = None if gradient is None else _gradients(pairs, gradient)
    if grads is None:
        for key, t in pairs:
            if t.numel() != 1:
                raise BackwardError(
                    "grad can be implicitly created only for scalar outputs: the leaf at key "
                    f"{key!r} has shape {tuple(t.shape)}. Pass a gradient tensordict matching "
                    "the structure of this tensordict to backward()."
                )
    if isinstance(inputs, TensorCollection):
        inputs = _tensor_leaves(inputs)
    torch.autograd.backward(
        tensors, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs
    )


def _gradients(pairs: Sequence[tuple[Any, torch.Tensor]], gradient: Any) -> list[torch.Tensor]:
    if not isinstance(gradient, TensorCollection):
        raise NotATensorDictError(
            "gradient must be a TensorDictBase instance with entries matching the "
            f"differentiable leaves of the tensordict, got {type(gradient).__name__} instead."
        )
    grads = []
    for key, t in pairs:
        g = gradient.get(key, None)  # type: ignore[attr-defined]
        if g is None:
            raise TensorDictKeyError(
                f"Missing gradient entry for key {key!r} in the gradient tensordict passed to "
                "backward(): give one for every leaf that requires gradients."
            )
        if g.shape != t.shape:
            raise BackwardError(
                f"Mismatch in shape: the gradient at key {key!r} has shape {tuple(g.shape)} but "
                f"the corresponding leaf has shape {tuple(t.shape)}."
            )
        grads.append(g)
    return grads


def _tensor_leaves(td: Any) -> tuple[torch.Tensor, ...]:
    return tuple(
        v for v in td.values(True, True, is_leaf=leaf_or_non_tensor) if isinstance(v, torch.Tensor)
    )


def grad_of(td: Any) -> Any:
    """See :attr:`~tensordict.TensorDictBase.grad`."""
    members = getattr(td, "tensordicts", None)
    if members is not None and hasattr(td, "stack_dim"):
        grads = [grad_of(m) for m in members]
        if all(g is None for g in grads):
            return None
        filled = [m.empty() if g is None else g for m, g in zip(members, grads)]
        return factory.LazyStackedTensorDict(*filled, stack_dim=td.stack_dim)
    keys = [
        k
        for k, v in td.items(True, True, is_leaf=leaf_or_non_tensor)
        if isinstance(v, torch.Tensor) and v.grad is not None
    ]
    if not keys:
        return None
    by_key = {k: _grad(td.get(k)) for k in keys}
    out = td.select(*keys)
    return out._apply_leaves(lambda x: x).update(by_key)  # (same structure, the grads)


def _grad(leaf: torch.Tensor) -> torch.Tensor:
    """The gradient of ``leaf``; an unbatched entry's stays unbatched (its shape is not the
    batch size's)."""
    grad = leaf.grad
    if grad is not None and is_unbatched(leaf) and not is_unbatched(grad):
        return UnbatchedTensor(grad)
    return grad  # type: ignore[return-value]


def refuse_out_with_grad(op: str, out: Any, inputs: Sequence[Any]) -> None:
    """Raise, as torch does for ``op(..., out=...)``, when autograd is on and a tensor of
    ``out`` or of the ``inputs`` tensordicts requires gradients: writing into ``out`` would not
    be differentiated.

    Raises:
        RuntimeError: grad mode is on and a leaf requires gradients.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2, requires_grad=True), batch_size=[2])
        >>> with torch.no_grad():
        ...     refuse_out_with_grad("stack", td.clone(), [td])
        >>> refuse_out_with_grad("stack", td.clone(), [td])
        Traceback (most recent call last):
        ...
        RuntimeError: stack(): functions with out=... arguments don't support automatic ...
    """
    if not torch.is_grad_enabled():
        return
    for td in (out, *inputs):
        if getattr(type(td), "_is_tensorclass", False):
            td = td._tensordict
        # (the stored tensors: a lazy stack's members' own, never stacked copies)
        leaves = td._tensor_leaves() if hasattr(td, "_tensor_leaves") else ()
        if any(t.requires_grad for t in leaves):
            raise RuntimeError(
                f"{op}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad. Call it without out= "
                "(and keep or copy the result), or under torch.no_grad()."
            )


def out_writes(op: str, out: Any, inputs: Sequence[Any]) -> contextlib.AbstractContextManager[Any]:
    """The context in which ``op(inputs, out=out)`` writes into ``out``: without autograd for an
    ``out`` whose class writes so (``TensorDictParams``, as upstream), else with the checks of
    :func:`refuse_out_with_grad` passed first."""
    if getattr(type(out), "_writes_without_autograd", False):
        return torch.no_grad()
    refuse_out_with_grad(op, out, inputs)
    return contextlib.nullcontext()
