"""Placeholders: upstream's lazy views (``_CustomOpTensorDict`` & co, ``_SubTensorDict``)
come with issue 13 (engineer lazy)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class, coming_function

_FEATURE, _ISSUE = "lazy views (engineer lazy)", 13
_MODULE = "tensordict._lazy"

_CustomOpTensorDict = coming_class("_CustomOpTensorDict", _MODULE, _FEATURE, _ISSUE)
_PermutedTensorDict = coming_class("_PermutedTensorDict", _MODULE, _FEATURE, _ISSUE)
_ViewedTensorDict = coming_class("_ViewedTensorDict", _MODULE, _FEATURE, _ISSUE)
_SubTensorDict = coming_class("_SubTensorDict", _MODULE, _FEATURE, _ISSUE)
_str_to_index = coming_function("_str_to_index", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "_CustomOpTensorDict",
    "_PermutedTensorDict",
    "_str_to_index",
    "_SubTensorDict",
    "_ViewedTensorDict",
]
