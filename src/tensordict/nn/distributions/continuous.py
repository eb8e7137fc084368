"""Continuous distributions and the modules that produce their parameters.

* :class:`NormalParamExtractor`: split a network output in two halves, ``loc`` and a positive
  ``scale``.
* :class:`AddStateIndependentNormalScale`: append a learned scale that does not depend on the
  input.
* :class:`Delta`: the distribution that always returns its parameter (deterministic policies).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import distributions as D
from torch import nn

from tensordict.nn.utils import mappings

__all__ = ["AddStateIndependentNormalScale", "Delta", "NormalParamExtractor"]


class NormalParamExtractor(nn.Module):
    """Split the last dimension in two: ``loc`` and ``scale = max(mapping(x), scale_lb)``.

    Extra positional inputs are passed through after ``loc`` and ``scale``.

    Args:
        scale_mapping: a name for :func:`~tensordict.nn.mappings`. Defaults to
            ``"biased_softplus_1.0"`` (scale 1 for a zero input).
        scale_lb: the smallest scale. Defaults to ``1e-4``.

    Examples:
        >>> import torch
        >>> loc, scale = NormalParamExtractor()(torch.zeros(4))
        >>> loc, scale
        (tensor([0., 0.]), tensor([1., 1.]))
    """

    def __init__(self, scale_mapping: str = "biased_softplus_1.0", scale_lb: float = 1e-4) -> None:
        super().__init__()
        self.scale_mapping = mappings(scale_mapping)
        self.scale_lb = scale_lb

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tensor, *others = tensors
        loc, scale = tensor.chunk(2, -1)
        return (loc, self.scale_mapping(scale).clamp_min(self.scale_lb), *others)


class AddStateIndependentNormalScale(nn.Module):
    """Return ``(loc, scale, *others)`` where ``scale`` is a learned tensor, not a function of
    the input.

    Args:
        scale_shape: the shape of the scale (the trailing shape of ``loc``).

    Keyword Args:
        scale_mapping: maps the raw value to a positive scale. Defaults to ``"exp"``.
        scale_lb: the smallest scale. Defaults to ``1e-4``.
        device: where the raw value lives.
        make_param: learn it (a parameter) or keep it fixed (a buffer). Defaults to True.
        init_value: the initial raw value. Defaults to 0 (scale 1 with ``"exp"``).

    Raises:
        RuntimeError: ``loc``'s trailing shape differs from ``scale_shape``.

    Examples:
        >>> import torch
        >>> loc, scale = AddStateIndependentNormalScale(3)(torch.zeros(2, 3))
        >>> scale
        tensor([[1., 1., 1.],
                [1., 1., 1.]], grad_fn=<ClampMinBackward0>)
    """

    def __init__(
        self,
        scale_shape: torch.Size | int | tuple[int, ...] | None = None,
        *,
        scale_mapping: str = "exp",
        scale_lb: float = 1e-4,
        device: torch.device | None = None,
        make_param: bool = True,
        init_value: float = 0.0,
    ) -> None:
        super().__init__()
        if scale_shape is None:
            scale_shape = ()
        if isinstance(scale_shape, int):
            scale_shape = (scale_shape,)
        self.scale_shape = torch.Size(scale_shape)
        self.scale_lb = scale_lb
        self.scale_mapping = scale_mapping
        raw = torch.full(
            self.scale_shape, init_value, dtype=torch.get_default_dtype(), device=device
        )
        if make_param:
            self.state_independent_scale = nn.Parameter(raw)
        else:
            self.register_buffer("state_independent_scale", raw)

    def forward(self, loc: torch.Tensor, *others: torch.Tensor) -> tuple[torch.Tensor, ...]:
        trailing = loc.shape[max(loc.ndim - len(self.scale_shape), 0) :]
        if trailing != self.scale_shape:
            raise RuntimeError(
                f"Last dimensions of loc ({trailing}) do not match the number of dimensions in "
                f"scale ({self.state_independent_scale.shape})"
            )
        scale = self.state_independent_scale.expand_as(loc)
        return (loc, mappings(self.scale_mapping)(scale).clamp_min(self.scale_lb), *others)


class Delta(D.Distribution):
    """The distribution that puts all its mass on ``param``.

    ``log_prob`` is ``+inf`` where the value equals ``param`` (within ``atol + rtol * |param|``)
    and ``-inf`` elsewhere; sampling returns ``param`` (with gradients for ``rsample``).

    Args:
        param: the value.
        atol, rtol: tolerances of the equality test.
        batch_shape, event_shape: default to ``param.shape[:-1]`` and ``param.shape[-1:]``.

    Examples:
        >>> import torch
        >>> dist = Delta(torch.tensor([1.0, 2.0]))
        >>> dist.sample(), dist.log_prob(torch.tensor([1.0, 2.0]))
        (tensor([1., 2.]), tensor(inf))
    """

    arg_constraints: dict[str, Any] = {}

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        batch_shape: torch.Size | Sequence[int] | None = None,
        event_shape: torch.Size | Sequence[int] | None = None,
    ) -> None:
        batch_shape = torch.Size(batch_shape or ())
        event_shape = torch.Size(event_shape or ())
        self.update(param)
        self.atol = atol
        self.rtol = rtol
        if not batch_shape and not event_shape:
            batch_shape, event_shape = param.shape[:-1], param.shape[-1:]
        super().__init__(batch_shape=batch_shape, event_shape=event_shape)

    def update(self, param: torch.Tensor) -> None:
        self.param = param

    def _is_equal(self, value: torch.Tensor) -> torch.Tensor:
        param = self.param.expand_as(value)
        equal = (value - param).abs() < self.atol + self.rtol * param.abs()
        for _ in range(len(self.event_shape)):
            equal = equal.all(-1)
        return equal

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        equal = self._is_equal(value)
        out = torch.full_like(equal, -math.inf, dtype=value.dtype)
        return out.masked_fill(equal, math.inf)

    @torch.no_grad()
    def sample(self, sample_shape: torch.Size | Sequence[int] | None = None) -> torch.Tensor:
        return self.param.expand((*(sample_shape or ()), *self.param.shape))

    def rsample(self, sample_shape: torch.Size | Sequence[int] | None = None) -> torch.Tensor:
        return self.param.expand((*(sample_shape or ()), *self.param.shape))

    @property
    def mode(self) -> torch.Tensor:
        return self.param

    @property
    def mean(self) -> torch.Tensor:
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.param
