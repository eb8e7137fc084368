"""Consolidation: every tensor of a tensordict as a view of one flat ``uint8`` storage.

A consolidated tensordict moves to a device, shares memory or is written to a file as one
buffer. The layout (upstream's, so that files are exchanged both ways): the leaves one after the
other, each padded to 8 bytes; with a file, the JSON metadata follows the data, then its length
as a little-endian ``int64``. The metadata is a tree with, per tensordict, ``cls``,
``non_tensors`` (``key: (data, batch_size, device)``), ``leaves``
(``key: (dtype, shape, start, end, pad)``, ``end`` past the padding), ``cls_metadata``
(device, names, batch size, lock)
and one sub-tree per nested tensordict.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tensordict.core.non_tensor import NonTensorData, is_non_tensor
from tensordict.errors import NotYetAvailableError

__all__ = ["ConsolidateMixin", "TensorDictFuture", "from_consolidated", "move_consolidated"]

_ALIGN = 8


class TensorDictFuture:
    """The pending result of an operation started with ``return_early=True``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> future = TensorDict(a=torch.ones(2)).consolidate(return_early=True)
        >>> future.result()["a"]
        tensor([1., 1.])
    """

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    def result(self, timeout: float | None = None) -> Any:
        """The tensordict, once the operation is done (its error, if it failed)."""
        return self._future.result(timeout)

    def done(self) -> bool:
        return self._future.done()

    @classmethod
    def completed(cls, value: Any) -> TensorDictFuture:
        """A future that already holds ``value``."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(value)
        return cls(future)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _leaf_plan(td: Any, leaves: list[torch.Tensor], offset: list[int]) -> dict[str, Any]:
    """The metadata tree of ``td``; its tensors appended to ``leaves`` (offsets advance)."""
    node: dict[str, Any] = {"cls": type(td).__name__, "non_tensors": {}, "leaves": {}}
    for key, value in td._own_items():
        if isinstance(value, torch.Tensor):
            if value.is_nested:
                raise NotYetAvailableError(
                    f"consolidate(): entry {key!r} is a nested (jagged) tensor, which "
                    "consolidation does not support yet; convert it with "
                    "td.apply(lambda t: t.to_padded_tensor(0.0)) or keep it apart."
                )
            start, size = offset[0], _nbytes(value)
            pad = -size % _ALIGN
            offset[0] = start + size + pad
            leaves.append(value)
            dtype = str(value.dtype)
            node["leaves"][key] = (dtype, list(value.shape), start, offset[0], pad)
        elif is_non_tensor(value):
            data = value.data if isinstance(value, NonTensorData) else value.tolist()
            device = None if value.device is None else str(value.device)
            node["non_tensors"][key] = (data, list(value.batch_size), device)
        else:
            inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
            node[key] = _leaf_plan(inner, leaves, offset)
    node["cls_metadata"] = {
        "device": None if td.device is None else str(td.device),
        "names": td._names_or_none() or [None] * len(td.batch_size),
        "batch_size": list(td.batch_size),
        "is_locked": bool(td.is_locked),
    }
    return node


def _copy_leaves(
    storage: torch.Tensor, leaves: list[torch.Tensor], starts: list[int], num_threads: int
) -> None:
    def copy(i: int) -> None:
        flat = leaves[i].detach().contiguous().reshape(-1)
        if flat.device != storage.device:
            flat = flat.to(storage.device)
        storage[starts[i] : starts[i] + _nbytes(flat)].copy_(flat.view(torch.uint8))

    if num_threads > 1 and len(leaves) > 1:
        with concurrent.futures.ThreadPoolExecutor(num_threads) as pool:
            list(pool.map(copy, range(len(leaves))))
    else:
        for i in range(len(leaves)):
            copy(i)


def _starts(meta: dict[str, Any]) -> list[int]:
    out = [leaf[2] for leaf in meta["leaves"].values()]
    for key, sub in meta.items():
        if isinstance(sub, dict) and key not in ("non_tensors", "leaves", "cls_metadata"):
            out.extend(_starts(sub))
    return out


