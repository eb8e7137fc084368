"""Placeholders: names of upstream's tensorclass API that come with issue 13 (engineer tc)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class, coming_function, coming_value

_FEATURE, _ISSUE = "tensorclass and non-tensor data (engineer tc)", 13
_MODULE = "tensordict.tensorclass"

NonTensorDataBase = coming_class("NonTensorDataBase", _MODULE, _FEATURE, _ISSUE)
LinkedList = coming_class("LinkedList", _MODULE, _FEATURE, _ISSUE)
from_dataclass = coming_function("from_dataclass", _MODULE, _FEATURE, _ISSUE)
_from_shared_nontensor = coming_function("_from_shared_nontensor", _MODULE, _FEATURE, _ISSUE)
_FALLBACK_METHOD_FROM_TD = coming_value("_FALLBACK_METHOD_FROM_TD", _MODULE, _FEATURE, _ISSUE)
_FALLBACK_METHOD_FROM_TD_FORCE = coming_value(
    "_FALLBACK_METHOD_FROM_TD_FORCE", _MODULE, _FEATURE, _ISSUE
)
_FALLBACK_METHOD_FROM_TD_NOWRAP = coming_value(
    "_FALLBACK_METHOD_FROM_TD_NOWRAP", _MODULE, _FEATURE, _ISSUE
)
_METHOD_FROM_TD = coming_value("_METHOD_FROM_TD", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "_FALLBACK_METHOD_FROM_TD",
    "_FALLBACK_METHOD_FROM_TD_FORCE",
    "_FALLBACK_METHOD_FROM_TD_NOWRAP",
    "from_dataclass",
    "_from_shared_nontensor",
    "LinkedList",
    "_METHOD_FROM_TD",
    "NonTensorDataBase",
]
