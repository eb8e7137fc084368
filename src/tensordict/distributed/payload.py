"""A tensordict that the receiving ranks do not know: an envelope (its consolidated metadata, the
size of its storage, its tensorclass) and one consolidated storage.

On the way out (:class:`Outgoing`) a tensordict that is consolidated travels as it is; any other
is laid out at once (:class:`~tensordict.core.behaviour.consolidate.Layout`) and its storage filled
chunk by chunk as the chunks are handed to the transport, so that copying and sending overlap. On
the way in, :func:`rebuild` gives the consolidated tensordict (of the sender's tensorclass, if
this process can import it). Envelopes are pickled: use them only with ranks you trust.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from typing import Any

import torch

from tensordict.core.behaviour.consolidate import Layout, rebuild_consolidated
from tensordict.distributed.wire import pack_object
from tensordict.errors import TransferMismatchError

__all__ = [
    "CHUNK_BYTES",
    "POOL",
    "Outgoing",
    "StoragePool",
    "pieces",
    "read_head",
    "rebuild",
    "resolve_tensorclass",
]

#: the size of the pieces a storage travels in (the last one is smaller)
CHUNK_BYTES = 4 << 20
#: the size of the first message of a transfer: the sizes, and the envelope if it fits
HEAD_BYTES = 64 << 10
MAGIC = 0x7464_0001_656E_7631
_SIZES = 32  # bytes: four int64


class StoragePool:
    """The flat storages this package allocated for tensordicts it built, reused once nothing
    else holds them.

    A broadcast or ``from_remote_init`` in a loop builds a new consolidated tensordict each time,
    whose fresh storage would fault every page in again (on this kind of machine, faulting 64 MiB
    costs more than sending it). The pool keeps a reference to the last few storages of at least
    :data:`POOLED_BYTES`; when one of the same size and device is asked for and only the pool
    still holds it (the tensordict built on it is gone), it is handed out again, its pages warm.
    At most ``max_kept`` storages and ``max_bytes`` are kept; nothing is kept if this version of
    torch cannot tell whether a storage is still used elsewhere.
    """

    def __init__(self, max_kept: int = 4, max_bytes: int = 1 << 30) -> None:
        self.max_kept, self.max_bytes = max_kept, max_bytes
        self._kept: list[torch.Tensor] = []
        self._lock = threading.Lock()

    @staticmethod
    def _unused(t: torch.Tensor) -> bool:
        # the pool's tensor and the storage object made to ask: nothing else holds it
        return bool(_USE_COUNT(t.untyped_storage()._cdata) == 2)  # type: ignore[misc]

    def take(self, size: int, device: Any) -> torch.Tensor:
        """A ``uint8`` tensor of ``size`` bytes on ``device`` (contents undefined)."""
        where = torch.device(device)
        if size < POOLED_BYTES or _USE_COUNT is None:
            return torch.empty(size, dtype=torch.uint8, device=where)
        with self._lock:
            for i, t in enumerate(self._kept):
                if t.numel() == size and t.device == where and self._unused(t):
                    del self._kept[i]  # (by place: == on tensors compares their values)
                    self._kept.append(t)  # (the most recently used last)
                    return t
            t = torch.empty(size, dtype=torch.uint8, device=where)
            self._kept.append(t)
            while len(self._kept) > self.max_kept or (
                len(self._kept) > 1 and sum(k.numel() for k in self._kept) > self.max_bytes
            ):
                self._kept.pop(0)
            return t


_USE_COUNT = getattr(torch._C, "_storage_Use_Count", None)
#: storages smaller than this come from the allocator's heap, already warm
POOLED_BYTES = 1 << 20
#: the package's pool (see :class:`StoragePool`)
POOL = StoragePool()


def _is_tc(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def class_name(cls: type) -> str:
    """``module.QualName`` of a class, as :func:`resolve_tensorclass` reads it."""
    return f"{cls.__module__}.{cls.__qualname__}"


class Outgoing:
    """A tensordict on its way to ranks that do not know it.

    Args:
        td: a tensordict or a tensorclass instance (whose class travels by name).
        device: where the storage lives (default: the tensordict's, else the CPU).
        tensorclass: the name of the class to rebuild on the other side (default: ``td``'s
            class if it is a tensorclass).
    """

    def __init__(self, td: Any, device: Any = None, tensorclass: str | None = None) -> None:
        self.wrapper = td if _is_tc(td) else None
        inner = td._tensordict if self.wrapper is not None else td
        if tensorclass is None and self.wrapper is not None:
            tensorclass = class_name(type(td))
        cons = getattr(inner, "_consolidated", None)
        where = None if device is None else torch.device(device)
        self.layout: Layout | None = None
        self.done: Any = None
        if cons is not None and (where is None or cons["storage"].device == where):
            self.storage, metadata, self.done = cons["storage"], cons["metadata"], inner
        else:
            self.layout = Layout(inner)
            metadata = self.layout.metadata
            where = where or inner.device or torch.device("cpu")
            # (placing the storage elsewhere later, as all_gather does, wastes no copy)
            self.storage = POOL.take(self.layout.size, where)
        extra = dict(self.wrapper._non_tensordict) if self.wrapper is not None else None
        self.envelope = pack_object(
            {
                "metadata": metadata,
                "tensorclass": tensorclass,
                "non_tensordict": extra or None,
                "device": str(self.storage.device),
            }
        )
        self.total = self.storage.numel()
        self._filled = 0 if self.layout is not None else self.total

    def head(self, padded: bool) -> torch.Tensor:
        """What the receivers read first, into a buffer of :data:`HEAD_BYTES`: the envelope's and
        the storage's sizes, and the envelope itself when it fits (``padded``: the whole buffer,
        as a broadcast needs)."""
        sizes = torch.tensor([MAGIC, self.envelope.numel(), self.total, CHUNK_BYTES])
        inline = _SIZES + self.envelope.numel() <= HEAD_BYTES
        out = torch.zeros(HEAD_BYTES if padded else _SIZES + inline * self.envelope.numel(),
                          dtype=torch.uint8)  # fmt: skip
        out[:_SIZES] = sizes.view(torch.uint8)
        if inline:
            out[_SIZES : _SIZES + self.envelope.numel()] = self.envelope
        return out

    def envelope_inline(self) -> bool:
        """Whether :meth:`head` carries the envelope (else it travels on its own)."""
        return _SIZES + self.envelope.numel() <= HEAD_BYTES

    def filled(self, end: int) -> torch.Tensor:
        """The storage, filled at least up to byte ``end``."""
        if self.layout is not None and self._filled < end:
            self._filled = self.layout.fill(self.storage, end)
        return self.storage

    def chunks(self) -> Iterator[torch.Tensor]:
        """The storage in pieces of :data:`CHUNK_BYTES`, each filled before it is yielded."""
        for start in range(0, self.total, CHUNK_BYTES):
            end = min(start + CHUNK_BYTES, self.total)
            yield self.filled(end)[start:end]

    def place(self, buffer: torch.Tensor) -> None:
        """Make the start of ``buffer`` (a larger one: its tail zeroed) the filled storage,
        copying the tensors straight into it when they are not copied yet."""
        if self._filled == 0:
            self.storage = buffer[: self.total]
        self.filled(self.total)
        if self.storage.data_ptr() != buffer.data_ptr():
            buffer[: self.total].copy_(self.storage)
        buffer[self.total :].zero_()

    def result(self) -> Any:
        """This side's consolidated tensordict (the tensordict itself if it was consolidated)."""
        if self.done is None:
            assert self.layout is not None
            self.done = self.layout.finish(self.filled(self.total))
        if self.wrapper is not None:
            cls: Any = type(self.wrapper)
            return cls._from_tensordict(self.done, self.wrapper._non_tensordict)
        return self.done


