"""Pickling of tensordicts.

Plain ``pickle`` and ``torch.save`` write upstream 0.15's layout (see
:mod:`tensordict.core.serial.upstream_pickle`): files load with either package, and a view writes
only its own elements.

The helpers here serve the faster, package-private paths: ``multiprocessing``'s pickler (leaves
stay tensors, so torch moves them to shared memory), and the parallel engine's channel, which
packs plain CPU tensors as ``(dtype, shape, bytes-of-their-own-elements)`` (protocol 5: a
:class:`pickle.PickleBuffer` it can move out of band) and small flat tensordicts as builtins.
Pickles written by earlier versions of this package (:func:`rebuild_tensordict`) still load.
"""

from __future__ import annotations

import math
import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from tensordict.core.behaviour.consolidate import rebuild_consolidated
from tensordict.core.dense import TensorDict
from tensordict.core.serial.upstream_pickle import (
    _DTYPES,
    _NAMES,
    _NUMPY_OK,
    _leaf,
    bytes_tensor,
    reduce_lazy,
    reduce_tensordict_upstream,
)

__all__ = [
    "reduce_consolidated",
    "reduce_for_multiprocessing",
    "reduce_lazy_stack",
    "register_forking_reducer",
    "pack_flat",
    "pack_small",
    "pack_tensor",
    "rebuild_tensordict",
    "reduce_tensordict",
    "unpack_flat",
    "unpack_small",
    "unpack_tensor",
]


#: tensors smaller than this travel inside the pickle as bytes; larger ones as PickleBuffer
INLINE_BYTES = 64 * 1024


def _packable(t: torch.Tensor) -> bool:
    return (
        t.__class__ is torch.Tensor
        and not t.requires_grad
        and t.layout is torch.strided
        and t.device.type == "cpu"
        and t.dtype in _NAMES
        and not t.untyped_storage().is_shared()
    )


def pack_tensor(t: torch.Tensor, protocol: int) -> tuple[str, tuple[int, ...], Any]:
    """``(dtype name, shape, buffer)`` holding exactly the tensor's elements, C-contiguous."""
    name = _NAMES[t.dtype]
    nbytes = t.numel() * t.element_size()
    if nbytes < INLINE_BYTES or protocol < 5:
        if t.dtype in _NUMPY_OK:
            return (name, tuple(t.shape), t.numpy().tobytes())
        flat = t.contiguous().reshape(-1).view(torch.uint8)
        return (name, tuple(t.shape), flat.numpy().tobytes())
    flat = t.contiguous().reshape(-1).view(torch.uint8)
    return (name, tuple(t.shape), pickle.PickleBuffer(flat.numpy().data))


def unpack_tensor(dtype_name: str, shape: tuple[int, ...], payload: Any) -> torch.Tensor:
    """Inverse of :func:`pack_tensor`; zero-copy when the buffer is writable."""
    dtype = _DTYPES[dtype_name]
    if isinstance(payload, pickle.PickleBuffer):
        payload = payload.raw()
    if len(payload) == 0:
        return torch.empty(shape, dtype=dtype)
    if isinstance(payload, bytes) or memoryview(payload).readonly:
        payload = bytearray(payload)  # e.g. a buffer in Ray's object store: copy, never alias it
    out = torch.frombuffer(payload, dtype=dtype)
    if len(shape) == 1:
        return out
    return out.view(shape)


