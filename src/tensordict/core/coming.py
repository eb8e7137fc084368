"""Placeholders: names of upstream's API not assigned yet (``pack`` layouts, appends)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class, coming_function

_FEATURE, _ISSUE = "a later issue (not assigned yet)", 12
_MODULE = "tensordict"

PackLayout = coming_class("PackLayout", _MODULE, _FEATURE, _ISSUE)
_ArchiveReader = coming_class("_ArchiveReader", _MODULE, _FEATURE, _ISSUE)
append_memmap = coming_function("append_memmap", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "append_memmap",
    "_ArchiveReader",
    "PackLayout",
]
