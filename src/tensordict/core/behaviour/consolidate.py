"""Consolidation: every tensor of a tensordict as a view of one flat ``uint8`` storage.

A consolidated tensordict moves to a device, shares memory, pickles or is written to a file as
one buffer. The layout (upstream's, so that files and pickles are exchanged both ways): the
leaves one after the other, each padded to 8 bytes; with a file, the JSON metadata follows the
data, then its length as a little-endian ``int64``. The metadata is a tree with, per
tensordict, ``cls``, ``non_tensors`` (``key: (data, batch_size, device)``), ``leaves``
(``key: (dtype, shape, start, end, pad)``, ``end`` past the padding), ``cls_metadata``
(device, names, batch size, lock; for a lazy stack: stack dim, its name, lock) and one sub-tree
per nested tensordict (per member for a lazy stack, keyed ``"0"``, ``"1"``...).

A jagged nested tensor ``key`` takes up to three leaves: ``<NJT_VALUES>key``,
``<NJT_LENGTHS>key`` (when it has lengths) and ``<NJT_OFFSETS>key``, whose entry carries the
ragged dimension as a sixth element. Pickling a consolidated tensordict sends the storage and
the metadata (``rebuild_consolidated``); see :mod:`tensordict.core.serial.pickling`.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import json
import math
import os
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tensordict.core import factory
from tensordict.core.collection import publish_as
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack, is_non_tensor
from tensordict.errors import NotYetAvailableError

__all__ = [
    "ConsolidateMixin",
    "Layout",
    "TensorDictFuture",
    "from_consolidated",
    "move_consolidated",
    "rebuild_consolidated",
]

_ALIGN = 8
_VALUES, _LENGTHS, _OFFSETS = "<NJT_VALUES>", "<NJT_LENGTHS>", "<NJT_OFFSETS>"
_NODE_KEYS = ("cls", "non_tensors", "leaves", "cls_metadata")


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


def _is_tc(value: Any) -> bool:
    return bool(getattr(type(value), "_is_tensorclass", False))


def _is_lazy(td: Any) -> bool:
    return isinstance(td, factory.LazyStackedTensorDict)


class _Plan:
    """The tensors to copy and their byte offsets, gathered while the metadata is built."""

    def __init__(self) -> None:
        self.parts: list[torch.Tensor] = []
        self.starts: list[int] = []
        self.size = 0

    def add(self, t: torch.Tensor, *extra: Any) -> tuple[Any, ...]:
        """Place ``t`` after the previous parts; its metadata entry."""
        start, size = self.size, _nbytes(t)
        pad = -size % _ALIGN
        self.size = start + size + pad
        self.parts.append(t)
        self.starts.append(start)
        return (str(t.dtype), list(t.shape), start, self.size, pad, *extra)


def _njt_parts(t: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    if t.layout is not torch.jagged:
        raise NotYetAvailableError(
            "consolidate() supports jagged nested tensors (layout=torch.jagged) only; convert "
            "a strided one with torch.nested.as_nested_tensor(list(t.unbind()), "
            "layout=torch.jagged)."
        )
    parts = [(_VALUES, t.values())]  # type: ignore[attr-defined]
    lengths = t.lengths()  # type: ignore[attr-defined]
    if lengths is not None:
        parts.append((_LENGTHS, lengths))
    return [*parts, (_OFFSETS, t.offsets())]  # type: ignore[attr-defined]


def _add_leaf(node: dict[str, Any], key: str, value: torch.Tensor, plan: _Plan) -> None:
    if not value.is_nested:
        node["leaves"][key] = plan.add(value)
        return
    for prefix, part in _njt_parts(value):
        extra = (value._ragged_idx,) if prefix == _OFFSETS else ()  # type: ignore[attr-defined]
        node["leaves"][prefix + key] = plan.add(part, *extra)


def _non_tensor_entry(value: Any) -> tuple[Any, list[int], str | None]:
    return (value.data, list(value.batch_size), None if value.device is None else str(value.device))


def _stack_node(stack: Any) -> dict[str, Any]:
    """The node of a :class:`NonTensorStack`: one entry (or sub-stack) per row."""
    node: dict[str, Any] = {"cls": "NonTensorStack", "non_tensors": {}, "leaves": {}}
    node["cls_metadata"] = {
        "stack_dim": 0,
        "stack_dim_name": None,
        "is_locked": False,
        "batch_size": list(stack.batch_size),
    }
    for i in range(stack.batch_size[0] if stack.batch_size else 0):
        row = stack[i]
        if isinstance(row, NonTensorStack):
            node[str(i)] = _stack_node(row)
        else:
            node["non_tensors"][str(i)] = _non_tensor_entry(row)
    return node


def _plan_node(td: Any, plan: _Plan) -> dict[str, Any]:
    """The metadata tree of ``td``; its tensors appended to ``plan``."""
    if _is_lazy(td):
        node: dict[str, Any] = {"cls": "LazyStackedTensorDict", "non_tensors": {}, "leaves": {}}
        names = td.names
        node["cls_metadata"] = {
            "stack_dim": td.stack_dim,
            "stack_dim_name": names[td.stack_dim] if names else None,
            "is_locked": bool(td.is_locked),
        }
        for i, member in enumerate(td.tensordicts):
            node[str(i)] = _plan_node(member, plan)
        return node
    node = {"cls": type(td).__name__, "non_tensors": {}, "leaves": {}}
    nested: dict[str, Any] = {}
    for key, value in td._own_items():
        if isinstance(value, torch.Tensor):
            _add_leaf(node, key, value, plan)
        elif isinstance(value, NonTensorStack):
            nested[key] = _stack_node(value)
        elif is_non_tensor(value):
            node["non_tensors"][key] = _non_tensor_entry(value)
        elif _is_tc(value):
            nested[key] = sub = _plan_node(value._tensordict, plan)
            if sub["cls"] == "LazyStackedTensorDict":
                sub["cls_metadata"]["tensorclass"] = type(value)
            else:
                sub["cls"] = type(value)  # (as upstream: the class itself, in memory)
        else:
            nested[key] = _plan_node(value, plan)
    node["cls_metadata"] = {
        "device": None if td.device is None else str(td.device),
        "names": td._names_or_none() or [None] * len(td.batch_size),
        "batch_size": list(td.batch_size),
        "is_locked": bool(td.is_locked),
    }
    node.update(nested)
    return node


def _copy_part(storage: torch.Tensor, plan: _Plan, i: int, views: dict[Any, Any]) -> int:
    """Copy the ``i``-th tensor of ``plan`` into ``storage``; the byte where the next one goes."""
    part, start = plan.parts[i], plan.starts[i]
    end = start + _nbytes(part)
    target = _typed_view(storage, part.dtype, part.shape, start, end, views)
    target.copy_(part.detach())  # (any strides, any device: one copy)
    stop = plan.starts[i + 1] if i + 1 < len(plan.starts) else plan.size
    if stop > end:
        storage[end:stop].zero_()  # padding bytes are zeros: the bytes are deterministic
    return stop


def _flat_bytes(part: torch.Tensor) -> torch.Tensor | None:
    """``part``'s bytes (1-d ``uint8``, no copy) if it is small plain contiguous CPU memory,
    else None."""
    t = part.detach()
    plain = type(t) is torch.Tensor and t.layout is torch.strided and t.device.type == "cpu"
    if not plain or _nbytes(t) > CAT_BYTES or t.is_quantized or t.is_conj() or t.is_neg():
        return None
    flat = t.reshape(-1) if t.is_contiguous() else None
    # (one element at a stride other than 1 is contiguous to torch, but views as bytes only at 1)
    return flat.view(torch.uint8) if flat is not None and flat.stride(0) == 1 else None


#: the padding between two tensors (fewer than ``_ALIGN`` bytes), as :func:`_copy_run` cats it
_ZEROS = torch.zeros(_ALIGN, dtype=torch.uint8)
#: tensors of at most this many bytes are copied in runs (larger ones: ``copy_`` is as fast)
CAT_BYTES = 1 << 16


def _copy_run(storage: torch.Tensor, plan: _Plan, lo: int, hi: int, views: Any) -> int:
    """Copy the tensors ``lo`` to ``hi - 1`` of ``plan`` (and the padding after each) into
    ``storage``; the byte where tensor ``hi`` goes.

    On the CPU, consecutive small plain contiguous tensors go in one ``torch.cat(..., out=)``
    (one call for the run, not a Python call and ``copy_`` each: 1,000 leaves of 64 bytes 12%
    faster, 50 of 16 KiB 8%; 640 KiB leaves into a fresh storage were 10% slower: not catted).
    """
    stop = plan.starts[lo] if lo < len(plan.parts) else plan.size
    if storage.device.type != "cpu" or torch.compiler.is_compiling():
        for i in range(lo, hi):
            stop = _copy_part(storage, plan, i, views)
        return stop
    run: list[torch.Tensor] = []
    run_start = stop
    for i in range(lo, hi):
        flat = _flat_bytes(plan.parts[i])
        if flat is None:
            if run:
                torch.cat(run, out=storage[run_start:stop])
                run = []
            stop = run_start = _copy_part(storage, plan, i, views)
            continue
        stop = plan.starts[i + 1] if i + 1 < len(plan.starts) else plan.size
        run.append(flat)
        pad = stop - plan.starts[i] - flat.numel()
        if pad:
            run.append(_ZEROS[:pad])
    if run:
        torch.cat(run, out=storage[run_start:stop])
    return stop


def _copy_leaves(
    storage: torch.Tensor, plan: _Plan, num_threads: int, views: dict[Any, Any]
) -> None:
    def copy(i: int) -> None:
        _copy_part(storage, plan, i, views)

    if num_threads > 1 and len(plan.parts) > 1:
        with concurrent.futures.ThreadPoolExecutor(num_threads) as pool:
            list(pool.map(copy, range(len(plan.parts))))
    else:
        _copy_run(storage, plan, 0, len(plan.parts), views)


#: in-memory CPU storages of at least this many bytes live in a ``bytes`` object (see
#: :func:`_bytes_storage`)
BYTES_BACKED = 64 * 1024


def _bytes_storage(size: int) -> tuple[torch.Tensor, Any]:
    """A ``uint8`` tensor over the memory of a new ``bytes`` object, and a weak reference to
    the memoryview of it that the tensor's storage holds.

    Pickling (protocols 3 and 4) then writes the storage as that very object: pickle's own
    copy is the only one (a tensor's bytes would first be copied into a new ``bytes``, a second
    buffer of the storage's size to allocate and fault in). The object never leaves this
    package's hands unpickled, so writing through the tensor is safe (numpy's unpickled arrays
    alias ``bytes`` the same way). The reference is weak so that the memory goes as soon as
    torch moves the storage elsewhere (``share_memory_()``, a ``multiprocessing`` queue).
    """
    view = memoryview(bytes(size))  # (zeroed: the padding bytes are zeros)
    if _WARNED and not torch.is_warn_always_enabled():  # (torch says "the given buffer is
        # not writable" once per process, unless told to warn always: said)
        return torch.frombuffer(view, dtype=torch.uint8), weakref.ref(view)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (it is writable: it is ours)
        tensor = torch.frombuffer(view, dtype=torch.uint8)
    _WARNED.append(True)
    return tensor, weakref.ref(view)


_WARNED: list[bool] = []


def _write_file(path: Path, plan: _Plan, payload: bytes, num_threads: int) -> torch.Tensor:
    """Write the leaves (and the metadata ``payload`` after them) into a new file at ``path``
    with ``pwrite``, then map it: the whole file as a ``uint8`` tensor.

    Copying into a fresh shared mapping instead faults its pages in from torch's intra-op
    threads at once, which contend on the file's page allocation: 10-30x slower for many
    leaves (upstream's tutorial ``serialization_speed.py``). Padding bytes stay zeros (the file
    is extended first)."""
    if path.exists():
        os.remove(path)  # (a mapping of the old file keeps its own inode)
    size = plan.size + len(payload)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        os.ftruncate(fd, size)

        def write(i: int) -> None:
            part = plan.parts[i].detach().cpu().resolve_conj().resolve_neg().contiguous()
            flat = part.reshape(-1)
            if flat.numel() == 1:  # (one element is "contiguous" at any stride; view needs 1)
                flat = flat.as_strided((1,), (1,))
            if flat.numel():
                _pwrite_all(fd, flat.view(torch.uint8).numpy().data, plan.starts[i])

        if num_threads > 1 and len(plan.parts) > 1:
            with concurrent.futures.ThreadPoolExecutor(num_threads) as pool:
                list(pool.map(write, range(len(plan.parts))))
        else:
            for i in range(len(plan.parts)):
                write(i)
        _pwrite_all(fd, memoryview(payload), plan.size)
    finally:
        os.close(fd)
    return torch.from_file(str(path), shared=True, size=size, dtype=torch.uint8)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    data = data.cast("B")
    while data:
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


def _new_storage(size: int, device: Any, share: bool, pin: bool) -> tuple[torch.Tensor, Any]:
    if (
        size >= BYTES_BACKED
        and torch.device(device).type == "cpu"
        and not (share or pin or torch.compiler.is_compiling())  # (frombuffer is not traced)
    ):
        return _bytes_storage(size)
    storage = torch.empty(size, dtype=torch.uint8, device=device)  # (_copy_leaves zeroes pads)
    if share:
        storage.share_memory_()
    if pin:
        storage = storage.pin_memory()
    return storage, None


def _json_default(obj: Any) -> Any:
    if isinstance(obj, type):  # a tensorclass: its name (a file cannot hold the class)
        return obj.__name__
    raise TypeError(
        f"consolidate(filename=...): the metadata holds {obj!r} ({type(obj).__name__}), which a "
        "JSON file cannot hold; keep non-tensor entries to JSON values (str, numbers, lists, "
        "dicts) or consolidate in memory."
    )


def _consolidate(
    td: Any,
    filename: Any = None,
    *,
    num_threads: int = 0,
    device: Any = None,
    share_memory: bool = False,
    pin_memory: bool = False,
) -> Any:
    plan = _Plan()
    meta = _plan_node(td, plan)
    payload = b""
    if filename is not None:
        payload = json.dumps(meta, default=_json_default).encode()
        payload += len(payload).to_bytes(8, "little")
    if device is None:
        device = td.device if filename is None else torch.device("cpu")
    device = "cpu" if device is None else device
    views: dict[Any, Any] = {}
    if filename is not None:
        full, data = _write_file(Path(filename), plan, payload, num_threads), None
    else:
        full, data = _new_storage(plan.size, device, share_memory, pin_memory)
        _copy_leaves(full, plan, num_threads, views)
    storage = full[: plan.size]
    out = _finish(td, meta, storage, views, on_file=filename is not None)
    if filename is not None:
        out._consolidated["filename"] = str(filename)
    if data is not None:  # (checked against the storage's address when pickled: see pickling)
        out._consolidated["bytes"] = (data, storage.data_ptr())
    return out


def _finish(
    td: Any, meta: dict[str, Any], storage: torch.Tensor, views: Any, on_file: bool = False
) -> Any:
    """The consolidated tensordict of ``td``'s structure over the filled ``storage``, locked."""
    out = _rebuild(td, meta, storage, torch.device("cpu") if on_file else None, views)
    if on_file or td.device is not None:  # (a file-backed result is on the cpu)
        _set_device_tree(out, storage.device)
    _attach(out, storage, meta)
    return out.lock_()


