"""Distributions for probabilistic tensordict modules, and the modules that shape their
parameters."""

from tensordict.nn.distributions import continuous, discrete
from tensordict.nn.distributions.composite import CompositeDistribution
from tensordict.nn.distributions.continuous import (
    AddStateIndependentNormalScale,
    Delta,
    NormalParamExtractor,
)
from tensordict.nn.distributions.discrete import OneHotCategorical, rand_one_hot
from tensordict.nn.distributions.truncated_normal import TruncatedNormal
from tensordict.nn.interaction import InteractionType, set_interaction_type
from tensordict.nn.utils import add_custom_mapping, mappings

# ``distribution_class="delta"`` and friends: lower-cased class names
_distributions_maps = {
    "addstateindependentnormalscale": AddStateIndependentNormalScale,
    "delta": Delta,
    "normalparamextractor": NormalParamExtractor,
    "onehotcategorical": OneHotCategorical,
}

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "Delta",
    "InteractionType",
    "NormalParamExtractor",
    "OneHotCategorical",
    "TruncatedNormal",
    "add_custom_mapping",
    "continuous",
    "discrete",
    "mappings",
    "rand_one_hot",
    "set_interaction_type",
]
