"""Placeholders: names of upstream's API not assigned yet (archives)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_class, coming_function

_FEATURE, _ISSUE = "a later issue (not assigned yet)", 12
_MODULE = "tensordict"

PackLayout = coming_class("PackLayout", _MODULE, _FEATURE, _ISSUE)
_ArchiveReader = coming_class("_ArchiveReader", _MODULE, _FEATURE, _ISSUE)
pack_memmap = coming_function("pack_memmap", _MODULE, _FEATURE, _ISSUE)
unpack_memmap = coming_function("unpack_memmap", _MODULE, _FEATURE, _ISSUE)
is_memmap_archive = coming_function("is_memmap_archive", _MODULE, _FEATURE, _ISSUE)
append_memmap = coming_function("append_memmap", _MODULE, _FEATURE, _ISSUE)
refresh_archive_checksums = coming_function("refresh_archive_checksums", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "append_memmap",
    "_ArchiveReader",
    "is_memmap_archive",
    "pack_memmap",
    "PackLayout",
    "refresh_archive_checksums",
    "unpack_memmap",
]
