"""The link between a store-backed tensordict and its Redis-compatible server.

Keys follow upstream tensordict's layout, so that both read each other's data:
``{namespace}:{<td_id>}:<suffix>`` where the suffix is ``__batch_size__`` (JSON), ``__device__``,
``__tensorclass__``, ``__keys__`` (the set of leaf paths, nested keys joined with ``"."``),
``d:<path>`` (the raw bytes of a tensor, or a JSON / pickle payload) and ``m:<path>`` (a hash:
``shape`` and ``dtype``, or ``is_non_tensor`` and ``encoding``).

Every call sends its commands in one pipeline, run as one ``MULTI``/``EXEC`` transaction: a
write changes an entry's bytes, its metadata and the key registry together, and a read sees
them together (the metadata it was planned with is read back beside the bytes and compared, so
that a change by another client is noticed, never read as the old dtype). Each read also checks
that the stored tensordict still exists (its marker key, ``__batch_size__`` or ``__type__``): a
server restarted empty or flushed raises :class:`~tensordict.errors.StoreDataError`, never
returns empty data. A server that cannot be reached, or goes away during a call, raises
:class:`~tensordict.errors.StoreConnectionError`; one that does not answer within ``timeout``
seconds (stopped, overloaded), :class:`~tensordict.errors.StoreTimeoutError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import torch

from tensordict.errors import (
    PickleNotAllowedError,
    StoreConnectionError,
    StoreDataError,
    StoreTimeoutError,
)
from tensordict.formats.deps import require

__all__ = ["Connection", "connect", "decode_meta", "dtype_from_str", "dtype_to_str", "redis"]

KEY_SEP = "."
#: seconds a call waits for the server before raising StoreTimeoutError (``timeout=``)
DEFAULT_TIMEOUT = 5.0


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
    nested views). ``meta_cache`` keeps ``path -> (shape, dtype)`` of tensors when enabled;
    ``marker`` is the global key whose absence means the stored tensordict is gone."""

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
        timeout: float | None = DEFAULT_TIMEOUT,
        allow_pickle: bool | None = None,
        marker: str = "__batch_size__",
    ) -> None:
        self.backend, self.host, self.port, self.db = backend, host, port, db
        self.unix_socket_path, self.namespace, self.td_id = unix_socket_path, namespace, td_id
        self.redis_kwargs = redis_kwargs
        self.cache_metadata = cache_metadata
        self.timeout = _check_timeout(timeout)
        self.allow_pickle = _check_allow_pickle(allow_pickle)
        self.marker = marker
        self.meta_cache: dict[str, tuple[list[int], torch.dtype]] | None = (
            {} if cache_metadata else None
        )
        #: batch sizes of nested tensordicts with more batch dims than their parent
        self.nested_batch: dict[str, torch.Size] = {}
        if client is None:
            lib = redis()
            kwargs = _client_kwargs(lib, self.timeout, redis_kwargs)
            if unix_socket_path is not None:
                client = lib.Redis(unix_socket_path=unix_socket_path, db=db, **kwargs)
            else:
                client = lib.Redis(host=host, port=port, db=db, **kwargs)
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
            "timeout": self.timeout,
            "allow_pickle": self.allow_pickle,
            **self.redis_kwargs,
        }

    # ------------------------------------------------------------------ calls
    def run(
        self, commands: Iterable[tuple[str, tuple[Any, ...]]], write: bool = False
    ) -> list[Any]:
        """Send ``(method, args)`` commands in one transaction (``MULTI``/``EXEC``)."""
        lib = redis()
        try:
            pipe = self.client.pipeline(transaction=True)
            for method, args in commands:
                getattr(pipe, method)(*args)
            return list(pipe.execute())
        except (lib.exceptions.TimeoutError, TimeoutError) as err:
            done = "Whether this call's writes were applied is unknown; " if write else ""
            raise StoreTimeoutError(
                f"the {self.backend} server at {self.address} did not answer within "
                f"timeout={self.timeout} s ({err}): it is stopped, overloaded or not a Redis "
                f"server. {done}check the server, or pass a longer timeout= when connecting."
            ) from err
        except (lib.exceptions.ConnectionError, OSError) as err:
            raise StoreConnectionError(
                f"the {self.backend} server at {self.address} cannot be reached or went away "
                f"during the call ({err}). Nothing was {'written' if write else 'read'} by this "
                "call; check that the server is running and retry."
            ) from err

    def read(self, commands: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        """Run read ``commands`` in one transaction, with the check that the stored tensordict
        still exists; their answers.

        Raises:
            StoreDataError: the tensordict is gone from the server (see :meth:`gone`).
        """
        *answers, present = self.run([*commands, ("exists", (self.key(self.marker),))])
        if not present:
            raise self.gone()
        return answers

    def gone(self) -> StoreDataError:
        """The error for a stored tensordict whose keys are gone from the server."""
        return StoreDataError(
            f"the tensordict td_id={self.td_id!r} is gone from the {self.backend} server at "
            f"{self.address} (its key {self.key(self.marker)!r} no longer exists): the server "
            "was restarted without persistence, flushed, or the keys were evicted or deleted "
            "(clear_redis). Its data cannot be read; write it again."
        )

    def paths(self, check: bool = True) -> list[str]:
        """Every leaf path of the stored tensordict.

        Raises:
            StoreDataError: the stored tensordict is gone from the server (when ``check``).
        """
        command = [("smembers", (self.registry,))]
        (members,) = self.read(command) if check else self.run(command)
        return sorted(_text(m) for m in members)

    def metas(self, paths: list[str], fresh: bool = False) -> dict[str, dict[str, str]]:
        """The metadata hash of each path (one round-trip for those not cached; all of them
        when ``fresh``, which writes use: a cache another client made stale is never trusted
        for writing)."""
        out: dict[str, dict[str, str]] = {}
        missing = []
        for path in paths:
            cached = (
                self.meta_cache.get(path) if self.meta_cache is not None and not fresh else None
            )
            if cached is not None:
                out[path] = {"shape": json.dumps(cached[0]), "dtype": dtype_to_str(cached[1])}
            else:
                missing.append(path)
        if missing:
            raws = self.read([("hgetall", (self.meta_key(p),)) for p in missing])
            for path, raw in zip(missing, raws):
                out[path] = self.remember(path, decode_meta(raw))
        return out

    def remember(self, path: str, meta: dict[str, str]) -> dict[str, str]:
        """Cache the shape and dtype of a tensor entry from its metadata hash; the hash."""
        if self.meta_cache is not None:
            if meta and meta.get("is_non_tensor") != "1":
                self.meta_cache[path] = tensor_meta(path, meta)
            else:
                self.meta_cache.pop(path, None)
        return meta

    def get_global(self, name: str) -> str | None:
        (value,) = self.run([("get", (self.key(name),))])
        return None if value is None else _text(value)

    def check_unpickle(self, path: str) -> None:
        """Raise unless this connection may unpickle the entry ``path``."""
        if self.allow_pickle is not True:
            raise PickleNotAllowedError.for_entry(
                f"the entry {path!r} of td_id={self.td_id!r} on the {self.backend} server at "
                f"{self.address}",
                "allow_pickle=True when connecting (TensorDictStore.from_store(..., "
                "allow_pickle=True)); any client that can write to the server could have put it "
                "there",
            )

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if close is not None:
            close()


def connect(params: dict[str, Any], redis_kwargs: dict[str, Any], marker: str) -> Connection:
    """A connection from ``TensorDictStore`` arguments (``params``: the connection ones, a
    missing ``td_id`` gets a new UUID; ``redis_kwargs``: the rest, for ``redis.Redis``)."""
    import uuid

    return Connection(
        backend=params.get("backend", "redis"),
        host=params.get("host", "localhost"),
        port=params.get("port", 6379),
        db=params.get("db", 0),
        unix_socket_path=params.get("unix_socket_path"),
        namespace=params.get("prefix", "tensordict"),
        td_id=params.get("td_id") or str(uuid.uuid4()),
        client=params.get("client"),
        redis_kwargs=redis_kwargs,
        cache_metadata=params.get("cache_metadata", True),
        timeout=params.get("timeout", DEFAULT_TIMEOUT),
        allow_pickle=params.get("allow_pickle"),
        marker=marker,
    )


def _check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(
            f"timeout must be a positive number of seconds (or None to wait forever), got "
            f"{timeout!r}."
        )
    return float(timeout)


def _check_allow_pickle(allow_pickle: Any) -> bool | None:
    if allow_pickle is not None and not isinstance(allow_pickle, bool):
        raise TypeError(
            f"allow_pickle must be a bool or None, got {type(allow_pickle).__name__} "
            f"{allow_pickle!r}: pass True to allow unpickling, False (or None) to refuse it."
        )
    return allow_pickle


def _client_kwargs(lib: Any, timeout: float | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """redis-py arguments: every socket operation bounded by ``timeout`` and no retry after
    one (redis-py retries a timeout three times by default, so a stopped server took a minute
    to report); a connection that broke is retried once, at once. The user's own win."""
    out = dict(kwargs)
    out.setdefault("socket_timeout", timeout)
    out.setdefault("socket_connect_timeout", timeout)
    if "retry" not in out:
        out["retry"] = lib.retry.Retry(
            lib.backoff.NoBackoff(), 1, supported_errors=(lib.exceptions.ConnectionError,)
        )
    return out


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