class Layout:
    """What :meth:`~ConsolidateMixin.consolidate` makes of ``td``, planned before a byte is copied:
    the metadata, the storage's size and the place of each tensor in it.

    :meth:`fill` copies the tensors into a storage, all of them or those placed before a byte
    offset (so that a transfer can send the first bytes while the next ones are copied), and
    :meth:`finish` gives the consolidated tensordict over the filled storage.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> layout = Layout(TensorDict(a=torch.ones(3), b=torch.zeros(2, dtype=torch.int64)))
        >>> layout.size  # each tensor padded to 8 bytes
        32
        >>> storage = torch.empty(layout.size, dtype=torch.uint8)
        >>> layout.fill(storage, 8)  # 'a' (12 bytes + 4 of padding) is in place
        16
        >>> layout.fill(storage)
        32
        >>> td = layout.finish(storage)
        >>> td.is_consolidated(), td["a"].untyped_storage().data_ptr() == storage.data_ptr()
        (True, True)
    """

    def __init__(self, td: Any) -> None:
        self.td = td
        self._plan = _Plan()
        self.metadata: dict[str, Any] = _plan_node(td, self._plan)
        self.size: int = self._plan.size
        self._views: dict[Any, Any] = {}
        self._next = 0  # the first tensor not copied yet

    def fill(self, storage: torch.Tensor, until: int | None = None) -> int:
        """Copy into ``storage`` the tensors not copied yet that start before byte ``until``
        (all of them by default); return the offset up to which ``storage`` is complete."""
        plan, limit = self._plan, self.size if until is None else until
        hi = bisect.bisect_left(plan.starts, limit, lo=self._next)
        done = _copy_run(storage, plan, self._next, hi, self._views)
        self._next = hi
        return done

    def finish(self, storage: torch.Tensor) -> Any:
        """The consolidated tensordict over ``storage`` (filled by :meth:`fill`), locked."""
        return _finish(self.td, self.metadata, storage, self._views)


