"""A pipe that streams tensordicts between two processes over UCXX (``tensordict._ucxx``).

The transport, the optional ``ucxx`` package, is imported only by :meth:`TensorDictPipe.connect`,
:meth:`TensorDictPipe.listen` and :class:`TensorDictServer`; the protocol runs on any endpoint
with ``async send(buffer)``, ``async recv(buffer)`` and ``async close()``. The wire format is
upstream's:

* consolidated (the default): a flag byte, ``0`` for a new structure, ``1`` for the structure of
  the previous message; after ``0``, the metadata's length (8 bytes, little-endian) and the
  metadata as JSON (with ``_total_bytes`` and ``_device``); then the consolidated storage. The
  receiver allocates one storage per structure and writes the next messages into it;
* ``consolidated=False``: the length of a JSON header (keys, dtypes, shapes, batch size,
  unbatched keys, non-tensor values), the header, then each tensor leaf's bytes.

The peer is not authenticated and decides the size of the allocations: use it on trusted
networks only.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import json
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.consolidate import _json_default, rebuild_consolidated
from tensordict.core.dense import TensorDict
from tensordict.core.keys import is_leaf_nontensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.unbatched import UnbatchedTensor
from tensordict.errors import MissingDependencyError

__all__ = [
    "TensorDictPipe",
    "TensorDictServer",
    "compute_total_bytes",
    "metadata_hash",
    "recv_tensordict",
    "send_tensordict",
]

NEW_SCHEMA = b"\x00"
SAME_SCHEMA = b"\x01"
_DTYPES = {str(d): d for d in vars(torch).values() if isinstance(d, torch.dtype)}


def _ucxx() -> Any:
    if importlib.util.find_spec("ucxx") is None:
        raise MissingDependencyError(
            "TensorDictPipe's transport needs the ucxx package, which is not installed: "
            "conda install -c rapidsai ucxx (or pip install ucxx-cu12). The protocol itself "
            "runs on any endpoint: TensorDictPipe(endpoint)."
        )
    return importlib.import_module("ucxx")


def metadata_hash(metadata: dict[str, Any]) -> bytes:
    """A digest of consolidation metadata that does not depend on the order of its keys.

    Examples:
        >>> metadata_hash({"a": 1, "b": 2}) == metadata_hash({"b": 2, "a": 1})
        True
    """
    text = json.dumps(metadata, sort_keys=True, default=_json_default)
    return hashlib.sha256(text.encode()).digest()


def compute_total_bytes(metadata: dict[str, Any]) -> int:
    """The size of the storage that consolidation ``metadata`` describes: the end of its last
    leaf, nested nodes included.

    Examples:
        >>> compute_total_bytes({"leaves": {"x": ("torch.float32", [10], 0, 40, 0)}})
        40
    """
    ends = [int(leaf[3]) for leaf in metadata.get("leaves", {}).values()]
    ends += [
        compute_total_bytes(v) for v in metadata.values() if isinstance(v, dict) and "cls" in v
    ]
    return max(ends, default=0)


def _bytes_of(t: torch.Tensor) -> Any:
    """What an endpoint sends or receives for ``t``: the tensor on a GPU, else a numpy view."""
    return t if t.is_cuda else t.detach().numpy()


async def _send_sized(endpoint: Any, data: bytes) -> None:
    await endpoint.send(np.frombuffer(struct.pack("<Q", len(data)), dtype=np.uint8).copy())
    await endpoint.send(np.frombuffer(data, dtype=np.uint8).copy())


async def _recv_sized(endpoint: Any) -> Any:
    head = np.empty(8, dtype=np.uint8)
    await endpoint.recv(head)
    body = np.empty(struct.unpack("<Q", head.tobytes())[0], dtype=np.uint8)
    await endpoint.recv(body)
    return json.loads(body.tobytes())


def _consolidated(td: Any) -> Any:
    if td.is_consolidated():
        return td
    device = td.device
    if device is None:
        tensors = [v for v in td.values(True, True) if isinstance(v, torch.Tensor)]
        device = tensors[0].device if tensors else torch.device("cpu")
    return td.consolidate(metadata=True, device=device)


def _fits(td: Any, total: int, device: torch.device, digest: bytes | None) -> bool:
    """Whether ``td``'s consolidated storage can take a message of that structure."""
    if td is None or not td.is_consolidated():
        return False
    storage = td._consolidated["storage"]
    if storage.numel() != total or storage.device.type != device.type:
        return False
    try:
        return digest is None or metadata_hash(td._consolidated["metadata"]) == digest
    except (TypeError, ValueError):
        return False


