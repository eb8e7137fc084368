"""Discrete distributions: a one-hot categorical and a one-hot sampler."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import distributions as D

__all__ = ["OneHotCategorical", "rand_one_hot"]


def _squeeze_singleton(params: torch.Tensor | None) -> torch.Tensor | None:
    """Parameters with a trailing dim of 1 lose it (a network head of size 1)."""
    if params is not None and params.shape[-1] == 1:
        return params[..., 0]
    return params


def rand_one_hot(values: torch.Tensor, do_softmax: bool = True) -> torch.Tensor:
    """Sample one-hot vectors with probabilities ``softmax(values)`` (or ``values``).

    Examples:
        >>> import torch
        >>> rand_one_hot(torch.tensor([0.0, 100.0, 0.0]))
        tensor([0, 1, 0])
    """
    probs = values.softmax(-1) if do_softmax else values
    above = probs.cumsum(-1) > torch.rand_like(probs[..., :1])
    return (above.cumsum(-1) == 1).to(torch.long)


class OneHotCategorical(D.Categorical):
    """A categorical distribution whose samples are one-hot vectors (``long``).

    ``rsample`` returns a straight-through one-hot sample of a relaxed categorical (temperature
    1): one-hot values, gradients of the relaxed sample.

    Args:
        logits, probs: the parameters (a trailing dim of size 1 is dropped).

    Examples:
        >>> import torch
        >>> dist = OneHotCategorical(logits=torch.tensor([0.0, 10.0, 0.0]))
        >>> dist.mode
        tensor([0, 1, 0])
        >>> dist.log_prob(dist.mode).exp() > 0.99
        tensor(True)
    """

    num_params: int = 1

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            probs=_squeeze_singleton(probs), logits=_squeeze_singleton(logits), **kwargs
        )

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return super().log_prob(value.argmax(dim=-1))

    @property
    def mode(self) -> torch.Tensor:
        index = self.logits.argmax(-1)
        return torch.nn.functional.one_hot(index, self.logits.shape[-1])

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    def sample(self, sample_shape: torch.Size | Sequence[int] | None = None) -> torch.Tensor:
        index = super().sample(torch.Size(sample_shape or ()))
        return torch.nn.functional.one_hot(index, self.logits.shape[-1]).to(torch.long)

    def rsample(self, sample_shape: torch.Size | Sequence[int] | None = None) -> torch.Tensor:
        relaxed = D.RelaxedOneHotCategorical(torch.tensor(1.0), logits=self.logits)
        soft = relaxed.rsample(torch.Size(sample_shape or ()))
        hard = (soft == soft.max(-1, keepdim=True)[0]).to(soft.dtype)
        return soft + (hard - soft).detach()
