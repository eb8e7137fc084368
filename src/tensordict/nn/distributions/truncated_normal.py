"""The normal distribution truncated to an interval ``[a, b]`` (reparameterised sampling).

With ``alpha = (a - loc) / scale``, ``beta = (b - loc) / scale``, ``phi`` / ``Phi`` the standard
normal density / distribution function and ``Z = Phi(beta) - Phi(alpha)``:

* density ``phi((x - loc) / scale) / (scale * Z)`` on ``[a, b]``;
* mean ``loc + scale * (phi(alpha) - phi(beta)) / Z``;
* sampling by inversion: ``loc + scale * Phi^-1(Phi(alpha) + U * Z)`` with ``U`` uniform.

``Phi`` is clamped to ``[eps, 1 - eps]`` so that far tails stay finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch.distributions import Distribution, constraints
from torch.distributions.utils import broadcast_all

__all__ = ["TruncatedNormal", "TruncatedStandardNormal"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _pdf(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * x * x - _LOG_SQRT_2PI)


class TruncatedStandardNormal(Distribution):
    """The standard normal truncated to ``[a, b]``.

    Raises:
        ValueError: ``a`` and ``b`` have different dtypes, or ``a >= b`` somewhere.

    Examples:
        >>> import torch
        >>> dist = TruncatedStandardNormal(torch.tensor([-1.0]), torch.tensor([1.0]))
        >>> dist.mean
        tensor([0.])
        >>> bool(((dist.sample((100,)) >= -1) & (dist.sample((100,)) <= 1)).all())
        True
    """

    arg_constraints = {"a": constraints.real, "b": constraints.real}
    has_rsample = True
    eps = 1e-6

    def __init__(
        self,
        a: float | torch.Tensor,
        b: float | torch.Tensor,
        validate_args: bool | None = None,
    ) -> None:
        self.a, self.b = broadcast_all(a, b)
        batch_shape = (
            torch.Size()
            if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor)
            else self.a.size()
        )
        super().__init__(batch_shape, validate_args=validate_args)
        if self.a.dtype != self.b.dtype:
            raise ValueError(
                f"Truncation bounds types are different: a is {self.a.dtype}, b is {self.b.dtype}."
            )
        if bool((self.a >= self.b).any()):
            raise ValueError("Incorrect truncation range: every a must be smaller than its b.")
        self._little_phi_a, self._little_phi_b = _pdf(self.a), _pdf(self.b)
        self._big_phi_a, self._big_phi_b = self._big_phi(self.a), self._big_phi(self.b)
        self._Z = (self._big_phi_b - self._big_phi_a).clamp(self.eps, 1 - self.eps)
        self._log_Z = self._Z.log()
        # (a*phi(a) - b*phi(b)) / Z, with infinite bounds contributing 0
        a_phi = torch.nan_to_num(self.a * self._little_phi_a)
        b_phi = torch.nan_to_num(self.b * self._little_phi_b)
        tail = (a_phi - b_phi) / self._Z
        shift = (self._little_phi_a - self._little_phi_b) / self._Z
        self._mean = shift
        self._variance = 1 + tail - shift**2
        self._entropy = 0.5 * math.log(2 * math.pi * math.e) + self._log_Z - 0.5 * tail

    @constraints.dependent_property
    def support(self) -> Any:
        return constraints.interval(self.a, self.b)

    @property
    def mean(self) -> torch.Tensor:
        return self._mean

    @property
    def variance(self) -> torch.Tensor:
        return self._variance

    def entropy(self) -> torch.Tensor:
        return self._entropy

    @property
    def auc(self) -> torch.Tensor:
        """The mass of the untruncated distribution inside ``[a, b]``."""
        return self._Z

    def _big_phi(self, x: torch.Tensor) -> torch.Tensor:
        return (0.5 * (1 + torch.erf(x / math.sqrt(2)))).clamp(self.eps, 1 - self.eps)

    @staticmethod
    def _inv_big_phi(p: torch.Tensor) -> torch.Tensor:
        return math.sqrt(2) * torch.erfinv(2 * p - 1)

    def cdf(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((self._big_phi(value) - self._big_phi_a) / self._Z).clamp(0, 1)

    def icdf(self, value: torch.Tensor) -> torch.Tensor:
        p = (self._big_phi_a + value * self._Z).clamp(self.eps, 1 - self.eps)
        return self._inv_big_phi(p)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -_LOG_SQRT_2PI - self._log_Z - 0.5 * value**2

    def rsample(self, sample_shape: torch.Size | Sequence[int] | None = None) -> torch.Tensor:
        shape = self._extended_shape(torch.Size(sample_shape or ()))
        u = torch.empty(shape, device=self.a.device, dtype=self.a.dtype)
        return self.icdf(u.uniform_(self.eps, 1 - self.eps))


class TruncatedNormal(TruncatedStandardNormal):
    """The normal distribution ``N(loc, scale)`` truncated to ``[a, b]``.

    Samples are clipped to ``[a, b]`` (values only: gradients are those of the unclipped
    sample).

    Examples:
        >>> import torch
        >>> dist = TruncatedNormal(torch.zeros(3), torch.ones(3), a=-0.5, b=0.5)
        >>> bool(((dist.rsample() >= -0.5) & (dist.rsample() <= 0.5)).all())
        True
    """

    has_rsample = True

    def __init__(
        self,
        loc: float | torch.Tensor,
        scale: float | torch.Tensor,
        a: float | torch.Tensor,
        b: float | torch.Tensor,
        validate_args: bool | None = None,
    ) -> None:
        self.loc, scale, a, b = broadcast_all(loc, scale, a, b)
        self.scale = scale.clamp_min(self.eps)
        self._non_std_a, self._non_std_b = a, b
        super().__init__((a - self.loc) / self.scale, (b - self.loc) / self.scale, validate_args)
        self._log_scale = self.scale.log()
        self._mean = self._mean * self.scale + self.loc
        self._variance = self._variance * self.scale**2
        self._entropy = self._entropy + self._log_scale

    @constraints.dependent_property
    def support(self) -> Any:
        return constraints.interval(self._non_std_a, self._non_std_b)

    def _standardise(self, value: torch.Tensor) -> torch.Tensor:
        std = (value - self.loc) / self.scale
        if self._validate_args:
            self._validate_sample(torch.as_tensor(value, dtype=std.dtype, device=std.device))
        return std

    def cdf(self, value: torch.Tensor) -> torch.Tensor:
        std = self._standardise(value)
        return ((self._big_phi(std) - self._big_phi_a) / self._Z).clamp(0, 1)

    def icdf(self, value: torch.Tensor) -> torch.Tensor:
        sample = super().icdf(value) * self.scale + self.loc
        low, high = self._non_std_a.expand_as(sample), self._non_std_b.expand_as(sample)
        clipped = torch.minimum(torch.maximum(sample.detach(), low.detach()), high.detach())
        return sample + (clipped - sample).detach()

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        std = self._standardise(value)
        return -_LOG_SQRT_2PI - self._log_Z - 0.5 * std**2 - self._log_scale
