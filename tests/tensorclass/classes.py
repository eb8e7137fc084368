"""Tensorclasses shared by the tests (module level, so that they pickle and their hints resolve)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tensordict import TensorDict, tensorclass


@tensorclass
class Sample:
    obs: torch.Tensor
    reward: torch.Tensor | None = None
    label: str = "none"


@tensorclass
class Pair:
    left: Sample
    right: torch.Tensor


@tensorclass
class WithTensorDict:
    td: TensorDict
    x: torch.Tensor


@tensorclass(frozen=True)
class Frozen:
    x: torch.Tensor


@tensorclass(nocast=True)
class NoCast:
    count: int
    x: torch.Tensor
    ratio: float = 0.5
    name: str | None = None
    anything: Any = None


@tensorclass(autocast=True)
class AutoCast:
    count: int
    x: torch.Tensor
    rate: float = 0.0
    array: np.ndarray = None  # (not Optional: as upstream, unions are not cast)
    nested: Sample = None
    anything: Any = None


class Greeting:
    """A plain python base class whose methods a tensorclass inherits."""

    def clone(self) -> str:
        return "user clone"


@tensorclass
class WithMethods(Greeting):
    x: torch.Tensor

    @property
    def doubled(self) -> torch.Tensor:
        return self.x * 2

    @property
    def half(self) -> torch.Tensor:
        return self.x / 2

    @half.setter
    def half(self, value: torch.Tensor) -> None:
        self.x = value * 2

    def reshape(self, *shape: int) -> str:
        return "user reshape"

    def total(self) -> torch.Tensor:
        return self.x.sum()
