"""``tensordict._archive``: upstream's path of memmap archives; re-exports only."""

from tensordict.core.serial.pack import PackLayout
from tensordict.memmap.append import append_memmap
from tensordict.memmap.archive import (
    ARCHIVE_SUFFIX as TENSORDICT_ARCHIVE_SUFFIX,
)
from tensordict.memmap.archive import (
    is_memmap_archive,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)
from tensordict.memmap.archive_reader import _ArchiveReader  # noqa: F401

__all__ = [
    "TENSORDICT_ARCHIVE_SUFFIX",
    "PackLayout",
    "append_memmap",
    "is_memmap_archive",
    "pack_memmap",
    "refresh_archive_checksums",
    "unpack_memmap",
]