def _attach(td: Any, storage: torch.Tensor, meta: dict[str, Any]) -> Any:
    target = td._tensordict if _is_tc(td) else td
    target._consolidated = {"storage": storage, "metadata": meta}
    return td


def _strides(shape: Any) -> tuple[int, ...]:
    """A contiguous tensor's strides for ``shape`` (as torch computes them)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _typed_view(
    storage: torch.Tensor, dtype: torch.dtype, shape: Any, start: int, end: int, views: Any
) -> torch.Tensor:
    """The ``dtype`` tensor of ``shape`` at bytes ``[start, end)`` of ``storage``.

    ``views`` (a dict per storage, or None) keeps ``storage`` viewed as each dtype, so that a
    leaf costs one ``as_strided`` (~1 µs) instead of a slice and two views (~3 µs): a hundred
    leaves are viewed twice when consolidating, once when unpickling.
    """
    size = dtype.itemsize
    if torch.compiler.is_compiling():  # (storage_offset() is not traced: slice and view)
        views = None
    if views is not None and not start % size and math.prod(shape) * size == end - start:
        flat = views.get(dtype)
        if flat is None and _viewable(storage, size):
            flat = views[dtype] = storage.view(dtype)
        if flat is not None:
            return flat.as_strided(shape, _strides(shape), flat.storage_offset() + start // size)
    return storage[start:end].view(dtype).view(shape)  # (raises if the sizes disagree)


def _viewable(storage: torch.Tensor, size: int) -> bool:
    """Whether ``storage`` (a consolidated one: 1-d ``uint8``) views as a dtype of ``size``."""
    return (
        storage.dtype is torch.uint8
        and storage.dim() == 1
        and storage.stride(0) == 1
        and not storage.numel() % size
        and not storage.storage_offset() % size
    )


def _view(storage: torch.Tensor, leaf: Any, views: Any = None) -> torch.Tensor:
    dtype_name, shape, start, end, pad = leaf[:5]  # (end: after the padding)
    dtype = _DTYPE_NAMES.get(dtype_name) or getattr(torch, dtype_name.rsplit(".", 1)[-1])
    return _typed_view(storage, dtype, shape, start, end - pad, views)


_DTYPE_NAMES: dict[str, torch.dtype] = {
    str(d): d for d in vars(torch).values() if isinstance(d, torch.dtype)
}


def _leaf(storage: torch.Tensor, leaves: dict[str, Any], key: str, views: Any = None) -> Any:
    """The tensor ``key`` of a node's ``leaves``: a view of ``storage`` (jagged: rebuilt)."""
    if key in leaves:
        return _view(storage, leaves[key], views)
    offsets = leaves[_OFFSETS + key]
    lengths = leaves.get(_LENGTHS + key)
    return torch.nested.nested_tensor_from_jagged(
        _view(storage, leaves[_VALUES + key], views),
        _view(storage, offsets, views),
        lengths=None if lengths is None else _view(storage, lengths, views),
        jagged_dim=offsets[5] if len(offsets) > 5 else 1,
    )