def _new_storage(size: int, filename: Any, device: Any, share: bool, pin: bool) -> torch.Tensor:
    if filename is not None:
        path = Path(filename)
        if path.exists():
            os.remove(path)
        return torch.from_file(str(path), shared=True, size=size, dtype=torch.uint8)
    storage = torch.zeros(size, dtype=torch.uint8, device=device)  # (padding bytes: zeros)
    if share:
        storage.share_memory_()
    if pin:
        storage = storage.pin_memory()
    return storage


def _consolidate(
    td: Any,
    filename: Any = None,
    *,
    num_threads: int = 0,
    device: Any = None,
    share_memory: bool = False,
    pin_memory: bool = False,
    metadata: bool = False,
) -> Any:
    leaves: list[torch.Tensor] = []
    offset = [0]
    meta = _leaf_plan(td, leaves, offset)
    data_size = offset[0]
    payload = b""
    if filename is not None:
        payload = json.dumps(meta).encode()
        payload += len(payload).to_bytes(8, "little")
    if device is None:
        device = td.device if filename is None else torch.device("cpu")
    device = "cpu" if device is None else device
    full = _new_storage(data_size + len(payload), filename, device, share_memory, pin_memory)
    _copy_leaves(full, leaves, _starts(meta), num_threads)
    if payload:
        full[data_size:].copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
    storage = full[:data_size]
    out = _rebuild(td, meta, storage, None if filename is None else torch.device("cpu"))
    if filename is not None:  # (as upstream: a file-backed result is on the cpu)
        _set_device_tree(out, torch.device("cpu"))
        out._set_device(torch.device("cpu"))
    out._consolidated = {"storage": storage, "metadata": meta}
    if filename is not None:
        out._consolidated["filename"] = str(filename)
    return out.lock_()


def _view(storage: torch.Tensor, leaf: Any) -> torch.Tensor:
    dtype_name, shape, start, end, pad = leaf  # (end: after the padding)
    dtype = getattr(torch, dtype_name.rsplit(".", 1)[-1])
    return storage[start : end - pad].view(dtype).view(shape)


def _rebuild(like: Any, meta: dict[str, Any], storage: torch.Tensor, device: Any) -> Any:
    """A tensordict of ``like``'s structure whose tensors are views of ``storage``."""
    source: dict[str, Any] = {}
    for key, value in like._own_items():
        if key in meta["leaves"]:
            source[key] = _view(storage, meta["leaves"][key])
        elif is_non_tensor(value):
            source[key] = value if device is None else value.to(device)
        elif getattr(type(value), "_is_tensorclass", False):
            inner = _rebuild(value._tensordict, meta[key], storage, device)
            source[key] = type(value)._from_tensordict(inner, dict(value._non_tensordict))
        else:
            source[key] = _rebuild(value, meta[key], storage, device)
    out = like._new_dense(source, like.batch_size, like._names_or_none())
    out._set_device(storage.device if like.device is not None else None)
    return out


def move_consolidated(td: Any, device: torch.device, non_blocking: bool) -> Any:
    """A consolidated tensordict on ``device``: its storage moved in one copy."""
    cons = td._consolidated
    storage = cons["storage"].to(device, non_blocking=non_blocking)
    out = _rebuild(td, cons["metadata"], storage, device)
    out._set_device(device)
    _set_device_tree(out, device)
    out._consolidated = {"storage": storage, "metadata": cons["metadata"]}
    return out.lock_() if td.is_locked else out


def _set_device_tree(td: Any, device: torch.device) -> None:
    for _, value in td._own_items():
        inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
        if hasattr(inner, "_set_device") and not is_non_tensor(inner):
            inner._set_device(device)
            _set_device_tree(inner, device)


def from_consolidated(filename: Any) -> Any:
    """A tensordict read from a file written by ``consolidate(filename=...)``: its tensors are
    views of the file, mapped in memory.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = os.path.join(tempfile.mkdtemp(), "td.bin")
        >>> _ = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3]).consolidate(
        ...     filename=path)
        >>> TensorDict.from_consolidated(path)["b", "c"]
        tensor([1., 1., 1.])
    """
    size = os.path.getsize(filename)
    full = torch.from_file(str(filename), shared=True, size=size, dtype=torch.uint8)
    meta_len = int.from_bytes(bytes(full[-8:].tolist()), "little")
    data_size = size - 8 - meta_len
    meta = json.loads(bytes(full[data_size:-8].tolist()).decode())
    storage = full[:data_size]
    out = _from_meta(meta, storage)
    out._consolidated = {"storage": storage, "metadata": meta, "filename": str(filename)}
    return out