def reduce_consolidated(td: Any, protocol: Any, plain: int | None = None) -> tuple[Any, ...]:
    """``(rebuild, (metadata, storage))``: a consolidated tensordict pickled as one storage.

    Pickles of any protocol load with either package. The storage travels as a tensor (torch's
    reduction) under protocol 2 (``torch.save``'s) and under a ``multiprocessing`` pickler
    (``plain`` None: torch's reduction shares its memory). Plain pickle with protocol ``plain``
    3+ writes it as ``torch.from_numpy(uint8 array)``: from the ``bytes`` object it lives in
    (protocols 3-4, see :func:`_plain_storage`) or as one buffer numpy presents (protocol 5).

    Examples:
        >>> import pickle
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3])
        >>> tdc = td.consolidate()
        >>> again = pickle.loads(pickle.dumps(tdc, protocol=5))
        >>> again.is_consolidated(), again["b", "c"]
        (True, tensor([1., 1., 1.]))
    """
    cons = (td._tensordict if getattr(type(td), "_is_tensorclass", False) else td)._consolidated
    storage = cons["storage"]
    if plain is not None and plain >= 3 and storage.__class__ is torch.Tensor:
        # plain pickle of a dense tensordict with protocol 3+ (multiprocessing, whose pickler has
        # its own reducer, shares the storage instead): the bytes travel as a numpy array, which
        # either package loads (torch.from_numpy)
        storage = _plain_storage(cons, storage, plain)
    return (rebuild_consolidated, (cons["metadata"], storage))


def _plain_storage(cons: dict[str, Any], storage: torch.Tensor, protocol: int) -> Any:
    """How a consolidated storage travels under plain pickle, protocol 3+: the ``bytes`` object
    that holds it where there is one (protocols 3-4: pickle copies it once, into its output),
    else a numpy array (protocol 5 writes it as one buffer, in band or out of band)."""
    held = cons.get("bytes")  # (a weak reference to the memoryview the storage holds, address)
    if protocol < 5 and held is not None and held[1] == storage.data_ptr():
        view = held[0]()
        if view is not None:  # the storage still lives there (not moved to shared memory)
            return bytes_tensor(view.obj)
    return _leaf(storage, 3)


def _consolidated_fast_path(td: Any) -> bool:
    """Whether ``td`` pickles as its storage: consolidated, and a plain TensorDict (subclasses
    keep state the metadata does not describe)."""
    return getattr(td, "_consolidated", None) is not None and type(td) is TensorDict


def reduce_tensordict(td: Any, protocol: Any) -> tuple[Any, ...]:
    """``__reduce_ex__`` of :class:`~tensordict.TensorDict`: upstream's layout
    (``tensordict._reductions._make_td``), so pickles and ``torch.save`` files load with either
    package; a consolidated one pickles as its storage and metadata."""
    proto = protocol if isinstance(protocol, int) else pickle.DEFAULT_PROTOCOL
    if _consolidated_fast_path(td):
        return reduce_consolidated(td, proto, plain=proto)
    return reduce_tensordict_upstream(td, proto)


def reduce_lazy_stack(td: Any, protocol: Any) -> tuple[Any, ...]:
    """``__reduce_ex__`` of :class:`~tensordict.LazyStackedTensorDict`: upstream's layout, or, for
    a consolidated stack, its storage and metadata (:func:`reduce_consolidated`)."""
    if getattr(td, "_consolidated", None) is not None:
        return reduce_consolidated(td, protocol)
    return reduce_lazy(td)


def reduce_for_multiprocessing(td: Any) -> tuple[Any, ...]:
    """How ``multiprocessing`` (its ``ForkingPickler``: ``mp.Queue``, ``mp.Process`` under spawn,
    DataLoader workers) pickles a :class:`~tensordict.TensorDict`: the leaves stay tensors, so
    torch's reductions move them to shared memory and the other process sees the same memory
    (as upstream, and as a plain tensor does). Plain ``pickle`` keeps :func:`reduce_tensordict`.
    A consolidated tensordict sends its one storage (one shared segment) and its metadata.
    """
    if _consolidated_fast_path(td):
        return reduce_consolidated(td, None)
    return (
        rebuild_tensordict,
        (
            type(td),
            dict(td._tensordict),
            tuple(td._batch_size),
            str(td._device) if td._device is not None else None,
            td._names,
            td._is_locked,
            td._is_memmap,
            td._memmap_prefix,
        ),
    )