def _rebuild(
    like: Any, meta: dict[str, Any], storage: torch.Tensor, device: Any, views: Any = None
) -> Any:
    """A tensordict of ``like``'s structure whose tensors are views of ``storage``."""
    views = {} if views is None else views
    if _is_lazy(like):
        members = [
            _rebuild(m, meta[str(i)], storage, device, views)
            for i, m in enumerate(like.tensordicts)
        ]
        out = factory.LazyStackedTensorDict(*members, stack_dim=like.stack_dim)
        name = meta["cls_metadata"].get("stack_dim_name")
        if name is not None:
            out._stack_name = name
        return out
    source: dict[str, Any] = {}
    for key, value in like._own_items():
        if isinstance(value, torch.Tensor):
            source[key] = _leaf(storage, meta["leaves"], key, views)
        elif is_non_tensor(value):
            source[key] = value if device is None else value.to(device)
        elif _is_tc(value):
            inner = _rebuild(value._tensordict, meta[key], storage, device, views)
            source[key] = type(value)._from_tensordict(inner, dict(value._non_tensordict))
        else:
            source[key] = _rebuild(value, meta[key], storage, device, views)
    out = like._new_dense(source, like.batch_size, like._names_or_none())
    out._set_device(storage.device if like.device is not None else None)
    return out


