"""Allocating the bytes of a memory-mapped file for real (no sparse files): a full disk raises
:class:`~tensordict.errors.NoSpaceError` at write time instead of SIGBUS at the first read."""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

from tensordict.errors import NoSpaceError
from tensordict.sizes import format_bytes

__all__ = ["WRITEBACK_BYTES", "preallocate", "start_writeback"]


def preallocate(fd: int, nbytes: int, path: str) -> None:
    """Give the file ``fd`` ``nbytes`` of allocated zeros (``path`` names it in errors).

    Raises:
        NoSpaceError: not enough space (errno ENOSPC), naming ``path`` and the size.
    """
    if nbytes == 0:
        return
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as err:
        if err.errno == errno.ENOSPC:
            raise NoSpaceError(
                errno.ENOSPC,
                f"no space left to preallocate {path} ({format_bytes(nbytes)}, {nbytes} bytes). "
                "Free space on that file system or choose another prefix",
            ) from None
        if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        _write_zeros(fd, nbytes)  # a file system without fallocate: allocate by writing


def _write_zeros(fd: int, nbytes: int) -> None:
    block = bytes(1 << 20)
    done = 0
    while done < nbytes:
        done += os.write(fd, block[: min(len(block), nbytes - done)])


#: leaves at least this large start their writeback as soon as they are written (see
#: :func:`start_writeback`); smaller ones are left to the final ``fsync``, which commits many
#: of them at once
WRITEBACK_BYTES = 1 << 18
_SYNC_FILE_RANGE_WRITE = 2
_sync_file_range: Any = None


def start_writeback(fd: int) -> None:
    """Ask the kernel to start writing the dirty pages of ``fd`` to the disk now, without waiting
    (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``; nothing elsewhere). A durable save writes
    every leaf and then ``fsync``s them all: started early, each leaf's disk writes overlap the
    copying of the next ones instead of all waiting for the final ``fsync``. Errors are left to
    that ``fsync``, which reports them.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryFile() as f:
        ...     _ = f.write(b"x" * 4096)
        ...     f.flush()
        ...     start_writeback(f.fileno())
    """
    global _sync_file_range
    if _sync_file_range is None:
        fn: Any
        try:
            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):  # not Linux: the final fsync does it all
            fn = False
        _sync_file_range = fn
    if _sync_file_range:
        _sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)
