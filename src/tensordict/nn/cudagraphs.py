"""Placeholder: ``CudaGraphModule`` comes with tensordict.nn (issue 14)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class

_FEATURE, _ISSUE = "tensordict.nn (engineer nn)", 14
_MODULE = "tensordict.nn.cudagraphs"

CudaGraphModule = coming_class("CudaGraphModule", _MODULE, _FEATURE, _ISSUE)

__all__ = ["CudaGraphModule"]