def rebuild_tensordict(
    cls: type,
    packed: dict[str, Any],
    batch_size: tuple[int, ...],
    device: str | None,
    names: list[str | None] | None,
    locked: bool,
    is_memmap: bool,
    prefix: str | None,
) -> Any:
    """Module-level rebuild function (cheap to reference under pickle and cloudpickle); also
    reads pickles written by earlier versions of this package."""
    source = {
        key: unpack_tensor(*value) if value.__class__ is tuple else value
        for key, value in packed.items()
    }
    td = cls._new_unsafe(  # type: ignore[attr-defined]
        source,
        torch.Size(batch_size),
        torch.device(device) if device is not None else None,
        names,
        lock=locked,
        is_memmap=is_memmap,
    )
    td._memmap_prefix = prefix
    return td


_DEVICES = {"cpu": torch.device("cpu")}
#: NumPy dtype -> the name a tensor of the matching torch dtype travels under
_NUMPY_NAMES = {
    torch.empty(0, dtype=d).numpy().dtype: n for d, n in _NAMES.items() if d in _NUMPY_OK
}
_ALIGN = 16
#: flat tensordicts up to this many bytes of elements may use :func:`pack_small`
SMALL_BYTES = 4096


def pack_small(td: Any) -> tuple[Any, ...] | None:
    """A flat, small tensordict as a tuple of builtins (pickles ~2x faster than the tensordict).

    Only a plain :class:`~tensordict.TensorDict` qualifies: no names, no device but the CPU, not
    memory-mapped nor consolidated, plain contiguous CPU tensors of a numpy dtype,
    :data:`SMALL_BYTES` of elements at most (the per-chunk results of ``map_iter`` on tiny
    chunks). Anything else gives None.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"y": torch.arange(3.0), "z": torch.ones(3, 2)}, [3])
        >>> back = unpack_small(pack_small(td))
        >>> torch.equal(back["y"], td["y"]) and torch.equal(back["z"], td["z"])
        True
    """
    if td.__class__ is not TensorDict or getattr(td, "_consolidated", None) is not None:
        return None  # (a consolidated one travels as its storage: it stays consolidated)
    device = td._device
    if td._names is not None or td._is_memmap or (device is not None and device.type != "cpu"):
        return None
    keys, dtypes, shapes, chunks = [], [], [], []
    total = 0
    for key, t in td._tensordict.items():
        if t.__class__ is not torch.Tensor or t.dtype not in _NUMPY_OK or not _packable(t):
            return None
        total += t.numel() * t.element_size()
        if total > SMALL_BYTES:
            return None
        keys.append(key)
        dtypes.append(_NAMES[t.dtype])
        shapes.append(tuple(t.shape))
        data = t.numpy().tobytes()
        chunks.append(data)
        if len(data) % _ALIGN:  # every entry starts 16-byte aligned, as torch's own buffers
            chunks.append(bytes(_ALIGN - len(data) % _ALIGN))
    batch = tuple(td._batch_size)
    where = None if device is None else str(device)
    return (batch, td._is_locked, where, keys, dtypes, shapes, b"".join(chunks))


