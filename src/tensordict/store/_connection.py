"""The link between a store-backed tensordict and its Redis-compatible server.

Keys follow upstream tensordict's layout, so that both read each other's data:
``{namespace}:{<td_id>}:<suffix>`` where the suffix is ``__batch_size__`` (JSON), ``__device__``,
``__tensorclass__``, ``__keys__`` (the set of leaf paths, nested keys joined with ``"."``),
``d:<path>`` (the raw bytes of a tensor, or a JSON / pickle payload) and ``m:<path>`` (a hash:
``shape`` and ``dtype``, or ``is_non_tensor`` and ``encoding``).

Every call sends its commands in one pipeline. Writes run as one ``MULTI``/``EXEC``
transaction, so an entry's bytes, its metadata and the key registry change together: a reader
never sees bytes without the metadata that describes them. A server that cannot be reached, or
goes away during a call, raises :class:`~tensordict.errors.StoreConnectionError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import torch

from tensordict.errors import StoreConnectionError, StoreDataError
from tensordict.formats.deps import require

__all__ = ["Connection", "decode_meta", "dtype_from_str", "dtype_to_str", "redis"]

KEY_SEP = "."


def redis() -> Any:
    """The redis module, or an error naming the ``store`` extra."""
    return require("redis", "store", "a tensordict kept on a Redis server")


def dtype_to_str(dtype: torch.dtype) -> str:
    return str(dtype)


def dtype_from_str(name: str) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise StoreDataError(f"the server holds an entry of unknown dtype {name!r}.")
    return dtype


def decode_meta(raw: dict[Any, Any]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in raw.items()
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Connection:
    """One server connection and the key namespace of one stored tensordict (shared by its
    nested views). ``meta_cache`` keeps ``path -> (shape, dtype)`` of tensors when enabled."""

    def __init__(
        self,
        *,
        backend: str,
        host: str,
        port: int,
        db: int,
        unix_socket_path: str | None,
        namespace: str,
        td_id: str,
        client: Any,
        redis_kwargs: dict[str, Any],
        cache_metadata: bool,
    ) -> None:
        self.backend, self.host, self.port, self.db = backend, host, port, db
        self.unix_socket_path, self.namespace, self.td_id = unix_socket_path, namespace, td_id
        self.redis_kwargs = redis_kwargs
        self.cache_metadata = cache_metadata
        self.meta_cache: dict[str, tuple[list[int], torch.dtype]] | None = (
            {} if cache_metadata else None
        )
        #: batch sizes of nested tensordicts with more batch dims than their parent
        self.nested_batch: dict[str, torch.Size] = {}
        if client is None:
            lib = redis()
            if unix_socket_path is not None:
                client = lib.Redis(unix_socket_path=unix_socket_path, db=db, **redis_kwargs)
            else:
                client = lib.Redis(host=host, port=port, db=db, **redis_kwargs)
        self.client = client

    # ------------------------------------------------------------------ keys
    def key(self, suffix: str) -> str:
        return f"{self.namespace}:{{{self.td_id}}}:{suffix}"

    def data_key(self, path: str) -> str:
        return self.key(f"d:{path}")

    def meta_key(self, path: str) -> str:
        return self.key(f"m:{path}")

    @property
    def registry(self) -> str:
        return self.key("__keys__")

    @property
    def address(self) -> str:
        if self.unix_socket_path is not None:
            return self.unix_socket_path
        return f"{self.host}:{self.port} (db {self.db})"

    def params(self) -> dict[str, Any]:
        """What another process needs to connect to the same data."""
        return {
            "backend": self.backend,
            "host": self.host,
            "port": self.port,
            "db": self.db,
            "unix_socket_path": self.unix_socket_path,
            "prefix": self.namespace,
            "td_id": self.td_id,
            "cache_metadata": self.cache_metadata,
            **self.redis_kwargs,
        }

    # ------------------------------------------------------------------ calls
    def run(
        self, commands: Iterable[tuple[str, tuple[Any, ...]]], write: bool = False
    ) -> list[Any]:
        """Send ``(method, args)`` commands in one pipeline (a transaction when ``write``)."""
        lib = redis()
        try:
            pipe = self.client.pipeline(transaction=write)
            for method, args in commands:
                getattr(pipe, method)(*args)
            return list(pipe.execute())
        except (lib.exceptions.ConnectionError, lib.exceptions.TimeoutError, OSError) as err:
            raise StoreConnectionError(
                f"the {self.backend} server at {self.address} cannot be reached or went away "
                f"during the call ({err}). Nothing was {'written' if write else 'read'} by this "
                "call; check that the server is running and retry."
            ) from err

    def paths(self) -> list[str]:
        """Every leaf path of the stored tensordict."""
        (members,) = self.run([("smembers", (self.registry,))])
        return sorted(_text(m) for m in members)

    def metas(self, paths: list[str]) -> dict[str, dict[str, str]]:
        """The metadata hash of each path (one round-trip for those not cached)."""
        out: dict[str, dict[str, str]] = {}
        missing = []
        for path in paths:
            cached = self.meta_cache.get(path) if self.meta_cache is not None else None
            if cached is not None:
                out[path] = {"shape": json.dumps(cached[0]), "dtype": dtype_to_str(cached[1])}
            else:
                missing.append(path)
        if missing:
            raws = self.run([("hgetall", (self.meta_key(p),)) for p in missing])
            for path, raw in zip(missing, raws):
                meta = decode_meta(raw)
                out[path] = meta
                if meta and meta.get("is_non_tensor") != "1" and self.meta_cache is not None:
                    self.meta_cache[path] = tensor_meta(path, meta)
        return out

    def get_global(self, name: str) -> str | None:
        (value,) = self.run([("get", (self.key(name),))])
        return None if value is None else _text(value)

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if close is not None:
            close()


def tensor_meta(path: str, meta: dict[str, str]) -> tuple[list[int], torch.dtype]:
    """``(shape, dtype)`` of a tensor entry, or an error if its metadata is incomplete."""
    try:
        return list(json.loads(meta["shape"])), dtype_from_str(meta["dtype"])
    except (KeyError, ValueError, TypeError) as err:
        raise StoreDataError(
            f"the entry {path!r} on the server has incomplete metadata {meta!r} ({err}): it was "
            "not written by a complete call. Write it again, or delete it."
        ) from None


def check_length(path: str, data: bytes | None, shape: Any, dtype: torch.dtype) -> bytes:
    """The bytes of an entry, checked against its shape and dtype (never a partial entry)."""
    import math

    expected = math.prod(int(s) for s in shape) * torch.empty((), dtype=dtype).element_size()
    if data is None or len(data) != expected:
        got = "no data" if data is None else f"{len(data)} bytes"
        raise StoreDataError(
            f"the entry {path!r} on the server holds {got}, but its metadata (shape "
            f"{list(shape)}, {dtype}) needs {expected} bytes: it is incomplete or was changed "
            "by another program. Write it again, or delete it."
        )
    return data
