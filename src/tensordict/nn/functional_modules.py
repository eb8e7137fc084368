"""Placeholder: ``from_module`` / ``from_modules`` come with tensordict.nn (issue 14)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_function

_FEATURE, _ISSUE = "tensordict.nn (engineer nn)", 14
_MODULE = "tensordict.nn.functional_modules"

from_module = coming_function("from_module", _MODULE, _FEATURE, _ISSUE)
from_modules = coming_function("from_modules", _MODULE, _FEATURE, _ISSUE)
_exclude_td_from_pytree = coming_function("_exclude_td_from_pytree", _MODULE, _FEATURE, _ISSUE)

__all__ = ["_exclude_td_from_pytree", "from_module", "from_modules"]