def unpack_small(packed: tuple[Any, ...]) -> Any:
    """The tensordict :func:`pack_small` packed (its tensors share one new buffer)."""
    batch_size, locked, where, keys, dtypes, shapes, data = packed
    buf = bytearray(data)
    source: dict[str, torch.Tensor] = {}
    offset = 0
    for key, name, shape in zip(keys, dtypes, shapes):
        dtype = _DTYPES[name]
        count = math.prod(shape)
        if not count:
            source[key] = torch.empty(shape, dtype=dtype)
            continue
        flat = torch.frombuffer(buf, dtype=dtype, count=count, offset=offset)
        offset += -(-count * flat.element_size() // _ALIGN) * _ALIGN
        ndim = len(shape)
        source[key] = flat if ndim == 1 else flat.squeeze(0) if not ndim else flat.view(*shape)
    device = None if where is None else _DEVICES.get(where) or torch.device(where)
    return TensorDict._new_unsafe(source, torch.Size(batch_size), device, lock=locked)


def pack_flat(td: Any) -> tuple[tuple[Any, ...], list[memoryview]] | None:
    """A flat tensordict of any size as ``(layout, buffers)``: the layout in builtins, and one
    buffer per leaf holding its elements (C-contiguous; the leaf's own memory when it is
    contiguous). :func:`unpack_flat` builds the tensordict back on buffers of the same bytes.

    The same tensordicts qualify as for :func:`pack_small` (plain, flat, on the CPU, not
    memory-mapped, names or consolidated), with leaves of any dtype :func:`pack_tensor` packs;
    anything else gives None. The parallel engine sends ``map_iter`` results this way: the
    buffers go through shared memory and the layout pickles ~3x faster than the tensordict.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"y": torch.arange(3.0), "z": torch.ones(3, 2, dtype=torch.bool)}, [3])
        >>> layout, buffers = pack_flat(td)
        >>> back = unpack_flat(layout, [bytearray(b) for b in buffers])
        >>> torch.equal(back["y"], td["y"]) and torch.equal(back["z"], td["z"])
        True
    """
    if td.__class__ is not TensorDict or getattr(td, "_consolidated", None) is not None:
        return None
    device = td._device
    if td._names is not None or td._is_memmap or (device is not None and device.type != "cpu"):
        return None
    keys, dtypes, shapes, buffers = [], [], [], []
    for key, t in td._tensordict.items():
        if t.__class__ is not torch.Tensor:
            return None
        # The common leaf (CPU, strided, no grad, a NumPy dtype) in one call: right after fn has
        # streamed its chunk through the caches, every torch attribute read costs ~5-10 us.
        try:
            array = t.numpy()
        except (TypeError, RuntimeError):
            array = None
        name = None if array is None else _NUMPY_NAMES.get(array.dtype)
        if array is not None and name is not None and array.flags.c_contiguous and array.size:
            keys.append(key)
            dtypes.append(name)
            shapes.append(array.shape)
            buffers.append(array.data.cast("B"))
            continue
        if not _packable(t):
            return None
        keys.append(key)
        dtypes.append(_NAMES[t.dtype])
        shapes.append(tuple(t.shape))
        flat = t.resolve_conj().resolve_neg().contiguous().reshape(-1)
        buffers.append(flat.view(torch.uint8).numpy().data)
    where = None if device is None else str(device)
    return (tuple(td._batch_size), td._is_locked, where, keys, dtypes, shapes), buffers


def unpack_flat(layout: tuple[Any, ...], buffers: list[Any]) -> Any:
    """The tensordict :func:`pack_flat` packed, its leaves built on ``buffers`` (writable,
    aligned for their dtype: not copied)."""
    batch_size, locked, where, keys, dtypes, shapes = layout
    source: dict[str, torch.Tensor] = {}
    for key, name, shape, buf in zip(keys, dtypes, shapes, buffers):
        dtype = _DTYPES[name]
        if not len(buf):
            source[key] = torch.empty(shape, dtype=dtype)
            continue
        flat = torch.frombuffer(buf, dtype=dtype)
        source[key] = flat if len(shape) == 1 else flat.view(shape)
    device = None if where is None else _DEVICES.get(where) or torch.device(where)
    return TensorDict._new_unsafe(source, torch.Size(batch_size), device, lock=locked)


def reduce_td(data: Any) -> tuple[Any, Any]:
    """The ``(rebuild, args)`` pair pickling uses for a tensordict: ``rebuild(*args)`` is a copy.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.arange(3), batch_size=[3])
        >>> rebuild, args = reduce_td(td)
        >>> (rebuild(*args) == td).all()
        True
    """
    # (protocol 2: the leaves stay tensors; under 3+ they are objects only a pickler resolves)
    rebuild, args = data.__reduce_ex__(2)[:2]
    return rebuild, args


def register_forking_reducer() -> None:
    """Let ``multiprocessing`` pickle a :class:`~tensordict.TensorDict` with
    :func:`reduce_for_multiprocessing` (``import tensordict`` calls it, in ``_reductions``)."""
    ForkingPickler.register(TensorDict, reduce_for_multiprocessing)
