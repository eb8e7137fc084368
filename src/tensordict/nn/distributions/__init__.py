"""``tensordict.nn.distributions`` (placeholders until issue 14)."""

from tensordict.nn.distributions.composite import CompositeDistribution
from tensordict.nn.distributions.continuous import (
    AddStateIndependentNormalScale,
    Delta,
    NormalParamExtractor,
)

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "Delta",
    "NormalParamExtractor",
]
