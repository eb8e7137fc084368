"""TensorDictStore: a tensordict whose entries live on a Redis-compatible server.

Each tensor is one string of raw bytes on the server, its shape and dtype in a hash beside it,
so ``keys()``, ``shape`` and ``repr`` download no data. Reading a key downloads that entry;
indexing (``td[idx]``) downloads only the rows selected (byte ranges, one round-trip for every
entry) into a regular :class:`~tensordict.TensorDict`; ``td[idx] = value``, ``set_``,
``set_at_``, ``update_`` and the in-place operators write on the server. The data stays on the
server after :meth:`TensorDictStore.close`; :meth:`TensorDictStore.clear_redis` deletes it.
Pickling sends the connection parameters: another process (a ``map_iter`` worker) reconnects to
the same data.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import inspect
import json
import pickle
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.base import TensorDictBase, as_size
from tensordict.core.dense import TensorDict
from tensordict.core.indexing import plan_index
from tensordict.core.keys import key_path
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import BatchSizeError, StoreDataError, StoreKeyError
from tensordict.formats.backed import ARRAY, GROUP, NON_TENSOR, BackedTensorDict, check_fits
from tensordict.formats.node import PICKLED
from tensordict.formats.rows import select
from tensordict.store._connection import (
    DEFAULT_TIMEOUT,
    KEY_SEP,
    Connection,
    check_length,
    connect,
    decode_meta,
    dtype_to_str,
    tensor_meta,
)
from tensordict.store._rows import RowRead, RowWrite, StaleMetadata, fetch, write_rows
from tensordict.store._utils import (
    _bytes_to_tensor,
    _compute_byte_ranges,
    _compute_covering_range,
    _get_local_idx,
    _getitem_result_shape,
    _is_scattered_index,
    _tensor_to_bytes,
)

#: whether redis-py is installed (upstream's name; its tests skip on it)
_has_redis = importlib.util.find_spec("redis") is not None

__all__ = [
    "STORE_BACKENDS",
    "TensorDictStore",
    "_bytes_to_tensor",
    "_compute_byte_ranges",
    "_compute_covering_range",
    "_get_local_idx",
    "_getitem_result_shape",
    "_is_scattered_index",
    "_tensor_to_bytes",
]

#: labels of Redis-protocol servers (the protocol is the same: the label is informative)
STORE_BACKENDS = ("redis", "dragonfly", "keydb", "valkey")

Command = tuple[str, tuple[Any, ...]]


class TensorDictStore(BackedTensorDict):
    """A tensordict whose entries live on a Redis-compatible server (redis-py).

    Args:
        backend: a label for the kind of server (``"redis"``, ``"dragonfly"``...), kept and
            shown by ``repr``; every server speaks the same protocol.
        host, port, db, unix_socket_path: where the server is.
        prefix: the namespace of the keys on the server.
        batch_size: the batch size (stored on the server).
        device: where tensors read from the server are put.
        client: an existing ``redis.Redis`` client to use.
        td_id: the id of the data on the server (a new UUID when None). The constructor does
            not read an existing store's batch size: use :meth:`from_store` to reconnect.
        cache_metadata: keep each tensor's shape and dtype in the process (fewer round-trips;
            each read still checks them against the server's, in the same round-trip).
        timeout: seconds each call waits for the server (connecting, and each answer) before
            it raises :class:`~tensordict.errors.StoreTimeoutError`; None waits forever.
        allow_pickle: read python objects that were pickled (by any client of the server:
            unpickling runs code). Only ``True`` reads them; otherwise reading one raises
            :class:`~tensordict.errors.PickleNotAllowedError`. ``keys()`` and ``repr`` never
            unpickle; writing pickles objects that are not JSON unless ``False``.
        **redis_kwargs: passed to ``redis.Redis``.

    Raises:
        MissingDependencyError: redis-py is not installed (extra ``store``).
        StoreConnectionError: the server cannot be reached (StoreTimeoutError: no answer
            within ``timeout``).
        StoreDataError: the stored tensordict is gone from the server (restarted empty,
            flushed, evicted), or an entry's bytes do not match its metadata.

    Examples:
        >>> from tensordict.store import TensorDictStore
        >>> td = TensorDictStore(batch_size=[100], port=6379)  # doctest: +SKIP
        >>> td["obs"] = torch.zeros(100, 84)  # doctest: +SKIP
        >>> td[3:5]["obs"].shape  # doctest: +SKIP
        torch.Size([2, 84])
    """

    __slots__ = ("_conn", "_is_shallow_copy", "_prefix", "_tensorclass_cls")

    def __init__(
        self,
        *,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        batch_size: Sequence[int] | torch.Size | None = None,
        device: Any = None,
        client: Any = None,
        td_id: str | None = None,
        cache_metadata: bool = True,
        timeout: float | None = DEFAULT_TIMEOUT,
        allow_pickle: bool | None = None,
        **redis_kwargs: Any,
    ) -> None:
        conn = Connection(
            backend=backend,
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            namespace=prefix,
            td_id=td_id or str(uuid.uuid4()),
            client=client,
            redis_kwargs=redis_kwargs,
            cache_metadata=cache_metadata,
            timeout=timeout,
            allow_pickle=allow_pickle,
        )
        self._setup(conn, "", as_size(batch_size), device)
        self._persist_metadata()

    def _setup(self, conn: Connection, prefix: str, batch_size: torch.Size, device: Any) -> None:
        self._conn = conn
        self._prefix = prefix
        self._tensorclass_cls: str | None = None
        self._is_shallow_copy = False
        self._init_state(batch_size, device, None, False)

    def _persist_metadata(self) -> None:
        commands: list[Command] = [
            ("set", (self._conn.key("__batch_size__"), json.dumps(list(self._batch_size)))),
            ("set", (self._conn.key("__device__"), str(self._device or ""))),
        ]
        if self._tensorclass_cls is not None:
            commands.append(("set", (self._conn.key("__tensorclass__"), self._tensorclass_cls)))
        self._conn.run(commands, write=True)

    # ================================================================== identity and lifecycle
    @property
    def _td_id(self) -> str:
        return self._conn.td_id

    @property
    def _backend(self) -> str:
        return self._conn.backend

    @property
    def _meta_cache(self) -> dict[str, Any] | None:
        return self._conn.meta_cache

    def _full_key_path(self, key: str) -> str:
        """The server-side path of ``key`` (nested keys joined with ``"."``)."""
        return f"{self._prefix}{KEY_SEP}{key}" if self._prefix else key

    @property
    def _client(self) -> Any:
        """The server client (a synchronous ``redis.Redis``; upstream's is asynchronous: pass
        what its methods return to :meth:`_run_sync`, as upstream code does)."""
        return self._conn.client

    def _run_sync(self, result: Any) -> Any:
        """The value of ``result``: awaited to completion if it is awaitable (a coroutine of an
        asynchronous client), else returned as it is (what the synchronous client answered).

        Examples:
            >>> async def answer():
            ...     return 42
            >>> TensorDictStore._run_sync(None, answer()), TensorDictStore._run_sync(None, 7)
            (42, 7)
        """
        if not inspect.isawaitable(result):
            return result

        async def wait() -> Any:
            return await result

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: run one here
            return asyncio.run(wait())
        with concurrent.futures.ThreadPoolExecutor(1) as thread:  # a loop runs: use another
            return thread.submit(asyncio.run, wait()).result()

    def close(self) -> None:
        """Close the connection (the data stays on the server)."""
        self._conn.close()

    def clear_redis(self) -> None:
        """Delete every key of this tensordict from the server."""
        conn = self._conn
        paths = conn.paths(check=False)  # clearing what is left of a store that is gone works
        keys = [conn.data_key(p) for p in paths] + [conn.meta_key(p) for p in paths]
        keys += [conn.key(s) for s in _GLOBALS] + [conn.registry]
        conn.run([("delete", tuple(keys))], write=True)
        if conn.meta_cache is not None:
            conn.meta_cache.clear()

    def _worker_source(self) -> TensorDictStore:
        """What ``map_iter`` workers index: this store (they reconnect when it is pickled)."""
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        state = {
            "params": self._conn.params(),
            "prefix": self._prefix,
            "batch_size": list(self._batch_size),
            "device": None if self._device is None else str(self._device),
            "tensorclass": self._tensorclass_cls,
            "locked": self._is_locked,
        }
        return (_rebuild_store, (type(self), state))

    def _repr_extra(self) -> list[str]:
        return [f"backend={self._backend}", f"td_id={self._td_id!r}"]

    # ================================================================== construction
    @classmethod
    def from_tensordict(cls, td: Any, *, device: Any = None, **kwargs: Any) -> TensorDictStore:
        """A new store holding a copy of ``td`` (a tensordict or a tensorclass), keeping its
        device unless ``device`` is given."""
        tc = None
        if getattr(type(td), "_is_tensorclass", False):
            tc = f"{type(td).__module__}.{type(td).__qualname__}"
            td = td._tensordict
        out = cls(batch_size=td.batch_size, device=device or td.device, **kwargs)
        out._tensorclass_cls = tc
        out._write_entries("", td, replace=False)
        out._persist_metadata()
        return out

    @classmethod
    def from_dict(  # type: ignore[override]
        cls, input_dict: Any, *, batch_size: Any = None, device: Any = None, **kwargs: Any
    ) -> TensorDictStore:
        """A new store holding ``input_dict`` (a dict or a tensordict)."""
        if not isinstance(input_dict, TensorDictBase) and not getattr(
            type(input_dict), "_is_tensorclass", False
        ):
            input_dict = TensorDict(input_dict, batch_size=batch_size)
        elif batch_size is not None:
            input_dict = input_dict.clone(False)
            input_dict.batch_size = batch_size
        return cls.from_tensordict(input_dict, device=device, **kwargs)

    @classmethod
    def from_schema(  # type: ignore[override]
        cls,
        schema: dict[Any, tuple[Sequence[int], torch.dtype]],
        *,
        batch_size: Any = None,
        device: Any = None,
        **kwargs: Any,
    ) -> TensorDictStore:
        """A new store of zeros from ``{key: (element_shape, dtype)}`` (written on the server
        entry by entry, never built whole in memory)."""
        out = cls(batch_size=batch_size, device=device, **kwargs)
        for key, (shape, dtype) in schema.items():
            path = KEY_SEP.join(key_path(key))
            zeros = torch.zeros((), dtype=dtype).expand((*out._batch_size, *shape))
            out._conn.run(_leaf_commands(out._conn, path, zeros), write=True)
        return out

    @classmethod
    def from_store(
        cls,
        *,
        td_id: str,
        device: Any = None,
        tensorclass_cls: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Reconnect to the store ``td_id`` (its batch size and device are read from the server).

        Returns the tensorclass it was saved from (``tensorclass_cls``, a class or its dotted
        path; else the stored one if its module is imported), or the store.

        Raises:
            StoreKeyError: no tensordict ``td_id`` on the server (a ``KeyError``).
        """
        out = cls._connect(td_id=td_id, **kwargs)
        raw_bs = out._conn.get_global("__batch_size__")
        if raw_bs is None:
            raise StoreKeyError(
                f"No TensorDictStore with td_id={td_id!r} on the server at {out._conn.address} "
                f"(namespace {out._conn.namespace!r}). Check the id and the prefix/db."
            )
        out._batch_size = torch.Size(json.loads(raw_bs))
        stored_device = out._conn.get_global("__device__")
        chosen = device if device is not None else (stored_device or None)
        out._device = torch.device(chosen) if chosen else None
        out._tensorclass_cls = out._conn.get_global("__tensorclass__")
        return _as_tensorclass(out, tensorclass_cls or out._tensorclass_cls)

    @classmethod
    def _connect(cls, **kwargs: Any) -> Any:
        """An instance on existing data: connect, write nothing (from_store, unpickling)."""
        self = object.__new__(cls)
        params = {k: kwargs.pop(k) for k in _CONN_ARGS if k in kwargs}
        self._setup(connect(params, kwargs, "__batch_size__"), "", torch.Size([]), None)
        return self

    # ================================================================== structure
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        new = as_size(value)
        n = len(new)
        for path, meta in self._entries_meta().items():
            if "shape" in meta and tuple(json.loads(meta["shape"])[:n]) != tuple(new):
                raise BatchSizeError(
                    f"batch_size={list(new)} does not fit the entry {path!r} of shape "
                    f"{json.loads(meta['shape'])} on the server."
                )
        self._batch_size = new
        if not self._prefix:
            self._persist_metadata()

    def _paths(self) -> list[str]:
        """The leaf paths under this tensordict, relative to it."""
        paths = self._conn.paths()
        if not self._prefix:
            return paths
        head = self._prefix + KEY_SEP
        return [p[len(head) :] for p in paths if p.startswith(head)]

    def _entries_meta(self, fresh: bool = False) -> dict[str, dict[str, str]]:
        paths = self._paths()
        metas = self._conn.metas([self._full_key_path(p) for p in paths], fresh)
        return {p: metas[self._full_key_path(p)] for p in paths}

    def _non_tensor_layout(self, key: str) -> tuple[str | None, tuple[int, ...] | None] | None:
        path = self._full_key_path(key)
        encoding = self._conn.metas([path])[path].get("encoding")
        why = PICKLED if encoding == "pickle" else None
        return why, ((0,) if encoding == "json_array" else None)

    def _own_keys(self) -> list[str]:
        seen: dict[str, None] = {}
        for path in self._paths():
            seen.setdefault(path.split(KEY_SEP, 1)[0], None)
        return list(seen)

    def _kind(self, key: str) -> str | None:
        paths = self._paths()
        if key in paths:
            meta = self._conn.metas([self._full_key_path(key)])[self._full_key_path(key)]
            return NON_TENSOR if meta.get("is_non_tensor") == "1" else ARRAY
        head = key + KEY_SEP
        return GROUP if any(p.startswith(head) for p in paths) else None

    def _leaf_meta(self, key: str) -> tuple[tuple[int, ...], torch.dtype]:
        path = self._full_key_path(key)
        shape, dtype = tensor_meta(path, self._conn.metas([path])[path])
        return tuple(shape), dtype

    def _child(self, key: str) -> TensorDictStore:
        path = self._full_key_path(key)
        out = object.__new__(type(self))
        bs = self._conn.nested_batch.get(path, self._batch_size)
        out._setup(self._conn, path, bs, self._device)
        out._is_locked = self._is_locked
        return out

    # ================================================================== reading
    def _read_leaf(self, key: str) -> torch.Tensor:
        path, conn = self._full_key_path(key), self._conn
        raw, data = conn.read(
            [("hgetall", (conn.meta_key(path),)), ("get", (conn.data_key(path),))]
        )
        shape, dtype = tensor_meta(path, conn.remember(path, decode_meta(raw)))
        tensor = _bytes_to_tensor(check_length(path, data, shape, dtype), shape, dtype)
        return tensor.to(self._device) if self._device is not None else tensor

    def _read_non_tensor(self, key: str, kind: str) -> Any:
        path, conn = self._full_key_path(key), self._conn
        data, raw = conn.read(
            [("get", (conn.data_key(path),)), ("hgetall", (conn.meta_key(path),))]
        )
        return _non_tensor(decode_meta(raw), data, self._batch_size, self._device, path, conn)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """Download everything into a regular :class:`TensorDict` (one round-trip for data)."""
        return self._read_rows(None, self._batch_size)

    def _index(self, index: Any) -> TensorDict:
        plan = plan_index(index, self._batch_size)
        return self._read_rows(select(plan.leaf_index, self._batch_size), plan.batch_size)

    def _read_rows(self, sel: Any, batch_size: torch.Size) -> TensorDict:
        """The rows ``sel`` selects of every entry (all of them for None), as a TensorDict;
        planned again when another client changed an entry's shape or dtype meanwhile."""
        for attempt in range(_READ_ATTEMPTS):
            try:
                return self._read_rows_once(sel, batch_size, fresh=attempt > 0)
            except StaleMetadata:
                continue
        raise StoreDataError(
            f"the entries of td_id={self._td_id!r} kept changing on the server during "
            f"{_READ_ATTEMPTS} reads (another client rewrites them). Retry when it is done."
        )

    def _read_rows_once(self, sel: Any, batch_size: torch.Size, fresh: bool) -> TensorDict:
        from tensordict.formats.rows import Selection

        metas = self._entries_meta(fresh)
        sel = sel if sel is not None else Selection(())
        reads, others = [], []
        for path, meta in metas.items():
            full = self._full_key_path(path)
            if meta.get("is_non_tensor") == "1" or not meta:
                others.append(path)
            else:
                shape, dtype = tensor_meta(full, meta)
                reads.append((path, RowRead(full, shape, dtype, sel)))
        extra: list[Command] = [
            ("get", (self._conn.data_key(self._full_key_path(p)),)) for p in others
        ]
        tensors, blobs = fetch(self._conn, [r for _, r in reads], extra)
        out = TensorDict({}, batch_size=batch_size, device=self._device)
        for (path, _), tensor in zip(reads, tensors):
            self._put(out, path, tensor.to(self._device) if self._device else tensor)
        for path, blob in zip(others, blobs):
            full = self._full_key_path(path)
            value = _non_tensor(metas[path], blob, self._batch_size, None, full, self._conn)
            if isinstance(value, NonTensorStack) and sel.region:
                value = _index_stack(value, sel)
            elif isinstance(value, NonTensorData):
                value = NonTensorData(value.data, batch_size=batch_size)
            self._put(out, path, value)
        return out

    def _put(self, out: TensorDict, path: str, value: Any) -> None:
        parts = tuple(path.split(KEY_SEP))
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                full = self._full_key_path(KEY_SEP.join(parts[: i + 1]))
                extra = self._conn.nested_batch.get(full, self._batch_size)[len(self._batch_size) :]
                child = TensorDict({}, batch_size=[*node.batch_size, *extra], device=self._device)
                node._set_str(part, child, validated=True)
            node = child
        node._set_str(parts[-1], value, validated=True)

    # ================================================================== writing
    def _set_str(self, key: str, value: Any, *, validated: bool) -> None:
        if not validated:
            value = self._convert(key, value, self._batch_size)
        self._write_entries(self._full_key_path(key), value, replace=True)

    def _write_entries(self, path: str, value: Any, replace: bool) -> None:
        """Write ``value`` (a tensor, non-tensor data or a tensordict) at ``path``, replacing
        what was there, in one transaction."""
        conn = self._conn
        commands: list[Command] = []
        if replace:
            commands += self._delete_commands(path)
        for sub, leaf in _leaves(value, path, conn, self._batch_size):
            commands += _leaf_commands(conn, sub, leaf)
        conn.run(commands, write=True)

    def _delete_commands(self, path: str) -> list[Command]:
        conn = self._conn
        doomed = [p for p in conn.paths() if p == path or p.startswith(path + KEY_SEP)]
        if conn.meta_cache is not None:
            for p in doomed:
                conn.meta_cache.pop(p, None)
        if not doomed:
            return []
        keys = [conn.data_key(p) for p in doomed] + [conn.meta_key(p) for p in doomed]
        return [("delete", tuple(keys)), ("srem", (conn.registry, *doomed))]

    def _del_str(self, key: str) -> None:
        commands = self._delete_commands(self._full_key_path(key))
        if commands:
            self._conn.run(commands, write=True)

    def _write_leaf(self, key: str, value: Any, index: Any = None) -> None:
        path = self._full_key_path(key)
        shape, dtype = tensor_meta(path, self._conn.metas([path], fresh=True)[path])
        value = torch.as_tensor(value).to(dtype)
        leaf = torch.Size(shape)
        if index is None:
            check_fits(key, value, leaf)
            data = value.expand(leaf).contiguous() if value.shape != leaf else value
            self._conn.run(
                [("set", (self._conn.data_key(path), _tensor_to_bytes(data)))], write=True
            )
            return
        plan = plan_index(index, leaf)
        check_fits(key, value, plan.batch_size)
        write_rows(
            self._conn,
            [RowWrite(path, shape, dtype, select(plan.leaf_index, leaf), value, len(leaf))],
        )

    def _stage_setitem_index(self, index: Any, value: Any) -> list[Callable[[], None]]:
        """The validated writes of ``self[index] = value`` (one call to the server)."""
        from tensordict.store._setitem import stage_store_setitem

        return stage_store_setitem(self, index, value)

    def rename_key_(self, old_key: Any, new_key: Any, safe: bool = False) -> TensorDictStore:
        """Rename an entry on the server (``RENAME``, no download)."""
        if self._is_locked:
            from tensordict.core.behaviour.entries import locked_message
            from tensordict.errors import LockedError

            raise LockedError(locked_message(f"rename {old_key!r}"))
        old = self._full_key_path(KEY_SEP.join(key_path(old_key)))
        new = self._full_key_path(KEY_SEP.join(key_path(new_key)))
        conn = self._conn
        moved = [p for p in conn.paths() if p == old or p.startswith(old + KEY_SEP)]
        if not moved:
            raise self._missing_key(old_key)
        commands: list[Command] = []
        for p in moved:
            q = new + p[len(old) :]
            commands += [
                ("rename", (conn.data_key(p), conn.data_key(q))),
                ("rename", (conn.meta_key(p), conn.meta_key(q))),
                ("srem", (conn.registry, p)),
                ("sadd", (conn.registry, q)),
            ]
            if conn.meta_cache is not None and p in conn.meta_cache:
                conn.meta_cache[q] = conn.meta_cache.pop(p)
        conn.run(commands, write=True)
        return self

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictStore:
        """A new store with a copy of the data (``recurse``), or a handle on the same data."""
        if not recurse:
            out = object.__new__(type(self))
            out._setup(self._conn, self._prefix, self._batch_size, self._device)
            out._is_shallow_copy = True
            return out
        params = {k: v for k, v in self._conn.params().items() if k != "td_id"}
        return type(self).from_tensordict(self.to_tensordict(), device=self._device, **params)

    def _transform(self, leaf_fn: Any, batch_size: Any = None, names: Any = None) -> Any:
        raise RuntimeError(
            "shape operations (view, reshape, permute, squeeze, unsqueeze, ...) are not "
            "supported on a TensorDictStore: the data stays on the server in its shape. Call "
            ".to_local() first, then reshape the local copy."
        )

    def to_store(self, **kwargs: Any) -> TensorDictStore:
        return self