def move_consolidated(td: Any, device: torch.device, non_blocking: bool) -> Any:
    """A consolidated tensordict on ``device``: its storage moved in one copy."""
    cons = td._consolidated
    storage = cons["storage"].to(device, non_blocking=non_blocking)
    out = _rebuild(td, cons["metadata"], storage, device)
    _set_device_tree(out, device)
    _attach(out, storage, cons["metadata"])
    return out.lock_() if td.is_locked else out


def _set_device_tree(td: Any, device: torch.device) -> None:
    if _is_lazy(td):
        for member in td.tensordicts:
            _set_device_tree(member, device)
        return
    td._set_device(device)
    for _, value in td._own_items():
        inner = value._tensordict if _is_tc(value) else value
        if hasattr(inner, "_set_device") and not is_non_tensor(inner):
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
    meta = json.loads(bytes(full[data_size:-8].numpy()).decode())
    storage = full[:data_size]
    out = _from_meta(meta, storage)
    _attach(out, storage, meta)
    out._consolidated["filename"] = str(filename)
    return out


def rebuild_consolidated(metadata: dict[str, Any], storage: torch.Tensor) -> Any:
    """Module-level rebuild of a pickled consolidated tensordict: views of ``storage``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.core.behaviour.consolidate import rebuild_consolidated
        >>> tdc = TensorDict(a=torch.arange(3), batch_size=[3]).consolidate()
        >>> from tensordict._reductions import _rebuild_tensordict_files_consolidated as rebuild
        >>> cons = tdc._consolidated
        >>> again = rebuild(cons["metadata"], cons["storage"])
        >>> again.is_consolidated(), again["a"]
        (True, tensor([0, 1, 2]))
    """
    return _attach(_from_meta(metadata, storage), storage, metadata)