def _leaf_entries(td: Any) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """The header and the tensors of an unconsolidated message."""
    header: dict[str, Any] = {
        **{k: [] for k in ("keys", "dtypes", "shapes", "unbatched", "non_tensors")},
        "batch_size": list(td.batch_size),
    }
    tensors = []
    for key, value in td.items(True, True, is_leaf=is_leaf_nontensor, sort=True):
        wire = list(key) if isinstance(key, tuple) else key
        if isinstance(value, torch.Tensor):
            header["keys"].append(wire)
            header["dtypes"].append(str(value.dtype))
            header["shapes"].append(list(value.shape))
            if isinstance(value, UnbatchedTensor):
                header["unbatched"].append(wire)
            tensors.append(value)
        elif isinstance(value, NonTensorStack) and _jsonable(rows := value.tolist()):
            header["non_tensors"].append([wire, rows, list(value.batch_size), value.stack_dim])
        elif isinstance(value, NonTensorData) and _jsonable(value.data):
            header["non_tensors"].append([wire, value.data])
        else:
            raise ValueError(
                f"consolidated=False cannot send the {type(value).__name__} entry {key!r}: "
                "non-tensor entries travel as JSON (str, int, float, bool, None, and lists or "
                "dicts of them). Send it with consolidated=True."
            )
    return header, tensors


