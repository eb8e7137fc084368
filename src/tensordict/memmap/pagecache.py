"""The page cache behind memory-mapped files: which pages are resident, reading ahead, evicting.

Thin wrappers over ``mincore(2)``, ``madvise(2)`` and ``posix_fadvise(2)`` (Linux; elsewhere
:func:`supported` is False and the functions do nothing). Addresses are those of this process's
mappings (a :class:`~tensordict.memmap.MemoryMappedTensor`'s storage maps its whole file from
offset 0: :func:`mapping`).

``mincore`` reports the page cache for a file mapping only to a process that may write the file
(its owner, or with write permission); for any other it reports every page as resident, so
reading ahead (``parallel.readahead``) then does nothing rather than too much.

Examples:
    >>> import os, tempfile
    >>> from tensordict.memmap import MemoryMappedTensor
    >>> path = os.path.join(tempfile.mkdtemp(), "x.memmap")
    >>> x = MemoryMappedTensor.zeros(4096, filename=path)
    >>> addr, nbytes = mapping(x)
    >>> nbytes
    16384
    >>> vec = residency(addr, nbytes)
    >>> vec is None or len(vec) == 4
    True
    >>> evict_file(path)  # the pages this process does not map are dropped from the cache
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any

import numpy as np

__all__ = [
    "NORMAL",
    "PAGE",
    "RANDOM",
    "WILLNEED",
    "advise",
    "all_resident",
    "evict_file",
    "mapping",
    "page_resident",
    "residency",
    "supported",
    "unmap_pages",
]

PAGE = mmap.PAGESIZE
#: ``madvise`` advice values (Linux); None where the platform lacks them
WILLNEED: int | None = getattr(mmap, "MADV_WILLNEED", None)
DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)
NORMAL: int | None = getattr(mmap, "MADV_NORMAL", None)
RANDOM: int | None = getattr(mmap, "MADV_RANDOM", None)


def _load_libc() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise, mincore = libc.madvise, libc.mincore
    except (OSError, AttributeError):  # not a libc with these calls (not Linux)
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    mincore.restype = ctypes.c_int
    return libc


_libc = _load_libc()


def supported() -> bool:
    """Whether this platform has ``mincore`` and ``madvise`` (and the advice values)."""
    return _libc is not None and WILLNEED is not None and hasattr(os, "posix_fadvise")


def mapping(tensor: Any) -> tuple[int, int]:
    """``(address, bytes)`` of the storage behind ``tensor`` in this process: for a
    file-backed :class:`~tensordict.memmap.MemoryMappedTensor`, its whole file's mapping."""
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def _aligned(addr: int, length: int) -> tuple[int, int]:
    start = addr - addr % PAGE
    return start, length + (addr - start)


def advise(addr: int, length: int, advice: int | None) -> bool:
    """``madvise(addr, length, advice)``, the start rounded down to a page; False if refused."""
    if _libc is None or advice is None or length <= 0:
        return False
    start, length = _aligned(addr, length)
    return _libc.madvise(start, length, advice) == 0


def residency(addr: int, length: int) -> np.ndarray | None:
    """One byte per page of ``[addr, addr + length)`` (the start rounded down to a page): 1 where
    the page is in the page cache, 0 where it is not. None where ``mincore`` is unavailable or
    refuses (e.g. the range is not mapped)."""
    if _libc is None or length <= 0:
        return None
    start, length = _aligned(addr, length)
    vec = np.empty((length + PAGE - 1) // PAGE, dtype=np.uint8)
    if _libc.mincore(start, length, vec.ctypes.data) != 0:
        return None
    vec &= 1  # the other bits are reserved
    return vec


def all_resident(addr: int, length: int) -> bool:
    """Whether every page of ``[addr, addr + length)`` is in the page cache (True where
    ``mincore`` is unavailable or refuses: nothing is known to be missing). A few microseconds
    for 16 MiB: cheap enough to ask before every chunk."""
    if _libc is None or length <= 0:
        return True
    start, length = _aligned(addr, length)
    vec = ctypes.create_string_buffer((length + PAGE - 1) // PAGE)
    if _libc.mincore(start, length, vec) != 0:
        return True
    return b"\x00" not in vec.raw  # (the kernel writes 0 or 1: the other bits are reserved)


def page_resident(addr: int, vec: Any) -> bool:
    """Whether the page holding ``addr`` is in the page cache, using ``vec`` (a one-byte
    ``ctypes`` buffer the caller keeps: no allocation per call). True where ``mincore`` is
    unavailable or refuses."""
    if _libc is None or _libc.mincore(addr - addr % PAGE, PAGE, vec) != 0:
        return True
    return vec.raw != b"\x00"


def evict_file(path: str | os.PathLike[str]) -> None:
    """Drop the file's pages from the page cache (``POSIX_FADV_DONTNEED``; no root needed).

    Written pages are flushed to the file first (``fdatasync``: the kernel evicts clean pages
    only). Pages mapped by a process stay: drop this process's own first (:func:`unmap_pages`).
    """
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def unmap_pages(tensor: Any) -> bool:
    """Drop this process's page-table entries for the mapping behind ``tensor`` (the data stays in
    the file and, until evicted, in the page cache; the next access maps it again).

    Only for mappings of files this process reads (or writes through a shared mapping): pages a
    private (copy-on-write) mapping wrote would be lost.
    """
    addr, nbytes = mapping(tensor)
    return advise(addr, nbytes, DONTNEED)