# Pickles name the rebuild function by upstream's path (``tensordict._reductions`` re-exports it),
# so that a consolidated tensordict pickled here loads with upstream's package and vice versa.
rebuild_consolidated.__module__ = "tensordict._reductions"
rebuild_consolidated.__qualname__ = rebuild_consolidated.__name__ = (
    "_rebuild_tensordict_files_consolidated"
)


def _sub_nodes(meta: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(k, v) for k, v in meta.items() if k not in _NODE_KEYS and isinstance(v, dict)]


def _leaf_keys(leaves: dict[str, Any]) -> list[str]:
    keys: list[str] = []
    for name in leaves:
        if name.startswith(_VALUES):
            keys.append(name[len(_VALUES) :])
        elif not name.startswith((_LENGTHS, _OFFSETS)):
            keys.append(name)
    return keys


def _non_tensor(entry: Any) -> NonTensorData:
    data, batch_size, device = entry
    return NonTensorData(data, batch_size=batch_size, device=device)


def _from_meta(meta: dict[str, Any], storage: torch.Tensor, views: Any = None) -> Any:
    """The tensordict ``meta`` describes, its tensors views of ``storage``."""
    views = {} if views is None else views
    cls = meta.get("cls")
    cls_meta = meta.get("cls_metadata", {})
    if cls == "LazyStackedTensorDict":
        members = [
            _from_meta(sub, storage, views) for _, sub in sorted(_sub_nodes(meta), key=_index)
        ]
        out = factory.LazyStackedTensorDict(*members, stack_dim=cls_meta.get("stack_dim", 0))
        if cls_meta.get("stack_dim_name") is not None:
            out._stack_name = cls_meta["stack_dim_name"]
        return out.lock_() if cls_meta.get("is_locked") else out
    if cls == "NonTensorStack":
        return _stack_from_meta(meta)
    return _dense_from_meta(meta, storage, views)