_GLOBALS = ("__batch_size__", "__device__", "__tensorclass__")
#: reads planned again at most this many times while other clients change the entries
_READ_ATTEMPTS = 3
_CONN_ARGS = (
    "backend",
    "host",
    "port",
    "db",
    "unix_socket_path",
    "prefix",
    "td_id",
    "client",
    "cache_metadata",
    "timeout",
    "allow_pickle",
)


def _leaves(
    value: Any, path: str, conn: Connection, parent_bs: torch.Size
) -> list[tuple[str, Any]]:
    """``(server path, leaf)`` of every leaf of ``value`` written at ``path``."""
    if getattr(type(value), "_is_tensorclass", False):
        value = value._tensordict
    if isinstance(value, (NonTensorData, NonTensorStack)) or not isinstance(value, TensorDictBase):
        return [(path, value)]
    if len(value.batch_size) > len(parent_bs):
        conn.nested_batch[path] = value.batch_size
    out: list[tuple[str, Any]] = []
    for key, child in value._own_items():
        sub = f"{path}{KEY_SEP}{key}" if path else key
        out += _leaves(child, sub, conn, value.batch_size)
    return out


def _leaf_commands(conn: Connection, path: str, leaf: Any) -> list[Command]:
    data_key, meta_key = conn.data_key(path), conn.meta_key(path)
    if isinstance(leaf, torch.Tensor):
        meta = {"shape": json.dumps(list(leaf.shape)), "dtype": dtype_to_str(leaf.dtype)}
        if conn.meta_cache is not None:
            conn.meta_cache[path] = (list(leaf.shape), leaf.dtype)
        payload = _tensor_to_bytes(leaf)
    else:
        payload, encoding = _encode_non_tensor(leaf)
        meta = {"is_non_tensor": "1", "encoding": encoding}
    return [
        ("delete", (meta_key,)),
        ("set", (data_key, payload)),
        ("hset", (meta_key, None, None, meta)),
        ("sadd", (conn.registry, path)),
    ]


