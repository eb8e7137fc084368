"""Placeholder: probabilistic modules come with tensordict.nn (issue 14)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class, coming_function

_FEATURE, _ISSUE = "tensordict.nn (engineer nn)", 14
_MODULE = "tensordict.nn.probabilistic"

ProbabilisticTensorDictModule = coming_class(
    "ProbabilisticTensorDictModule", _MODULE, _FEATURE, _ISSUE
)
ProbabilisticTensorDictSequential = coming_class(
    "ProbabilisticTensorDictSequential", _MODULE, _FEATURE, _ISSUE
)
InteractionType = coming_class("InteractionType", _MODULE, _FEATURE, _ISSUE)
set_interaction_type = coming_class("set_interaction_type", _MODULE, _FEATURE, _ISSUE)
interaction_type = coming_function("interaction_type", _MODULE, _FEATURE, _ISSUE)
_use_generator = coming_function("_use_generator", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "interaction_type",
    "InteractionType",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "set_interaction_type",
    "_use_generator",
]