def _index(item: tuple[str, Any]) -> int:
    return int(item[0])


def _stack_from_meta(meta: dict[str, Any]) -> NonTensorStack:
    rows: dict[int, Any] = {int(k): _non_tensor(v) for k, v in meta["non_tensors"].items()}
    rows.update({int(k): _stack_from_meta(sub) for k, sub in _sub_nodes(meta)})
    if not rows:
        shape = meta.get("cls_metadata", {}).get("batch_size") or [0]
        return NonTensorStack.from_array(np.empty(shape, dtype=object))
    return NonTensorStack(*(rows[i] for i in sorted(rows)))


def _dense_from_meta(meta: dict[str, Any], storage: torch.Tensor, views: Any) -> Any:
    cls_meta = meta["cls_metadata"]
    device = cls_meta.get("device")
    td = factory.TensorDict(batch_size=cls_meta["batch_size"], device=device and storage.device)
    for key in _leaf_keys(meta["leaves"]):
        td._set_str(key, _leaf(storage, meta["leaves"], key, views), validated=True)
    for key, entry in meta["non_tensors"].items():
        td._set_str(key, _non_tensor(entry), validated=True)
    for key, sub in _sub_nodes(meta):
        value = _from_meta(sub, storage, views)
        tc: Any = sub.get("cls_metadata", {}).get("tensorclass", sub.get("cls"))
        if getattr(tc, "_is_tensorclass", False) is True:  # (a class; from a file: a name)
            value = tc._from_tensordict(value)
        td._set_str(key, value, validated=True)
    if any(n is not None for n in cls_meta.get("names") or []):
        td.names = cls_meta["names"]
    return td.lock_() if cls_meta.get("is_locked") else td


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

        Dense tensordicts, lazy stacks, tensorclasses, non-tensor entries and jagged nested
        tensors are kept as they are; the copy pickles and moves between devices as one buffer.

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
        )

    def is_consolidated(self) -> bool:
        """Whether the tensors are views of one storage made by :meth:`consolidate`."""
        return getattr(self, "_consolidated", None) is not None

    @classmethod
    def from_consolidated(cls, filename: Any) -> Any:
        """A tensordict read from a file written by ``consolidate(filename=...)``."""
        return from_consolidated(filename)


publish_as("tensordict._td", from_consolidated)  # upstream's path
