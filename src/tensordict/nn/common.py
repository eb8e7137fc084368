"""Placeholder: ``TensorDictModule`` and its base classes come with tensordict.nn (issue 14)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class, coming_function

_FEATURE, _ISSUE = "tensordict.nn (engineer nn)", 14
_MODULE = "tensordict.nn.common"

TensorDictModuleBase = coming_class("TensorDictModuleBase", _MODULE, _FEATURE, _ISSUE)
TensorDictModule = coming_class("TensorDictModule", _MODULE, _FEATURE, _ISSUE)
TensorDictModuleWrapper = coming_class("TensorDictModuleWrapper", _MODULE, _FEATURE, _ISSUE)
dispatch = coming_class("dispatch", _MODULE, _FEATURE, _ISSUE)
TensorClassModuleBase = coming_class("TensorClassModuleBase", _MODULE, _FEATURE, _ISSUE)
TensorClassModuleWrapper = coming_class("TensorClassModuleWrapper", _MODULE, _FEATURE, _ISSUE)
as_tensordict_module = coming_function("as_tensordict_module", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "as_tensordict_module",
    "dispatch",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
]