def _encode_non_tensor(leaf: Any) -> tuple[bytes, str]:
    if isinstance(leaf, NonTensorStack):
        values, array = leaf.tolist(), True
    else:
        values, array = (leaf.data if isinstance(leaf, NonTensorData) else leaf), False
    try:
        return json.dumps(values).encode(), "json_array" if array else "json"
    except (TypeError, ValueError):
        return pickle.dumps(values), "pickle"


def _non_tensor(
    meta: dict[str, str], data: Any, bs: torch.Size, device: Any, path: str, conn: Connection
) -> Any:
    if data is None:
        raise StoreDataError(f"the non-tensor entry {path!r} has no data on the server.")
    encoding = meta.get("encoding")
    if encoding == "pickle":
        conn.check_unpickle(path)  # refused before anything is decoded
        value = pickle.loads(data)
    elif encoding in ("json", "json_array"):
        value = json.loads(bytes(data).decode())
    else:
        raise StoreDataError(
            f"the non-tensor entry {path!r} on the server has the unknown encoding {encoding!r} "
            "(expected 'json', 'json_array' or 'pickle'): it was written by another program."
        )
    if encoding == "json_array":
        array: np.ndarray = np.empty(len(value), dtype=object)
        array[:] = value
        if len(bs) > 1:
            full = np.empty(tuple(bs), dtype=object)
            for i, v in enumerate(value):
                full[i].fill(v) if full[i].ndim else None
            array = full
        return NonTensorStack.from_array(array, device)
    return NonTensorData._new(value, bs, device)