def _from_meta(meta: dict[str, Any], storage: torch.Tensor) -> Any:
    from tensordict.core.dense import TensorDict  # the dense class builds on this module's users

    cls_meta = meta["cls_metadata"]
    td = TensorDict(batch_size=cls_meta["batch_size"])
    for key, leaf in meta["leaves"].items():
        td._set_str(key, _view(storage, leaf), validated=True)
    for key, (data, batch_size, device) in meta["non_tensors"].items():
        td._set_str(key, NonTensorData(data, batch_size=batch_size, device=device), validated=True)
    for key, sub in meta.items():
        if isinstance(sub, dict) and key not in ("non_tensors", "leaves", "cls_metadata"):
            td._set_str(key, _from_meta(sub, storage), validated=True)
    if any(n is not None for n in cls_meta.get("names") or []):
        td.names = cls_meta["names"]
    if cls_meta.get("is_locked"):
        td.lock_()
    return td


def run_early(fn: Callable[[], Any]) -> TensorDictFuture:
    """``fn`` started in a background thread; its result as a :class:`TensorDictFuture`."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return TensorDictFuture(future)


class ConsolidateMixin:
    """``consolidate`` / ``is_consolidated`` / ``from_consolidated`` (see the module doc)."""

    __slots__ = ()

    def consolidate(
        self,
        filename: Any = None,
        *,
        num_threads: int = 0,
        device: Any = None,
        non_blocking: bool = False,
        inplace: bool = False,
        return_early: bool = False,
        use_buffer: bool = False,
        share_memory: bool = False,
        pin_memory: bool = False,
        metadata: bool = False,
    ) -> Any:
        """A locked copy whose tensors are views of one flat storage (``_consolidated``).

        Args:
            filename: write the storage (and the metadata) to this file, mapped in memory;
                :meth:`from_consolidated` reads it back.
            num_threads: threads copying the leaves (0: the calling thread).
            device: where the storage lives (default: this tensordict's device).
            non_blocking: accepted for upstream code (copies are synchronous here).
            inplace: accepted for upstream code; a new tensordict is returned.
            return_early: start in a background thread and return a
                :class:`TensorDictFuture`.
            use_buffer: accepted for upstream code (not with ``return_early``).
            share_memory: put the storage in shared memory.
            pin_memory: pin the storage.
            metadata: accepted for upstream code (the metadata is always kept).

        Raises:
            NotImplementedError: ``return_early`` with ``non_blocking`` or ``use_buffer``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(2), b={"c": torch.ones(2, dtype=torch.int64)})
            >>> tdc = td.consolidate()
            >>> tdc.is_consolidated(), tdc.is_locked
            (True, True)
            >>> tdc["a"].untyped_storage().data_ptr() == tdc["b", "c"].untyped_storage().data_ptr()
            True
        """
        if return_early:
            if non_blocking:
                raise NotImplementedError(
                    "consolidate(return_early=True) does not support non_blocking=True: the "
                    "copy runs in a background thread already. Drop one of the two."
                )
            if use_buffer:
                raise NotImplementedError(
                    "consolidate(return_early=True) does not support use_buffer=True. Drop one "
                    "of the two."
                )
            return run_early(
                lambda: self.consolidate(
                    filename, num_threads=num_threads, device=device, share_memory=share_memory
                )
            )
        return _consolidate(
            self,
            filename,
            num_threads=num_threads,
            device=device,
            share_memory=share_memory,
            pin_memory=pin_memory,
            metadata=metadata,
        )

    def is_consolidated(self) -> bool:
        """Whether the tensors are views of one storage made by :meth:`consolidate`."""
        return getattr(self, "_consolidated", None) is not None

    @classmethod
    def from_consolidated(cls, filename: Any) -> Any:
        """A tensordict read from a file written by ``consolidate(filename=...)``."""
        return from_consolidated(filename)
