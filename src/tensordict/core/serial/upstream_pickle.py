"""Pickles in upstream tensordict's layout, so saved objects load with either package.

Upstream 0.15 pickles a ``TensorDict`` or a ``LazyStackedTensorDict`` as
``tensordict._reductions._make_td(cls, state)``, where ``state`` is a dict of the instance's
attributes (``_tensordict``, ``_batch_size``, ``_device``, ``_td_dim_names``, ``_is_locked``,
...; a lazy stack: ``tensordicts``, ``stack_dim``); non-tensor entries and tensorclasses pickle
as ``cls.__new__(cls)`` followed by ``__setstate__(state)`` with ``state`` holding
``tensordict`` and ``non_tensordict``. Classes are referenced by upstream's module paths
(``tensordict._td.TensorDict``...), which this package re-exports.

This module writes that layout and reads it back into this package's classes. Leaves travel in
forms upstream reads: tensors (torch's reduction) under protocol 2, ``torch.save``'s; plain CPU
tensors as ``torch.from_numpy(array)`` under protocols 3+ (numpy's pickling is ~10x faster),
and the leaves of a small tensordict as views of one ``bytearray`` (:func:`_blob`).
"""

from __future__ import annotations

import copyreg
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.consolidate import rebuild_consolidated
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack

__all__ = [
    "LockedSchema",
    "make_td",
    "reduce_lazy",
    "reduce_tensordict_upstream",
    "register_safe_globals",
]

#: the dtypes a tensor travels as by name (``(dtype name, shape, bytes)``), and those numpy holds
_DTYPES: dict[str, torch.dtype] = {
    str(d): d
    for d in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    )
}
for _name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "complex32"):
    if hasattr(torch, _name):
        _DTYPES[str(getattr(torch, _name))] = getattr(torch, _name)
_NAMES: dict[torch.dtype, str] = {d: n for n, d in _DTYPES.items()}
#: dtypes that numpy can hold (so ``t.numpy()`` works)
_NUMPY_OK = frozenset(
    d
    for d in _DTYPES.values()
    if d not in (torch.bfloat16, torch.complex32)
    and not str(d).startswith(("torch.float8", "torch.uint16", "torch.uint32", "torch.uint64"))
)


class LockedSchema(tuple):  # type: ignore[type-arg]
    """The keys of a locked tensordict, as upstream's pickles carry them (read back, unused:
    the keys are those of the entries)."""

    __module__ = "tensordict.utils"
    __qualname__ = "_LockedSchema"

    def __new__(cls, keys: Any = ()) -> LockedSchema:
        return tuple.__new__(cls, keys)

    def __repr__(self) -> str:
        return f"_LockedSchema(keys={tuple(self)!r})"


LockedSchema.__name__ = "_LockedSchema"