def _index_stack(stack: NonTensorStack, sel: Any) -> Any:
    from tensordict.formats.rows import apply_chain

    index = tuple(torch.from_numpy(r) if isinstance(r, np.ndarray) else r for r in sel.region)
    out: Any = stack[index] if index else stack
    for item in sel.chain:
        out = out[item]
    _ = apply_chain
    return out


def _as_tensorclass(store: TensorDictStore, cls: Any) -> Any:
    if cls is None:
        return store
    if isinstance(cls, str):
        cls = _find_class(cls)
        if cls is None:
            return store
    return cls._from_tensordict(store, None)


def _find_class(dotted: str) -> Any:
    """The class at ``module.qualname`` if its module is imported (never imports one)."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        obj: Any = sys.modules.get(".".join(parts[:i]))
        for part in parts[i:]:
            obj = getattr(obj, part, None)
        if obj is not None:
            return obj
    return None


def _rebuild_store(cls: type, state: dict[str, Any]) -> TensorDictStore:
    params = dict(state["params"])
    out: TensorDictStore = cls._connect(**params)  # type: ignore[attr-defined]
    out._prefix = state["prefix"]
    out._batch_size = torch.Size(state["batch_size"])
    out._device = torch.device(state["device"]) if state["device"] else None
    out._tensorclass_cls = state["tensorclass"]
    out._is_locked = state["locked"]
    return out


# upstream pickles refer to these helpers under this module
_tensor_to_bytes.__module__ = __name__
