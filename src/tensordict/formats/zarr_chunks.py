"""Checking, before a Zarr read, that the chunks it touches are where they should be.

Zarr reads a chunk that is not stored as the array's fill value: a store whose chunk (or whole
array folder) was deleted reads zeros, and a local store follows a chunk that is a symbolic link
wherever it leads. Before each read, :func:`check_read` therefore

* on a local (directory) store: refuses a chunk that is a symbolic link or lies outside the
  store (:class:`~tensordict.errors.ExternalDataError`) and an array whose metadata file is gone
  (its folder was deleted while the consolidated metadata still lists it);
* on any store, for arrays tensordict wrote (marked with :data:`ALL_CHUNKS_ATTR`: every chunk
  is stored, zeros included): refuses a missing chunk
  (:class:`~tensordict.errors.IncompleteDataError`).

Arrays written by other programs may leave chunks of fill values unstored (Zarr's default): a
missing chunk of those reads as the fill value, as Zarr specifies.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import stat
from typing import Any

import numpy as np

from tensordict.errors import ExternalDataError, IncompleteDataError

__all__ = ["ALL_CHUNKS_ATTR", "check_read", "touched_chunks"]

#: the array attribute saying that every chunk is stored (tensordict writes them all)
ALL_CHUNKS_ATTR = "__tensordict_all_chunks__"


def touched_chunks(
    shape: tuple[int, ...], chunks: tuple[int, ...], region: tuple[Any, ...]
) -> list[tuple[int, ...]]:
    """The grid coordinates of the chunks that reading ``region`` touches.

    ``region`` holds one item per leading dimension (an int, a slice, or an array of positions);
    the dimensions after it are read whole.

    Examples:
        >>> touched_chunks((10, 4), (3, 4), (slice(2, 7),))
        [(0, 0), (1, 0), (2, 0)]
        >>> touched_chunks((10,), (3,), (np.array([0, 9]),))
        [(0,), (3,)]
    """
    per_dim = []
    for d, (n, c) in enumerate(zip(shape, chunks)):
        item = region[d] if d < len(region) else slice(None)
        per_dim.append(_chunk_ids(item, n, max(int(c), 1)))
    return list(itertools.product(*per_dim))


def _chunk_ids(item: Any, n: int, c: int) -> list[int]:
    if isinstance(item, (int, np.integer)):
        return [(int(item) % n) // c] if n else []
    if isinstance(item, slice):
        r = range(*item.indices(n))
        if not len(r):
            return []
        if r.step == 1:
            return list(range(r.start // c, (r[-1]) // c + 1))
        return sorted({i // c for i in r})
    positions = np.asarray(item).reshape(-1).astype(np.int64) % max(n, 1)
    return [int(i) for i in np.unique(positions // c)]


def check_read(arr: Any, region: tuple[Any, ...], where: str) -> None:
    """Raise unless every chunk of ``arr`` that reading ``region`` touches is stored as it should.

    Args:
        arr: the ``zarr.Array``.
        region: the region to read (see :func:`touched_chunks`).
        where: the entry, named for messages.

    Raises:
        IncompleteDataError: the array's metadata file, or a chunk of an array tensordict wrote,
            is missing.
        ExternalDataError: on a local store, a chunk is a symbolic link or lies outside it.
    """
    root = getattr(arr.store, "root", None)
    local = root is not None and os.path.isdir(str(root))
    marked = bool(arr.attrs.get(ALL_CHUNKS_ATTR, False))
    if not (local or marked):
        return
    grid = tuple(arr.shards) if getattr(arr, "shards", None) else tuple(arr.chunks)
    coords = touched_chunks(tuple(arr.shape), grid, region)
    keys = [f"{arr.path}/{arr.metadata.encode_chunk_key(c)}".lstrip("/") for c in coords]
    if local:
        _check_local(str(root), arr, keys, marked, where)
    else:
        _check_stored(arr.store, keys, where)


def _check_local(root: str, arr: Any, keys: list[str], marked: bool, where: str) -> None:
    real_root = os.path.realpath(root)
    meta = "zarr.json" if arr.metadata.zarr_format == 3 else ".zarray"
    if not os.path.isfile(os.path.join(root, arr.path, meta)):
        raise IncompleteDataError(
            f"{where}: its folder (or its {meta}) is gone from the store, although the store's "
            "metadata still lists it. Restore it from a copy, or delete the entry."
        )
    for key in keys:
        path = os.path.join(root, *key.split("/"))
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if marked:
                raise IncompleteDataError(
                    f"{where}: the chunk {key!r} is missing from the store ({path}). It was "
                    "deleted or the copy is incomplete; it is never read as zeros. Restore it "
                    "from a copy."
                ) from None
            continue  # not written by tensordict: an unstored chunk holds the fill value
        real = os.path.realpath(path)
        if stat.S_ISLNK(mode) or not stat.S_ISREG(mode) or not real.startswith(real_root + os.sep):
            raise ExternalDataError(
                f"{where}: the chunk {key!r} ({path}) is not a regular file inside the store "
                f"(it leads to {real}): a store's chunks are never read through links or from "
                "outside it. Copy the data into the store."
            )


def _check_stored(store: Any, keys: list[str], where: str) -> None:
    from zarr.core.sync import sync

    async def exist() -> list[bool]:
        return list(await asyncio.gather(*(store.exists(k) for k in keys)))

    for key, found in zip(keys, sync(exist())):
        if not found:
            raise IncompleteDataError(
                f"{where}: the chunk {key!r} is missing from the store. It was deleted or the "
                "copy is incomplete; it is never read as zeros. Restore it from a copy."
            )
