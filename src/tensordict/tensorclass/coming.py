"""Placeholders: names of upstream's tensorclass API that come with issue 13 (engineer tc)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_function

_FEATURE, _ISSUE = "tensorclass and non-tensor data (engineer tc)", 13
_MODULE = "tensordict.tensorclass"

_from_shared_nontensor = coming_function("_from_shared_nontensor", _MODULE, _FEATURE, _ISSUE)

__all__ = ["_from_shared_nontensor"]
