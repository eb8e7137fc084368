"""Files mapped into tensors: one mapping per file and process, shared by every tensor over it.

``_file_base`` maps a whole file as a 1-d tensor (read-write when this process may write it, else
a private copy-on-write mapping) and keeps a weak reference in a small per-process cache keyed by
path, dtype and size and checked against the file's identity (device, inode, size), so a file
replaced at the same path is mapped again and a deleted dataset's mappings die with their
tensors. The kernel's limit on mappings per process surfaces as :class:`MappingLimitError`.
"""

from __future__ import annotations

import errno
import os
import threading
import weakref
from collections import OrderedDict
from typing import Any

import torch

from tensordict.core.serial.pickling import _DTYPES
from tensordict.errors import IncompleteMemmapError, MappingLimitError, MemmapFormatError

__all__ = [
    "current_mapping",
    "dtype_from_str",
    "forget_file",
    "map_limit",
    "maps_current_file",
    "maps_in_use",
]

_CACHE_SIZE = 256
#: (filename, dtype, numel) -> ((st_dev, st_ino, st_size), weak reference to the mapped base)
_cache: OrderedDict[
    tuple[str, str, int], tuple[tuple[int, int, int], weakref.ref[torch.Tensor]]
] = OrderedDict()
_cache_lock = threading.Lock()
#: entries added since the cache was last cleared of mappings freed since: clearing walks the
#: whole cache, so it runs once the cache is full and then at most every 32 additions (walking
#: it on every addition cost ~36 us per file, a third of opening a folder of 512 small leaves)
_added_since_sweep = 0
_SWEEP_EVERY = 32


def dtype_from_str(name: str, where: Any = None) -> torch.dtype:
    """``"torch.float32"`` -> ``torch.float32``; unknown names raise an error naming ``where``."""
    dtype = _DTYPES.get(name)
    if dtype is None:
        raise MemmapFormatError(
            f"unknown dtype {name!r}" + (f" in {where}" if where else "") + ". Supported: "
            f"{sorted(_DTYPES)}."
        )
    return dtype


def _file_base(
    filename: str, dtype: torch.dtype, numel: int, writable: bool | None = None
) -> torch.Tensor:
    """The whole file as a 1-d tensor, from the per-process cache when it is still the same file
    and still mapped."""
    if numel == 0:
        return torch.empty(0, dtype=dtype)
    try:
        st = os.stat(filename)
    except FileNotFoundError:
        raise IncompleteMemmapError(
            f"{filename} does not exist: the memory-mapped file was removed, or never written."
        ) from None
    ident = (st.st_dev, st.st_ino, st.st_size)
    key = (filename, str(dtype), numel)
    with _cache_lock:
        hit = _cache.get(key)
        base = hit[1]() if hit is not None and hit[0] == ident else None
        if base is not None:
            _cache.move_to_end(key)
            return base
    need = numel * _itemsize(dtype)
    if st.st_size < need:
        raise MemmapFormatError(
            f"{filename} holds {st.st_size} bytes but {need} are needed for {numel} elements of "
            f"{dtype}. The file is truncated or does not belong to this metadata."
        )
    if writable is None:
        writable = os.access(filename, os.W_OK)
    base = _map_file(filename, dtype, numel, writable)
    global _added_since_sweep
    with _cache_lock:
        _cache[key] = (ident, weakref.ref(base))
        _cache.move_to_end(key)
        _added_since_sweep += 1
        if len(_cache) > _CACHE_SIZE and _added_since_sweep >= _SWEEP_EVERY:
            _added_since_sweep = 0
            for stale in [k for k, (_, ref) in _cache.items() if ref() is None]:
                del _cache[stale]
        while len(_cache) > _CACHE_SIZE:  # the least recently used go first
            _cache.popitem(last=False)
    return base


def current_mapping(filename: str, dtype: torch.dtype, numel: int) -> torch.Tensor | None:
    """The cached mapping of ``filename`` if it maps the file now at that path, else None."""
    try:
        st = os.stat(filename)
    except OSError:
        return None
    with _cache_lock:
        hit = _cache.get((filename, str(dtype), numel))
    if hit is None or hit[0] != (st.st_dev, st.st_ino, st.st_size):
        return None
    return hit[1]()


def map_limit() -> int:
    """How many memory mappings the kernel lets one process hold (``vm.max_map_count``)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 1 << 30  # not Linux, or not readable: no known limit


def maps_in_use() -> int:
    """How many memory mappings this process holds now."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def _mapping_failed(filename: str, err: RuntimeError) -> MappingLimitError | None:
    """A clear error if ``err`` is the kernel refusing one mapping more."""
    if "Cannot allocate memory" not in str(err) and "(12)" not in str(err):
        return None
    return MappingLimitError(
        errno.ENOMEM,
        f"cannot map {filename}: the kernel refused one more memory mapping ({maps_in_use()} in "
        f"use, vm.max_map_count is {map_limit()}). Each memory-mapped file takes one: store "
        "fewer, larger tensors, release tensordicts you no longer use, or raise the limit "
        "(sysctl vm.max_map_count=...).",
    )


def _map_file(filename: str, dtype: torch.dtype, numel: int, writable: bool) -> torch.Tensor:
    # shared=True maps the file read-write (writes reach the file); on a read-only file or file
    # system, a private copy-on-write mapping reads the same bytes without needing write access.
    # os.access can claim write access that open() then refuses (root on a file the kernel still
    # protects, some network file systems): fall back to the private mapping then too.
    if writable:
        try:
            return torch.from_file(filename, shared=True, size=numel, dtype=dtype)
        except RuntimeError as err:
            limit = _mapping_failed(filename, err)
            if limit is not None:
                raise limit from None
    try:
        return torch.from_file(filename, shared=False, size=numel, dtype=dtype)
    except RuntimeError as err:
        raise _mapping_failed(filename, err) or MemmapFormatError(
            f"cannot map {filename}: {err}"
        ) from None


def maps_current_file(t: torch.Tensor) -> bool:
    """Whether the file-backed tensor ``t`` (or a view of it) maps the file now at its
    ``filename``, not one that was replaced (or deleted) since it was mapped."""
    filename = getattr(t, "filename", None)
    if filename is None:
        return False
    storage = t.untyped_storage()
    numel = storage.nbytes() // t.element_size()
    if numel == 0:
        return os.path.exists(filename)
    base = current_mapping(filename, t.dtype, numel)
    return base is not None and base.untyped_storage().data_ptr() == storage.data_ptr()


def forget_file(filename: str) -> None:
    """Drop cached mappings of ``filename`` (after it was rewritten or deleted)."""
    with _cache_lock:
        for key in [k for k in _cache if k[0] == filename]:
            del _cache[key]


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
