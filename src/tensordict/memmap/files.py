"""Allocating the bytes of a memory-mapped file for real (no sparse files): a full disk raises
:class:`~tensordict.errors.NoSpaceError` at write time instead of SIGBUS at the first read."""

from __future__ import annotations

import errno
import os

from tensordict.errors import NoSpaceError
from tensordict.sizes import format_bytes

__all__ = ["preallocate"]


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
