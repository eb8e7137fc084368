"""Placeholder: ``EnsembleModule`` comes with tensordict.nn (issue 14)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class

_FEATURE, _ISSUE = "tensordict.nn (engineer nn)", 14
_MODULE = "tensordict.nn.ensemble"

EnsembleModule = coming_class("EnsembleModule", _MODULE, _FEATURE, _ISSUE)

__all__ = ["EnsembleModule"]