def read_head(head: torch.Tensor, doing: str) -> tuple[int, int, int, torch.Tensor | None]:
    """The envelope's size, the storage's size, the chunk size and (when it came inline) the
    envelope, from a buffer :meth:`Outgoing.head` filled.

    Raises:
        TransferMismatchError: the buffer holds something else.
    """
    magic, size, total, chunk = head[:_SIZES].view(torch.int64).tolist()
    if magic != MAGIC:
        raise TransferMismatchError(
            f"{doing}: the first message is not a tensordict of this package: the other rank "
            "runs another version (or upstream tensordict), or calls another method. Run the "
            "same tensordict on every rank, and make the calls match."
        )
    inline = _SIZES + size <= HEAD_BYTES
    return size, total, chunk, head[_SIZES : _SIZES + size] if inline else None


def pieces(storage: torch.Tensor, chunk: int) -> list[torch.Tensor]:
    """The receiver's storage cut as the sender's :meth:`Outgoing.chunks` are."""
    return [storage[a : a + chunk] for a in range(0, storage.numel(), chunk)]


def resolve_tensorclass(name: str) -> type:
    """The class named ``module.QualName`` (a tensorclass), imported in this process.

    Raises:
        TypeError: no such class here, or it is not a tensorclass.
    """
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                found = getattr(found, part)
        except AttributeError:
            break
        if getattr(found, "_is_tensorclass", False) is True:
            return found  # type: ignore[no-any-return]
        break
    raise TypeError(
        f"The sender's tensordict is a {name}, which is not a tensorclass this process can "
        "import. Define the class at the top level of a module that every rank imports (not in "
        "a function, nor in a script run as __main__ under spawn)."
    )


def rebuild(envelope: dict[str, Any], storage: torch.Tensor) -> Any:
    """The consolidated tensordict (or tensorclass instance) an envelope and its storage make."""
    td = rebuild_consolidated(envelope["metadata"], storage)
    name = envelope.get("tensorclass")
    if name:
        cls: Any = resolve_tensorclass(name)
        return cls._from_tensordict(td, envelope.get("non_tensordict") or None)
    return td
