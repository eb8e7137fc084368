"""Tiny chunks: several small results travel home in one message, decoded in one go.

When chunks take microseconds, sending each result on its own costs more than the chunk: a
system call and a pickle in the worker, a wake-up, a read and a decode in the parent. While the
parent runs tiny chunks (see ``window.TINY_CHUNK_SECONDS``), it hands a worker a run of
consecutive chunks in one task message, and the worker holds the small results of fast chunks
(a :class:`Coalescer`) and sends them together when one of these bounds is reached:

- :data:`MAX_HELD` results, or :data:`MAX_BYTES` bytes of elements;
- the oldest held result is :data:`MAX_AGE_SECONDS` old (checked after each chunk);
- the worker has no further task in hand (it would otherwise wait with results the parent needs);
- a result that is not small, a chunk slower than :data:`FAST_SECONDS`, or an error comes: the
  held results go first, so a worker's answers keep their order.

Results that qualify: ``None`` (``map(out=...)`` workers write their slice and return nothing),
and flat :class:`~tensordict.TensorDict` results of plain CPU tensors of a NumPy dtype, at most
``core.pickling.SMALL_BYTES`` of elements. A held result's bytes are taken when it is held (as
sending it would: ``fn`` may reuse its output buffers). Consecutive results of one layout (keys,
dtypes, shapes, batch size, device, lock) form a group whose leaves are concatenated key by key:
the parent builds one tensor per key for the whole group and cuts it into the results.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import torch

from tensordict.core.dense import TensorDict
from tensordict.core.serial.pickling import _DEVICES, _DTYPES, _NAMES, _NUMPY_OK, SMALL_BYTES

__all__ = ["BATCH_TAG", "FULL", "HELD", "Coalescer", "unpack_groups"]

#: the tag of a message holding several results: ``(BATCH_TAG, ks, groups)``
BATCH_TAG = "ok:batch"
#: at most this many results per message (also the length of the runs of chunks the parent
#: sends, ``window.TINY_RUN``). 64 rather than 32 halves the messages, and with them the wake-ups
#: of the parent, which on 2 cores preempt a worker: ~0.52 -> ~0.60 of the bare processes' speed
#: on the tiny workload (``benchmarks/cpu_bound.py``); more gains little
MAX_HELD = 64
#: at most this many bytes of result elements per message
MAX_BYTES = 32 * 1024
#: a held result is sent once it is this old, whatever else is held (a full batch of chunks of
#: ~20 us stays under it)
MAX_AGE_SECONDS = 2e-3
#: a chunk that took longer than this is not held (nor are the ones held before it)
FAST_SECONDS = 200e-6
_ALIGN = 16
#: what :meth:`Coalescer.hold` answers for a result it held
HELD, FULL = 1, 2

Layout = tuple[Any, ...]
_DENSE, _TENSOR, _STRIDED = TensorDict, torch.Tensor, torch.strided
_COMPLEX = frozenset((torch.complex64, torch.complex128))
#: the layout of a ``None`` result
_NONE: Layout = ()
_string_at = ctypes.string_at


def _small_copy(result: Any) -> tuple[Layout, list[bytes], int] | None:
    """``(layout, bytes of each leaf, their total)`` of a small flat result that may be held,
    else None: the checks and the copy in one pass over the leaves (once per tiny chunk).

    Examples:
        >>> from tensordict import TensorDict
        >>> _small_copy(TensorDict({"y": torch.zeros(2)}, [2]))[1:]
        ([b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'], 8)
        >>> _small_copy(torch.zeros(2)) is None  # bare tensors travel on their own
        True
    """
    if result.__class__ is not _DENSE or result._names is not None or result._is_memmap:
        return None
    device = result._device
    if device is not None and device.type != "cpu":
        return None
    leaves = result._tensordict
    signature: list[Any] = []  # dtype, shape of each leaf
    data = []
    total = 0
    for t in leaves.values():
        if t.__class__ is not _TENSOR:
            return None
        dtype = t.dtype
        if dtype not in _NUMPY_OK or t.requires_grad or not t.is_cpu or t.layout is not _STRIDED:
            return None
        if dtype in _COMPLEX and (t.is_conj() or t.is_neg()):  # lazy views numpy cannot read
            return None
        n = t.nbytes
        total += n
        if total > SMALL_BYTES:
            return None
        signature += (dtype, t.shape)
        # the bytes now, as a result sent at once would be: fn may reuse its output buffers
        data.append(_string_at(t.data_ptr(), n) if n and t.is_contiguous() else t.numpy().tobytes())
    if not data:
        return None
    layout = (result._batch_size, result._is_locked, device, tuple(leaves), tuple(signature))
    return layout, data, total


class Coalescer:
    """The results a worker holds back to send several at once (see the module's docstring)."""

    __slots__ = ("held", "ks", "layouts", "nbytes", "since")

    def __init__(self) -> None:
        self.ks: list[int] = []
        self.held: list[Any] = []
        self.layouts: list[Layout] = []
        self.nbytes = 0
        self.since = 0.0

    def __len__(self) -> int:
        return len(self.ks)

    def hold(self, k: int, result: Any, seconds: float, now: float) -> int:
        """Hold chunk ``k``'s result if it may wait (small, and its chunk took ``seconds`` at
        most :data:`FAST_SECONDS`): :data:`HELD`, or :data:`FULL` when a bound is reached
        (send what is held now). 0: not held (send what is held, then this result, now)."""
        if seconds > FAST_SECONDS:
            return 0
        data: list[bytes] = []
        if result is None:
            layout, size = _NONE, 0
        else:
            found = _small_copy(result)
            if found is None:
                return 0
            layout, data, size = found
        if not self.ks:
            self.since = now
        self.ks.append(k)
        self.held.append(data)
        self.layouts.append(layout)
        self.nbytes += size
        if (
            len(self.ks) >= MAX_HELD
            or self.nbytes >= MAX_BYTES
            or now - self.since >= MAX_AGE_SECONDS
        ):
            return FULL
        return HELD

    def take(self) -> tuple[str, list[int], list[tuple[int, Layout, bytes]]]:
        """The message of every held result (in order), and forget them."""
        groups = []
        start = 0
        layouts = self.layouts
        for i in range(1, len(layouts) + 1):
            if i == len(layouts) or layouts[i] != layouts[start]:
                groups.append(_pack_group(self.held[start:i], layouts[start]))
                start = i
        msg = (BATCH_TAG, self.ks, groups)
        self.ks, self.held, self.layouts, self.nbytes = [], [], [], 0
        return msg


def _pack_group(results: list[list[bytes]], layout: Layout) -> tuple[int, Layout, bytes]:
    """``(count, layout, data)``: each key's leaves (bytes) of every result, one after the other
    (the layout with builtins only: sizes as tuples, dtypes and device by name)."""
    if layout == _NONE:
        return len(results), layout, b""
    batch_size, locked, device, keys, signature = layout
    dtypes, shapes = signature[0::2], signature[1::2]
    wire = (
        tuple(batch_size),
        locked,
        None if device is None else str(device),
        keys,
        tuple([_NAMES[d] for d in dtypes]),
        tuple([tuple(s) for s in shapes]),
    )
    parts = []
    for j in range(len(keys)):
        data = b"".join([r[j] for r in results])
        parts.append(data)
        if len(data) % _ALIGN:  # every key's block starts aligned, as torch's own buffers
            parts.append(bytes(_ALIGN - len(data) % _ALIGN))
    return len(results), wire, b"".join(parts)


def unpack_groups(groups: list[tuple[int, Layout, bytes]]) -> list[Any]:
    """The results of a batch message, in order (their leaves share one buffer per group)."""
    out: list[Any] = []
    for count, layout, data in groups:
        if layout == _NONE:
            out += [None] * count
            continue
        out += _unpack_group(count, layout, data)
    return out


def _unpack_group(count: int, layout: Layout, data: bytes) -> list[Any]:
    batch_size, locked, where, keys, dtypes, shapes = layout
    buf = bytearray(data)
    columns: list[Sequence[torch.Tensor]] = []
    offset = 0
    for name, shape in zip(dtypes, shapes):
        dtype = _DTYPES[name]
        numel = math.prod(shape)
        if not numel:
            columns.append([torch.empty(shape, dtype=dtype) for _ in range(count)])
            continue
        flat = torch.frombuffer(buf, dtype=dtype, count=count * numel, offset=offset)
        offset += -(-count * numel * flat.element_size() // _ALIGN) * _ALIGN
        columns.append(flat.view(count, *shape).unbind(0))
    size = torch.Size(batch_size)
    device = None if where is None else _DEVICES.get(where) or torch.device(where)
    new = _DENSE._new_unsafe
    return [new(dict(zip(keys, leaves)), size, device, lock=locked) for leaves in zip(*columns)]
