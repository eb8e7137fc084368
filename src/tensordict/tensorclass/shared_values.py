"""Reading non-tensor values that live in ``multiprocessing`` shared objects.

A non-tensor value shared between processes may be held by a manager proxy (a list or a dict) or
by a ``multiprocessing`` shared ``Value`` / ``Array``. :func:`_from_shared_nontensor` gives the
plain Python value back; anything else is returned unchanged.
"""

from __future__ import annotations

import multiprocessing.managers
import multiprocessing.sharedctypes
from typing import Any

__all__ = ["_from_shared_nontensor"]


def _chars_to_str(array: Any) -> str:
    """The text in a shared array of single bytes, up to its first NUL."""
    raw = bytes(array[:])
    end = raw.find(b"\x00")
    return (raw if end < 0 else raw[:end]).decode("utf-8")


def _from_shared_nontensor(nontensor: Any) -> Any:
    """The plain value behind a shared ``multiprocessing`` object (else ``nontensor`` itself).

    Examples:
        >>> import multiprocessing as mp
        >>> _from_shared_nontensor(mp.Value("i", 3))
        3
        >>> _from_shared_nontensor(mp.Array("c", b"hi\\x00\\x00"))
        'hi'
        >>> _from_shared_nontensor("plain")
        'plain'
    """
    if isinstance(nontensor, multiprocessing.managers.ListProxy):
        return list(nontensor)
    if isinstance(nontensor, multiprocessing.managers.DictProxy):
        return dict(nontensor)
    if isinstance(nontensor, multiprocessing.sharedctypes.SynchronizedArray):
        return _chars_to_str(nontensor)
    if isinstance(nontensor, multiprocessing.sharedctypes.Synchronized):
        return nontensor.value
    return nontensor
