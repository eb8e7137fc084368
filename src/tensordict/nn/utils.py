"""Placeholder: tensordict.nn switches and helpers come with tensordict.nn (issue 14)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class, coming_function

_FEATURE, _ISSUE = "tensordict.nn (engineer nn)", 14
_MODULE = "tensordict.nn.utils"

set_composite_lp_aggregate = coming_class("set_composite_lp_aggregate", _MODULE, _FEATURE, _ISSUE)
set_skip_existing = coming_class("set_skip_existing", _MODULE, _FEATURE, _ISSUE)
_set_skip_existing_None = coming_class("_set_skip_existing_None", _MODULE, _FEATURE, _ISSUE)
_set_dispatch_td_nn_modules = coming_class("_set_dispatch_td_nn_modules", _MODULE, _FEATURE, _ISSUE)
composite_lp_aggregate = coming_function("composite_lp_aggregate", _MODULE, _FEATURE, _ISSUE)
skip_existing = coming_function("skip_existing", _MODULE, _FEATURE, _ISSUE)
biased_softplus = coming_function("biased_softplus", _MODULE, _FEATURE, _ISSUE)
expln = coming_function("expln", _MODULE, _FEATURE, _ISSUE)
inv_softplus = coming_function("inv_softplus", _MODULE, _FEATURE, _ISSUE)
mappings = coming_function("mappings", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "biased_softplus",
    "composite_lp_aggregate",
    "expln",
    "inv_softplus",
    "mappings",
    "set_composite_lp_aggregate",
    "_set_dispatch_td_nn_modules",
    "set_skip_existing",
    "_set_skip_existing_None",
    "skip_existing",
]
