"""Placeholder: distributions come with tensordict.nn (issue 14)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class

_FEATURE, _ISSUE = "tensordict.nn (engineer nn)", 14
_MODULE = "tensordict.nn.distributions.continuous"

NormalParamExtractor = coming_class("NormalParamExtractor", _MODULE, _FEATURE, _ISSUE)
AddStateIndependentNormalScale = coming_class(
    "AddStateIndependentNormalScale", _MODULE, _FEATURE, _ISSUE
)
Delta = coming_class("Delta", _MODULE, _FEATURE, _ISSUE)

__all__ = ["AddStateIndependentNormalScale", "Delta", "NormalParamExtractor"]
