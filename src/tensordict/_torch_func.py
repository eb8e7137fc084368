"""``tensordict._torch_func``: upstream's module of the torch functions on tensordicts (its
private ``_stack`` / ``_cat`` signatures; the work is done in
:mod:`tensordict.core.behaviour.combine`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensordict.core.behaviour.combine import cat, stack_or_lazy
from tensordict.core.behaviour.combine import where as _where  # noqa: F401

__all__: list[str] = []


def _stack(
    list_of_tensordicts: Sequence[Any],
    dim: int = 0,
    device: Any = None,
    out: Any = None,
    strict: bool = False,
    contiguous: bool = False,
    maybe_dense_stack: bool | None = None,
) -> Any:
    """Upstream's private stack: ``torch.stack``'s rules (members that differ are refused)
    unless ``maybe_dense_stack``, which stacks them lazily; ``contiguous`` makes a lazy result
    dense; ``device`` moves the result. ``strict`` is accepted as upstream accepts it.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> a, b = TensorDict(x=torch.zeros(2)), TensorDict(y=torch.zeros(2))
        >>> type(_stack([a, b], maybe_dense_stack=True)).__name__
        'LazyStackedTensorDict'
    """
    result = stack_or_lazy(
        list_of_tensordicts, dim, out=out, strict=not maybe_dense_stack, contiguous=contiguous
    )
    return result if device is None else result.to(device)


def _cat(
    list_of_tensordicts: Sequence[Any], dim: int = 0, device: Any = None, out: Any = None
) -> Any:
    """Upstream's private cat: ``torch.cat`` of tensordicts, then moved to ``device``."""
    result = cat(list_of_tensordicts, dim, out=out)
    return result if device is None else result.to(device)
