"""The function forms of saving and loading: ``tensordict.save(td, path)`` /
``tensordict.load(path)`` (and their memmap names), as upstream's top level offers them."""

from __future__ import annotations

import os
from typing import Any

from tensordict.core.collection import publish_as
from tensordict.memmap.load import load_memmap as _load_memmap

__all__ = ["load", "load_memmap", "memmap", "save"]


def memmap(
    data: Any,
    prefix: str | os.PathLike[str] | None = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    existsok: bool = True,
    **kwargs: Any,
) -> Any:
    """Write ``data`` (a tensordict or tensorclass) to memory-mapped files under ``prefix`` and
    return the memory-mapped copy (locked); ``data`` is left unchanged.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> out = memmap(TensorDict(a=torch.arange(3), batch_size=[3]), tempfile.mkdtemp())
        >>> out.is_memmap(), out.is_locked
        (True, True)
    """
    return data.memmap(
        prefix, copy_existing=copy_existing, num_threads=num_threads, existsok=existsok, **kwargs
    )


def save(
    data: Any,
    prefix: str | os.PathLike[str] | None = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    **kwargs: Any,
) -> Any:
    """Save ``data`` under ``prefix``: the same as :func:`memmap`.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> _ = save(TensorDict(a=torch.arange(3), batch_size=[3]), d)
        >>> load(d)["a"]
        MemoryMappedTensor([0, 1, 2])
    """
    return memmap(data, prefix, copy_existing, num_threads=num_threads, **kwargs)


def load_memmap(
    prefix: str | os.PathLike[str],
    device: Any = None,
    non_blocking: bool = False,
    *,
    out: Any = None,
    allow_pickle: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Load what :func:`save` / :func:`memmap` wrote under ``prefix`` (here or by upstream).

    Pickled non-tensor entries are read as plain data only unless ``allow_pickle=True``
    (``False`` refuses them all).
    """
    return _load_memmap(
        prefix, device, allow_pickle=allow_pickle, non_blocking=non_blocking, out=out
    )


def load(
    prefix: str | os.PathLike[str],
    device: Any = None,
    non_blocking: bool = False,
    *,
    out: Any = None,
    allow_pickle: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Load a saved tensordict: the same as :func:`load_memmap`."""
    return load_memmap(prefix, device, non_blocking, out=out, allow_pickle=allow_pickle, **kwargs)


publish_as("tensordict._td", load, load_memmap, memmap, save)  # upstream's path