class _NumpyLeaf:
    """A plain CPU tensor pickled as ``torch.from_numpy(array)``: numpy's pickling writes only
    the tensor's own elements and costs a few microseconds (torch's own tensor pickling nests a
    ``torch.save`` per storage, ~0.1 ms), and it needs nothing but torch and numpy to load."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        array = self.tensor.numpy()
        if isinstance(protocol, int) and protocol >= 5:
            # protocol 5 may hand the array's memory out of band, and the loader may give it
            # back read-only (Ray's object store, a read-only mapping): numpy.require(..., "W")
            # copies it then (and only then), so the tensor never aliases memory it may not
            # write (writing there crashed the process or changed the stored object)
            return (torch.from_numpy, (_Call(np.require, (array, None, "W")),))
        return (torch.from_numpy, (array,))


_STRIDED = torch.strided


def _numpy_ok(value: torch.Tensor) -> bool:
    """Whether ``value.numpy()`` works: a CPU tensor of a numpy dtype, no autograd, no
    conjugate / negative bit (the cheapest checks first: this runs once per leaf)."""
    return (
        value.dtype in _NUMPY_OK
        and value.is_cpu
        and value.layout is _STRIDED
        and not value.requires_grad
        and not value.is_nested
        and not value.is_conj()
        and not value.is_neg()
    )


def _leaf(value: Any, protocol: int) -> Any:
    """How a leaf travels. Under protocol 2 (``torch.save``'s, whose pickler writes storages
    apart, and whose ``weights_only`` loader accepts tensors only) a tensor stays a tensor,
    copied first if it views a larger storage (torch's reduction would write all of it); under
    protocols 3+ a plain CPU tensor of a numpy dtype travels as a numpy array."""
    if type(value) is not torch.Tensor:
        return value
    if protocol >= 3 and _numpy_ok(value):
        return _NumpyLeaf(value)
    if value.layout is _STRIDED and not value.is_nested:
        storage = value.untyped_storage()
        if storage.nbytes() > value.numel() * value.element_size() and not storage.is_shared():
            return value.clone()
    return value


class _Call:
    """Pickles as the call ``func(*args)`` (``func`` from torch, numpy or the builtins, which
    upstream's environment has too): lets a pickle compose the calls that rebuild a value."""

    __slots__ = ("args", "func")

    def __init__(self, func: Any, args: tuple[Any, ...]) -> None:
        self.func, self.args = func, args

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (self.func, self.args)


_RECONSTRUCT = np.empty(0, np.uint8).__reduce__()[0]  # numpy's own unpickling entry point
_UINT8 = np.dtype(np.uint8)


class _BytesArray:
    """A ``bytes`` object pickled as numpy pickles a ``uint8`` array of those bytes (protocols
    3 and 4; numpy's unpickling aliases the bytes): the pickler writes the object itself, where
    a tensor's or an array's reduction would first copy its memory into a new ``bytes``."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        state = (1, (len(self.data),), _UINT8, False, self.data)
        return (_RECONSTRUCT, (np.ndarray, (0,), b"b"), state)


def bytes_tensor(data: bytes) -> _Call:
    """What pickles as ``torch.from_numpy(uint8 array of data)`` without copying ``data``."""
    return _Call(torch.from_numpy, (_BytesArray(data),))


#: a tensordict whose leaves are plain CPU tensors of fewer bytes than this in all pickles them
#: as one buffer (protocols 3+); larger ones travel leaf by leaf (:class:`_NumpyLeaf`), so a
#: leaf of 64 KiB or more still presents its own buffer (the map_iter channel sends those
#: through shared memory)
BLOB_BYTES = 64 * 1024
_BLOB_ALIGN = 16  # every leaf starts 16-byte aligned in the buffer (numpy's largest alignment)


def _blob(leaves: dict[str, Any]) -> _Call | None:
    """Small leaves as ``dict(zip(keys, map(torch.from_numpy, map(numpy.ndarray, shapes,
    dtypes, buffers, offsets))))`` over one ``bytearray``: one bytes object to pickle instead
    of one numpy array per leaf (~2x faster both ways); None when a leaf does not qualify or
    they hold :data:`BLOB_BYTES` or more (or there are none)."""
    if not leaves:
        return None
    shapes, dtypes, offsets, chunks = [], [], [], []
    end = 0
    for value in leaves.values():
        if type(value) is not torch.Tensor or value.dtype not in _NUMPY_OK:
            return None
        try:  # (refuses what numpy cannot view: autograd, other devices, conj/neg bits...)
            array = value.numpy()
        except (TypeError, RuntimeError):
            return None
        size = array.nbytes
        if end + size >= BLOB_BYTES:
            return None
        shapes.append(array.shape)
        dtypes.append(array.dtype.str)  # ("<f4": a string pickles and loads faster than a dtype)
        offsets.append(end)
        chunks.append(array.tobytes())
        pad = -size % _BLOB_ALIGN
        if pad:
            chunks.append(bytes(pad))
        end += size + pad
    buffer = _Call(bytearray, (b"".join(chunks),))  # (loads as a writable buffer of its own)
    arrays = _Call(map, (np.ndarray, shapes, dtypes, (buffer,) * len(shapes), offsets))
    return _Call(dict, (_Call(zip, (list(leaves), _Call(map, (torch.from_numpy, arrays)))),))


def reduce_tensordict_upstream(td: Any, protocol: int = 2) -> tuple[Any, ...]:
    """``(make_td, (cls, state))`` for a dense tensordict, with upstream's state layout.

    Examples:
        >>> import pickle
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.arange(3), batch_size=[3], names=["n"])
        >>> data = pickle.dumps(td)
        >>> b"tensordict._reductions" in data and b"tensordict._td" in data
        True
        >>> pickle.loads(data).names
        ['n']
    """
    state: dict[str, Any] = {
        "_tensordict": (protocol >= 3 and _blob(td._tensordict))
        or {key: _leaf(value, protocol) for key, value in td._tensordict.items()},
        "_device": td._device,
        "_batch_size": torch.Size(td._batch_size),
        "_td_dim_names": list(td._names) if td._names is not None else None,
    }
    if td._is_memmap:
        state["_is_memmap"] = True
        state["_is_shared"] = False
        state["_memmap_prefix"] = td._memmap_prefix
    if td._is_locked:
        state["_is_locked"] = True
    return (make_td, (type(td), state))


def reduce_lazy(td: Any) -> tuple[Any, ...]:
    """``(make_td, (cls, state))`` for a lazy stack, with upstream's state layout."""
    state = {
        "_is_locked": True if td._is_locked else None,
        "stack_dim": td.stack_dim,
        "_batch_size": torch.Size(td.batch_size),
        "tensordicts": list(td.tensordicts),
        "_hook_out": None,
        "_hook_in": None,
        "_td_dim_name": getattr(td, "_stack_name", None),  # (the stack dim's name)
    }
    return (make_td, (type(td), state))


def make_td(cls: type, state: dict[str, Any]) -> Any:
    """Rebuild a tensordict of class ``cls`` from an upstream-layout ``state`` (the callable
    pickles reference as ``tensordict._reductions._make_td``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict._reductions import _make_td as make_td
        >>> td = make_td(TensorDict, {"_tensordict": {"a": torch.zeros(2)},
        ...                           "_batch_size": torch.Size([2]), "_device": None})
        >>> td.batch_size, td["a"]
        (torch.Size([2]), tensor([0., 0.]))
    """
    if isinstance(cls, type) and issubclass(cls, LazyStackedTensorDict):
        return _lazy_from_state(cls, state)
    if isinstance(cls, type) and issubclass(cls, TensorDict):
        return _dense_from_state(cls, state)
    obj: Any = cls.__new__(cls)
    obj.__setstate__(state)
    return obj


# Pickles name the rebuild function by upstream's path (``tensordict._reductions`` re-exports it)
make_td.__module__ = "tensordict._reductions"
make_td.__qualname__ = make_td.__name__ = "_make_td"


def _dense_from_state(cls: Any, state: dict[str, Any]) -> Any:
    device = state.get("_device")
    names = state.get("_td_dim_names")
    if names is not None and all(n is None for n in names):
        names = None
    td = cls._new_unsafe(
        dict(state.get("_tensordict") or {}),
        torch.Size(state.get("_batch_size") or ()),
        torch.device(device) if device is not None else None,
        list(names) if names is not None else None,
        lock=bool(state.get("_is_locked")),
        is_memmap=bool(state.get("_is_memmap")),
    )
    prefix = state.get("_memmap_prefix")
    td._memmap_prefix = str(prefix) if prefix is not None else None
    return td


def _lazy_from_state(cls: Any, state: dict[str, Any]) -> Any:
    members = list(state.get("tensordicts") or ())
    out = cls(*members, stack_dim=state.get("stack_dim", 0))
    if state.get("_td_dim_name") is not None:
        out._stack_name = state["_td_dim_name"]
    if state.get("_is_locked"):
        out._set_locked(True)
    return out


def reduce_non_tensor_data(data: Any) -> tuple[Any, ...]:
    """A ``NonTensorData`` as upstream pickles it: ``cls.__new__`` then ``__setstate__`` with
    its (empty) tensordict and its ``non_tensordict``."""

    names = data._maybe_names()
    shell = TensorDict._new_unsafe({}, torch.Size(data._batch_size), data._device, names)
    state = {"tensordict": shell, "non_tensordict": dict(data._non_tensordict)}
    return (copyreg.__newobj__, (type(data),), state)  # type: ignore[attr-defined]


def setstate_non_tensor_data(data: Any, state: dict[str, Any]) -> None:
    """``NonTensorData.__setstate__`` for the layout :func:`reduce_non_tensor_data` writes."""
    inner = state["tensordict"]
    data._non_tensordict = dict(state["non_tensordict"])
    data._batch_size = torch.Size(inner.batch_size)
    data._device = inner.device
    data._shell = None
    names = getattr(inner, "_names", None)
    if names is not None and any(n is not None for n in names):
        data.names = names


def reduce_non_tensor_stack(stack: Any) -> tuple[Any, ...]:
    """A ``NonTensorStack`` as upstream pickles it: a lazy stack's state, its members being
    ``NonTensorData`` (or stacks of them) along dim 0."""
    members = [stack[i] for i in range(stack.batch_size[0])] if stack.batch_dims else []
    state = {
        "_is_locked": None,
        "stack_dim": 0,
        "_batch_size": torch.Size(stack.batch_size),
        "tensordicts": members,
        "_hook_out": None,
        "_hook_in": None,
    }
    return (copyreg.__newobj__, (type(stack),), state)  # type: ignore[attr-defined]


def setstate_non_tensor_stack(stack: Any, state: dict[str, Any]) -> None:
    """``NonTensorStack.__setstate__`` for the layout :func:`reduce_non_tensor_stack` writes."""
    import numpy as np

    members = list(state.get("tensordicts") or ())
    stack._shell = None
    stack._device = None
    if not members:
        stack._values = np.empty(tuple(state.get("_batch_size") or (0,)), dtype=object)
        return
    built = type(stack)(*members, stack_dim=state.get("stack_dim", 0))
    stack._values = built._values
    stack._device = built._device


def register_safe_globals() -> None:
    """Let ``torch.load`` with its default ``weights_only=True`` read saved tensordicts (the
    rebuild callables and classes pickles reference), as upstream registers them."""

    torch.serialization.add_safe_globals(
        [
            make_td,
            rebuild_consolidated,
            TensorDict,
            LazyStackedTensorDict,
            NonTensorData,
            NonTensorStack,
            LockedSchema,
            torch.return_types.max,
            torch.return_types.min,
            torch.return_types.cummax,
            torch.return_types.cummin,
            (dict, "tensordict.utils._StringOnlyDict"),
        ]
    )