def _jsonable(value: Any) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is list:
        return all(_jsonable(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _jsonable(v) for k, v in value.items())
    return False


async def _send_leaves(endpoint: Any, td: Any) -> None:
    header, tensors = _leaf_entries(td)
    await _send_sized(endpoint, json.dumps(header).encode())
    for t in tensors:
        flat = t.detach().contiguous().reshape(-1)
        await endpoint.send(flat if flat.is_cuda else flat.view(torch.uint8).numpy())


def _key(wire: Any) -> tuple[str, ...]:
    if isinstance(wire, str):
        return (wire,)
    if isinstance(wire, list) and wire and all(isinstance(p, (str, list)) for p in wire):
        return tuple(part for item in wire for part in _key(item))
    raise ValueError(f"Invalid header: {wire!r} is not a key (a string or a list of strings).")


def _check_header(header: Any) -> None:
    fields = ("keys", "dtypes", "shapes")
    if not isinstance(header, dict) or not all(isinstance(header.get(f), list) for f in fields):
        raise ValueError("Invalid header: it must hold keys, dtypes and shapes lists.")
    if not len(header["keys"]) == len(header["dtypes"]) == len(header["shapes"]):
        raise ValueError("Invalid header: keys, dtypes and shapes have different lengths.")
    for dtype, shape in zip(header["dtypes"], header["shapes"]):
        if dtype not in _DTYPES:
            raise ValueError(f"Invalid header: {dtype!r} is not a torch dtype.")
        if not isinstance(shape, list) or any(type(d) is not int or d < 0 for d in shape):
            raise ValueError(f"Invalid header: {shape!r} is not a shape.")
    keys = [_key(k) for k in header["keys"]] + [_key(e[0]) for e in header.get("non_tensors", [])]
    if len(set(keys)) != len(keys):
        raise ValueError("Invalid header: a key appears twice.")


async def _recv_leaves(endpoint: Any, device: Any) -> Any:
    header = await _recv_sized(endpoint)
    _check_header(header)
    batch_size = header.get("batch_size", [])
    unbatched = {_key(k) for k in header.get("unbatched", [])}
    where = torch.device(device) if device is not None else torch.device("cpu")
    out = TensorDict(batch_size=batch_size)
    for wire, dtype_name, shape in zip(header["keys"], header["dtypes"], header["shapes"]):
        key, dtype = _key(wire), _DTYPES[dtype_name]
        buf = torch.empty(int(np.prod(shape)) * dtype.itemsize, dtype=torch.uint8, device=where)
        await endpoint.recv(_bytes_of(buf))
        tensor = buf.view(dtype).view(shape)
        out.set(key, UnbatchedTensor(tensor) if key in unbatched else tensor)
    for entry in header.get("non_tensors", []):
        if len(entry) == 2:
            out.set_non_tensor(_key(entry[0]), entry[1])
        else:
            _, rows, size, stack_dim = entry
            stack = NonTensorStack.from_list(rows)
            out.set(_key(entry[0]), stack if not stack_dim else stack.transpose(0, stack_dim))
            if list(out.get(_key(entry[0])).batch_size) != size:
                raise ValueError(f"Invalid header: the stack {entry[0]!r} is not {size}.")
    return out


async def send_tensordict(endpoint: Any, td: Any, *, consolidated: bool = True) -> None:
    """Send ``td`` through a UCXX ``endpoint``, its metadata included (no state is kept: the
    receiver calls :func:`recv_tensordict` with the same ``consolidated``)."""
    if not consolidated:
        await _send_leaves(endpoint, td)
        return
    td_c = _consolidated(td)
    storage = td_c._consolidated["storage"]
    meta = {**td_c._consolidated["metadata"], "_total_bytes": storage.numel()}
    await _send_sized(endpoint, json.dumps(meta, default=_json_default).encode())
    await endpoint.send(_bytes_of(storage))


async def recv_tensordict(
    endpoint: Any, td: Any = None, *, device: Any = None, consolidated: bool = True
) -> Any:
    """Receive what :func:`send_tensordict` sends: into ``td``'s consolidated storage if its
    layout fits (``td`` is returned), else into a new tensordict."""
    if not consolidated:
        return await _recv_leaves(endpoint, device)
    meta = await _recv_sized(endpoint)
    total = meta.pop("_total_bytes", None)
    total = compute_total_bytes(meta) if total is None else total
    where = torch.device(device) if device is not None else None
    if where is None and td is not None and td.is_consolidated():
        where = td._consolidated["storage"].device
    where = where or torch.device("cpu")
    if _fits(td, total, where, metadata_hash(meta)):
        await endpoint.recv(_bytes_of(td._consolidated["storage"]))
        return td
    storage = torch.empty(total, dtype=torch.uint8, device=where)
    await endpoint.recv(_bytes_of(storage))
    return rebuild_consolidated(meta, storage)


def _run(coro: Any) -> Any:
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        name = coro.__name__
        coro.close()
        raise RuntimeError(
            f"TensorDictPipe.{name.lstrip('a')}() cannot block inside a running event loop (it "
            f"would never finish): await pipe.{name}(...) instead."
        )
    return asyncio.run(coro)


class TensorDictPipe:
    """A channel that streams tensordicts between two processes over UCXX (experimental).

    Make one with :meth:`connect` on one side and :meth:`listen` on the other (which need the
    optional ``ucxx`` package), or wrap any endpoint (``async send``/``recv``/``close``). With
    ``consolidated=True`` the first message of a structure carries its metadata and the
    consolidated storage; the next ones the storage only, which the receiver writes into the
    tensordict of the first one: clone a received tensordict to keep it. With
    ``consolidated=False`` each message carries a header and the leaves, and each receive builds
    a new tensordict. See the module docstring for the wire format.

    Args:
        endpoint: the connection's endpoint.
        consolidated: the protocol (both ends pass the same value).
        listener: a listener to close with the pipe (:meth:`listen` passes it).
    """

    def __init__(self, endpoint: Any, *, consolidated: bool = True, listener: Any = None) -> None:
        self._endpoint, self._consolidated, self._listener = endpoint, consolidated, listener
        self._send_schema_hash: bytes | None = None
        self._recv_schema_hash: bytes | None = None
        self._recv_td: Any = None
        self._recv_spec: tuple[int, torch.device] | None = None
        self._closed = False

    @classmethod
    async def connect(cls, host: str, port: int, *, consolidated: bool = True) -> TensorDictPipe:
        """A pipe connected to the one listening on ``host``:``port`` (needs ``ucxx``)."""
        return cls(await _ucxx().create_endpoint(host, port), consolidated=consolidated)

    @classmethod
    async def listen(cls, port: int, *, consolidated: bool = True) -> TensorDictPipe:
        """Wait on ``port`` for one :meth:`connect`; the pipe to it (needs ``ucxx``)."""
        ucxx = _ucxx()
        found: asyncio.Future[TensorDictPipe] = asyncio.get_running_loop().create_future()

        async def accept(endpoint: Any) -> None:
            if not found.done():
                found.set_result(cls(endpoint, consolidated=consolidated, listener=listener))

        listener = ucxx.create_listener(accept, port=port)
        return await found

    async def asend(self, td: Any) -> None:
        """Send ``td`` (a tensordict that is not consolidated is consolidated first, each time:
        keep a consolidated one and refresh it with ``update_`` to save the copy)."""
        if self._closed:
            raise RuntimeError("Cannot send on a closed pipe: open a new one.")
        if not self._consolidated:
            await _send_leaves(self._endpoint, td)
            return
        td_c = _consolidated(td)
        storage, meta = td_c._consolidated["storage"], td_c._consolidated["metadata"]
        digest = metadata_hash(meta)
        if digest == self._send_schema_hash:
            await self._endpoint.send(np.frombuffer(SAME_SCHEMA, dtype=np.uint8).copy())
        else:
            self._send_schema_hash = digest
            await self._endpoint.send(np.frombuffer(NEW_SCHEMA, dtype=np.uint8).copy())
            full = {**meta, "_total_bytes": storage.numel(), "_device": str(storage.device)}
            await _send_sized(self._endpoint, json.dumps(full, default=_json_default).encode())
        await self._endpoint.send(_bytes_of(storage))

    def send(self, td: Any) -> None:
        """:meth:`asend`, waited for (not inside a running event loop)."""
        _run(self.asend(td))

    async def arecv(self, td: Any = None, *, device: Any = None) -> Any:
        """Receive a tensordict: into ``td`` (or the previous one) when its consolidated layout
        fits, else into a new one; use the value returned."""
        if self._closed:
            raise RuntimeError("Cannot recv on a closed pipe: open a new one.")
        if not self._consolidated:
            return await _recv_leaves(self._endpoint, device)
        flag = np.empty(1, dtype=np.uint8)
        await self._endpoint.recv(flag)
        if flag.tobytes() == NEW_SCHEMA:
            return await self._recv_new(td, device)
        if flag.tobytes() != SAME_SCHEMA:
            raise RuntimeError(f"Unknown TensorDictPipe flag {flag.tobytes()!r}: out of sync.")
        target = self._recv_td
        if td is not None and (
            td is target or self._recv_spec is None or _fits(td, *self._recv_spec, None)
        ):
            target = td
        if target is None or not target.is_consolidated():
            raise RuntimeError(
                "The sender sent the structure of a previous message, but this pipe has no "
                "consolidated tensordict of it to receive into: the two ends are out of sync "
                "(create both pipes again)."
            )
        await self._endpoint.recv(_bytes_of(target._consolidated["storage"]))
        return target

    async def _recv_new(self, td: Any, device: Any) -> Any:
        meta = await _recv_sized(self._endpoint)
        total, sender_device = meta.pop("_total_bytes"), meta.pop("_device", "cpu")
        self._recv_schema_hash = metadata_hash(meta)
        where = torch.device(device if device is not None else sender_device)
        self._recv_spec = (total, where)
        if _fits(td, total, where, self._recv_schema_hash):
            await self._endpoint.recv(_bytes_of(td._consolidated["storage"]))
            self._recv_td = td
            return td
        storage = torch.empty(total, dtype=torch.uint8, device=where)
        await self._endpoint.recv(_bytes_of(storage))
        self._recv_td = rebuild_consolidated(meta, storage)
        return self._recv_td

    def recv(self, td: Any = None, *, device: Any = None) -> Any:
        """:meth:`arecv`, waited for (not inside a running event loop)."""
        return _run(self.arecv(td, device=device))

    async def aclose(self) -> None:
        """Close the pipe, its endpoint and its listener (again: nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._listener is not None:
            self._listener.close()
        await self._endpoint.close()

    def close(self) -> None:
        """:meth:`aclose`, waited for."""
        _run(self.aclose())

    @property
    def closed(self) -> bool:
        """Whether the pipe is closed."""
        return self._closed

    def __aiter__(self) -> TensorDictPipe:
        return self

    async def __anext__(self) -> Any:
        if self._closed:
            raise StopAsyncIteration
        try:
            return await self.arecv()
        except Exception as err:  # (as upstream: the iteration stops at the first error)
            raise StopAsyncIteration from err

    async def __aenter__(self) -> TensorDictPipe:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __enter__(self) -> TensorDictPipe:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # a pipe dropped open closes its endpoint: at once, or as a task of the running loop
        if getattr(self, "_closed", True):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        try:
            if loop is None:
                asyncio.run(self.aclose())
            else:
                task = loop.create_task(self.aclose())
                _CLOSING.add(task)
                task.add_done_callback(_CLOSING.discard)
        except Exception:  # (in a finaliser: nothing to raise to)
            pass


#: the closing tasks of pipes dropped inside a running loop (kept until they finish)
_CLOSING: set[asyncio.Task[None]] = set()


class TensorDictServer:
    """Accepts several :meth:`TensorDictPipe.connect` clients on ``port`` (needs ``ucxx``):
    :meth:`serve` runs a coroutine per client's pipe, ``async for pipe in server`` yields them."""

    def __init__(self, port: int, *, consolidated: bool = True) -> None:
        self._ucxx = _ucxx()
        self._port, self._consolidated = port, consolidated
        self._listener: Any = None
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[TensorDictPipe]:
        queue: asyncio.Queue[TensorDictPipe] = asyncio.Queue()

        async def accept(endpoint: Any) -> None:
            await queue.put(TensorDictPipe(endpoint, consolidated=self._consolidated))

        self._listener = self._ucxx.create_listener(accept, port=self._port)
        while not self._closed:
            try:
                yield await asyncio.wait_for(queue.get(), timeout=0.5)
            except asyncio.TimeoutError:
                continue

    async def serve(self, on_connect: Callable[[TensorDictPipe], Awaitable[None]]) -> None:
        """Run ``on_connect(pipe)`` as a task for each client, until :meth:`close`."""
        tasks = set()
        async for pipe in self:
            task = asyncio.ensure_future(on_connect(pipe))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def close(self) -> None:
        """Stop accepting clients (their pipes stay open)."""
        self._closed = True
        if self._listener is not None:
            self._listener.close()

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> TensorDictServer:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


async def asend(self: Any, dst: TensorDictPipe) -> None:
    """Send this tensordict through a :class:`~tensordict._ucxx.TensorDictPipe` (``await``).

    Examples:
        .. code-block:: python

            await td.asend(pipe)
    """
    await dst.asend(self)


async def arecv(self: Any, src: TensorDictPipe, *, device: Any = None) -> Any:
    """Receive a tensordict from a :class:`~tensordict._ucxx.TensorDictPipe` (``await``): into
    this one if it is consolidated with the data's layout, else a new one; use the value
    returned.

    Examples:
        .. code-block:: python

            td = await TensorDict().arecv(pipe)   # first: allocates
            td = await td.arecv(pipe)             # same structure: written into td
    """
    return await src.arecv(self, device=device)
