"""LazyStackedTensorDictStore: a lazy stack whose members live on a Redis-compatible server.

Upstream's layout: the globals ``__type__`` (``"lazy_stack"``), ``__count__``, ``__stack_dim__``
and ``__inner_batch_size__``; each leaf is one string holding the members' bytes one after the
other. When the members agree on a leaf's shape (``homogeneous``) it is the stacked tensor;
otherwise ``shapes`` lists each member's shape and ``d:<path>:idx`` their byte offsets (int64).

``store[i]`` is a view of member ``i`` whose reads and writes go to the server; other indices and
``to_tensordict()`` download the members asked for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.combine import stack_or_lazy
from tensordict.core.dense import TensorDict
from tensordict.core.indexing import plan_index
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.errors import ShapeMismatchError, StoreKeyError
from tensordict.formats.backed import ARRAY, GROUP, BackedTensorDict
from tensordict.store._connection import (
    KEY_SEP,
    Connection,
    check_length,
    connect,
    decode_meta,
    dtype_from_str,
)
from tensordict.store._store import TensorDictStore
from tensordict.store._utils import _bytes_to_tensor, _tensor_to_bytes

__all__ = ["LazyStackedTensorDictStore", "to_store"]

Command = tuple[str, tuple[Any, ...]]


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


class _Leaf:
    """One leaf's layout: the members' shapes and where each member's bytes start."""

    def __init__(self, meta: dict[str, str], offsets: np.ndarray | None, count: int) -> None:
        self.dtype = dtype_from_str(meta["dtype"])
        if meta.get("homogeneous", "1") == "1":
            shape = json.loads(meta["shape"])
            self.shapes = [list(shape[1:])] * count
            size = math.prod(shape[1:]) * _itemsize(self.dtype)
            self.offsets = [i * size for i in range(count + 1)]
        else:
            self.shapes = json.loads(meta["shapes"])
            self.offsets = [int(o) for o in (offsets if offsets is not None else [])]

    def range(self, i: int) -> tuple[int, int]:
        return self.offsets[i], self.offsets[i + 1] - self.offsets[i]


class LazyStackedTensorDictStore(BackedTensorDict):
    """A lazy stack of tensordicts kept on a Redis-compatible server.

    Build one with :meth:`from_lazy_stack` (or ``lazy_td.to_store(...)``), reconnect with
    :meth:`from_store`. The connection arguments are those of
    :class:`~tensordict.store.TensorDictStore`.

    Examples:
        >>> from tensordict import TensorDict, LazyStackedTensorDict
        >>> from tensordict.store import LazyStackedTensorDictStore
        >>> tds = [TensorDict({"a": torch.zeros(4)}, [4]) for _ in range(3)]
        >>> store = LazyStackedTensorDictStore.from_lazy_stack(  # doctest: +SKIP
        ...     LazyStackedTensorDict(*tds), port=6379)
        >>> store[0]["a"].shape  # doctest: +SKIP
        torch.Size([4])
    """

    __slots__ = ("_conn", "_count", "_inner_batch_size", "_stack_dim")

    _conn: Connection
    _count: int
    _stack_dim: int
    _inner_batch_size: torch.Size

    def __init__(self, *, td_id: str | None = None, **kwargs: Any) -> None:
        raise TypeError(
            "build a LazyStackedTensorDictStore with LazyStackedTensorDictStore.from_lazy_stack("
            "lazy_td, ...) or reconnect with LazyStackedTensorDictStore.from_store(td_id=...)."
        )

    @classmethod
    def _connect(cls, **kwargs: Any) -> LazyStackedTensorDictStore:
        from tensordict.store._store import _CONN_ARGS

        params = {k: kwargs.pop(k) for k in _CONN_ARGS if k in kwargs}
        out = object.__new__(cls)
        out._conn = connect(params, kwargs, "__type__")
        return out

    def _init_layout(self, count: int, stack_dim: int, inner: torch.Size, device: Any) -> None:
        self._count, self._stack_dim, self._inner_batch_size = count, stack_dim, inner
        bs = [*inner[:stack_dim], count, *inner[stack_dim:]]
        self._init_state(bs, device, None, False)

    @classmethod
    def from_lazy_stack(
        cls, lazy_td: Any, *, device: Any = None, **kwargs: Any
    ) -> LazyStackedTensorDictStore:
        """A new store holding the members of ``lazy_td`` (a lazy stack, or any tensordict,
        split along its first dimension)."""
        members = list(getattr(lazy_td, "tensordicts", None) or lazy_td.unbind(0))
        stack_dim = getattr(lazy_td, "stack_dim", 0)
        out = cls._connect(**kwargs)
        out._init_layout(len(members), stack_dim, members[0].batch_size, device or lazy_td.device)
        conn = out._conn
        commands: list[Command] = [
            ("set", (conn.key("__type__"), "lazy_stack")),
            ("set", (conn.key("__count__"), str(out._count))),
            ("set", (conn.key("__stack_dim__"), str(stack_dim))),
            ("set", (conn.key("__inner_batch_size__"), json.dumps(list(out._inner_batch_size)))),
            ("set", (conn.key("__device__"), str(out._device or ""))),
        ]
        leaves = [
            dict(m.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor))
            for m in members
        ]
        for key in leaves[0]:
            if all(key in m for m in leaves[1:]):
                path = key if isinstance(key, str) else KEY_SEP.join(key)
                commands += _leaf_commands(conn, path, [m[key] for m in leaves])
        conn.run(commands, write=True)
        return out

    @classmethod
    def from_store(cls, *, td_id: str, device: Any = None, **kwargs: Any) -> Any:
        """Reconnect to the lazy stack ``td_id`` on the server."""
        out = cls._connect(td_id=td_id, **kwargs)
        conn = out._conn
        kind, count, dim, inner, stored_device = conn.run(
            [
                ("get", (conn.key(s),))
                for s in (
                    "__type__",
                    "__count__",
                    "__stack_dim__",
                    "__inner_batch_size__",
                    "__device__",
                )
            ]
        )
        if kind is None or bytes(kind).decode() != "lazy_stack":
            raise StoreKeyError(
                f"No LazyStackedTensorDictStore with td_id={td_id!r} on the server at "
                f"{conn.address}. Check the id (a TensorDictStore reconnects with "
                "TensorDictStore.from_store)."
            )
        chosen = device if device is not None else (bytes(stored_device).decode() or None)
        out._init_layout(int(count), int(dim), torch.Size(json.loads(inner)), chosen)
        return out

    # ================================================================== identity, lifecycle
    @property
    def _td_id(self) -> str:
        return self._conn.td_id

    @property
    def _backend(self) -> str:
        return self._conn.backend

    def close(self) -> None:
        self._conn.close()

    def clear_redis(self) -> None:
        conn = self._conn
        paths = conn.paths(check=False)  # clearing what is left of a store that is gone works
        keys = [conn.data_key(p) for p in paths] + [conn.meta_key(p) for p in paths]
        keys += [conn.data_key(p) + ":idx" for p in paths]
        keys += [
            conn.key(s)
            for s in (
                "__type__",
                "__count__",
                "__stack_dim__",
                "__inner_batch_size__",
                "__device__",
            )
        ]
        conn.run([("delete", (*keys, conn.registry))], write=True)

    def __reduce__(self) -> tuple[Any, ...]:
        state = (
            self._conn.params(),
            self._count,
            self._stack_dim,
            list(self._inner_batch_size),
            None if self._device is None else str(self._device),
        )
        return (_rebuild_lazy_store, (type(self), state))

    def _worker_source(self) -> LazyStackedTensorDictStore:
        return self

    def _repr_extra(self) -> list[str]:
        return [f"count={self._count}", f"backend={self._backend}", f"td_id={self._td_id!r}"]

    # ================================================================== layout
    def _layouts(self, paths: list[str]) -> dict[str, _Leaf]:
        conn = self._conn
        commands: list[Command] = []
        for p in paths:
            commands += [("hgetall", (conn.meta_key(p),)), ("get", (conn.data_key(p) + ":idx",))]
        answers = conn.read(commands) if commands else []
        out = {}
        for i, p in enumerate(paths):
            meta, idx = decode_meta(answers[2 * i]), answers[2 * i + 1]
            offsets = np.frombuffer(bytes(idx), dtype=np.int64) if idx is not None else None
            out[p] = _Leaf(meta, offsets, self._count)
        return out

    def _member_td(self, i: int, layouts: dict[str, _Leaf], blobs: dict[str, bytes]) -> TensorDict:
        out = TensorDict({}, batch_size=self._inner_batch_size, device=self._device)
        for path, leaf in layouts.items():
            shape = leaf.shapes[i]
            data = check_length(path, blobs[(path, i)], shape, leaf.dtype)  # type: ignore[index]
            out.set(tuple(path.split(KEY_SEP)), _bytes_to_tensor(data, shape, leaf.dtype))
        return out

    def _read_members(self, ids: list[int]) -> list[TensorDict]:
        conn = self._conn
        paths = conn.paths()
        layouts = self._layouts(paths)
        commands, keys = [], []
        for i in ids:
            for p in paths:
                off, length = layouts[p].range(i)
                commands.append(("getrange", (conn.data_key(p), off, off + length - 1)))
                keys.append((p, i))
        answers = conn.read(commands) if commands else []
        blobs = {k: bytes(a) for k, a in zip(keys, answers)}
        for k in keys:  # a zero-length member reads nothing (GETRANGE 0..-1 reads everything)
            if layouts[k[0]].range(k[1])[1] == 0:
                blobs[k] = b""
        return [self._member_td(i, layouts, blobs) for i in ids]  # type: ignore[arg-type]

    # ================================================================== tensordict primitives
    def _own_keys(self) -> list[str]:
        return list(dict.fromkeys(p.split(KEY_SEP, 1)[0] for p in self._conn.paths()))

    def _kind(self, key: str) -> str | None:
        paths = self._conn.paths()
        if key in paths:
            return ARRAY
        return GROUP if any(p.startswith(key + KEY_SEP) for p in paths) else None

    def _leaf_meta(self, key: str) -> tuple[tuple[int, ...], torch.dtype]:
        leaf = self._layouts([key])[key]
        shapes = leaf.shapes
        shape = [s if all(sh[j] == s for sh in shapes) else -1 for j, s in enumerate(shapes[0])]
        return (self._count, *shape), leaf.dtype

    def _read_leaf(self, key: str) -> torch.Tensor:
        return self.to_tensordict().get(key)  # type: ignore[no-any-return]

    def _read_non_tensor(self, key: str, kind: str) -> Any:
        raise NotImplementedError

    def _child(self, key: str) -> BackedTensorDict:
        return self.to_tensordict().get(key)  # type: ignore[no-any-return]

    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        return stack_or_lazy(self._read_members(list(range(self._count))), self._stack_dim)

    def _index(self, index: Any) -> Any:
        if isinstance(index, int) and self._stack_dim == 0:
            return _Member(self, index % self._count, "")
        plan = plan_index(index, self.batch_size)
        ids = torch.arange(self._count)
        lead = plan.leaf_index[0] if isinstance(plan.leaf_index, tuple) else plan.leaf_index
        rest = plan.leaf_index[1:] if isinstance(plan.leaf_index, tuple) else ()
        if self._stack_dim != 0 or lead is None or lead is Ellipsis:
            return self.to_tensordict()[index]
        picked = ids[lead]
        members = self._read_members([int(i) for i in picked.reshape(-1)])
        if picked.ndim == 0:
            return members[0][rest] if rest else members[0]
        out = stack_or_lazy(members, 0)
        return out[(slice(None),) + tuple(rest)] if rest else out

    def _stage_setitem_index(self, index: Any, value: Any) -> list[Callable[[], None]]:
        ids = torch.arange(self._count)[plan_index(index, self.batch_size[:1]).leaf_index]
        ids_list = [int(ids)] if ids.ndim == 0 else [int(i) for i in ids]
        if getattr(type(value), "_is_tensorclass", False):
            value = value._tensordict
        values = [value] if ids.ndim == 0 else list(value.unbind(0))
        if len(values) != len(ids_list):
            raise ShapeMismatchError(
                f"cannot write {len(values)} tensordicts into {len(ids_list)} members."
            )
        layouts = self._layouts(self._conn.paths())
        commands: list[Command] = []
        for i, v in zip(ids_list, values):
            commands += _member_writes(self._conn, layouts, i, v)

        def run() -> None:
            self._conn.run(commands, write=True)

        return [run]

    def _write_leaf(self, key: str, value: Any, index: Any = None) -> None:
        tensors = list(torch.as_tensor(value).unbind(0))
        layouts = self._layouts([key])
        commands: list[Command] = []
        for i, t in enumerate(tensors):
            commands += _member_writes(self._conn, layouts, i, TensorDict({key: t}, []), True)
        self._conn.run(commands, write=True)

    def _set_str(self, key: str, value: Any, *, validated: bool) -> None:
        raise NotImplementedError(
            "adding entries to a LazyStackedTensorDictStore is not supported: write into the "
            "members' existing entries (store[i]['key'] = value), or build a new store."
        )

    def _del_str(self, key: str) -> None:
        self._set_str(key, None, validated=True)

    def _transform(self, leaf_fn: Any, batch_size: Any = None, names: Any = None) -> Any:
        raise RuntimeError(
            "shape operations are not supported on a LazyStackedTensorDictStore: call "
            ".to_local() first."
        )


def _leaf_commands(conn: Connection, path: str, values: list[Any]) -> list[Command]:
    tensors = [torch.as_tensor(v) for v in values]
    dtype = tensors[0].dtype
    shapes = [list(t.shape) for t in tensors]
    homogeneous = all(s == shapes[0] for s in shapes)
    meta = {
        "shape": json.dumps([len(tensors), *shapes[0]]),
        "dtype": str(dtype),
        "homogeneous": "1" if homogeneous else "0",
        "layout": "stack",
    }
    payload = b"".join(_tensor_to_bytes(t.to(dtype)) for t in tensors)
    commands: list[Command] = [("delete", (conn.meta_key(path),))]
    if not homogeneous:
        meta["shapes"] = json.dumps(shapes)
        sizes = [math.prod(s) * _itemsize(dtype) for s in shapes]
        offsets = np.cumsum([0, *sizes]).astype(np.int64)
        commands.append(("set", (conn.data_key(path) + ":idx", offsets.tobytes())))
    return commands + [
        ("set", (conn.data_key(path), payload)),
        ("hset", (conn.meta_key(path), None, None, meta)),
        ("sadd", (conn.registry, path)),
    ]


def _member_writes(
    conn: Connection, layouts: dict[str, _Leaf], i: int, value: Any, partial: bool = False
) -> list[Command]:
    if getattr(type(value), "_is_tensorclass", False):
        value = value._tensordict
    commands: list[Command] = []
    for key, v in value.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
        path = key if isinstance(key, str) else KEY_SEP.join(key)
        leaf = layouts.get(path)
        if leaf is None:
            raise ShapeMismatchError(
                f"the lazy stack on the server has no entry {path!r}; its entries are "
                f"{sorted(layouts)}."
            )
        t = torch.as_tensor(v).to(leaf.dtype)
        shape = torch.Size(leaf.shapes[i])
        if t.shape != shape:
            try:
                t = t.expand(shape)
            except RuntimeError:
                raise ShapeMismatchError(
                    f"cannot write a value of shape {list(t.shape)} into {path!r} of member {i}, "
                    f"of shape {list(shape)}: members keep their shapes on the server."
                ) from None
        off, _ = leaf.range(i)
        commands.append(("setrange", (conn.data_key(path), off, _tensor_to_bytes(t))))
    return commands


class _Member(BackedTensorDict):
    """Member ``index`` of a :class:`LazyStackedTensorDictStore` (reads and writes go to the
    server)."""

    __slots__ = ("_index_i", "_prefix", "_store")

    def __init__(self, store: LazyStackedTensorDictStore, index: int, prefix: str) -> None:
        self._store, self._index_i, self._prefix = store, index, prefix
        self._init_state(store._inner_batch_size, store._device, None, False)

    def _full(self, key: str) -> str:
        return f"{self._prefix}{KEY_SEP}{key}" if self._prefix else key

    def _paths(self) -> list[str]:
        paths = self._store._conn.paths()
        if not self._prefix:
            return paths
        head = self._prefix + KEY_SEP
        return [p[len(head) :] for p in paths if p.startswith(head)]

    def _own_keys(self) -> list[str]:
        return list(dict.fromkeys(p.split(KEY_SEP, 1)[0] for p in self._paths()))

    def _kind(self, key: str) -> str | None:
        paths = self._paths()
        if key in paths:
            return ARRAY
        return GROUP if any(p.startswith(key + KEY_SEP) for p in paths) else None

    def _leaf_meta(self, key: str) -> tuple[tuple[int, ...], torch.dtype]:
        leaf = self._store._layouts([self._full(key)])[self._full(key)]
        return tuple(leaf.shapes[self._index_i]), leaf.dtype

    def _read_leaf(self, key: str) -> torch.Tensor:
        path = self._full(key)
        leaf = self._store._layouts([path])[path]
        off, length = leaf.range(self._index_i)
        conn = self._store._conn
        (data,) = conn.read([("getrange", (conn.data_key(path), off, off + length - 1))])
        shape = leaf.shapes[self._index_i]
        data = check_length(path, bytes(data) if length else b"", shape, leaf.dtype)
        tensor = _bytes_to_tensor(data, shape, leaf.dtype)
        return tensor.to(self._device) if self._device is not None else tensor

    def _read_non_tensor(self, key: str, kind: str) -> Any:
        raise NotImplementedError

    def _child(self, key: str) -> _Member:
        return _Member(self._store, self._index_i, self._full(key))

    def _write_leaf(self, key: str, value: Any, index: Any = None) -> None:
        path = self._full(key)
        if index is not None:
            current = self._read_leaf(key)
            current[index] = torch.as_tensor(value)
            value = current
        layouts = self._store._layouts([path])
        commands = _member_writes(
            self._store._conn,
            layouts,
            self._index_i,
            TensorDict({path: torch.as_tensor(value)}, []),
        )
        self._store._conn.run(commands, write=True)

    def _set_str(self, key: str, value: Any, *, validated: bool) -> None:
        if self._kind(key) != ARRAY:
            raise NotImplementedError(
                "adding entries to a member of a LazyStackedTensorDictStore is not supported."
            )
        self._write_leaf(key, value)

    def _del_str(self, key: str) -> None:
        raise NotImplementedError("deleting entries of a stored lazy stack's member.")

    def _index(self, index: Any) -> Any:
        return self.to_tensordict()[index]

    def _stage_setitem_index(self, index: Any, value: Any) -> list[Callable[[], None]]:
        local = self.to_tensordict()
        local[index] = value
        return [lambda: self._store._stage_setitem_index(self._index_i, local)[0]()]


def _rebuild_lazy_store(cls: type, state: tuple[Any, ...]) -> LazyStackedTensorDictStore:
    params, count, dim, inner, device = state
    out: LazyStackedTensorDictStore = cls._connect(**params)  # type: ignore[attr-defined]
    out._init_layout(count, dim, torch.Size(inner), device)
    return out


def to_store(
    td: Any,
    *,
    backend: str = "redis",
    host: str = "localhost",
    port: int = 6379,
    db: int = 0,
    unix_socket_path: str | None = None,
    prefix: str = "tensordict",
    device: Any = None,
    **kwargs: Any,
) -> Any:
    """A copy of ``td`` on a Redis-compatible server (``td.to_store(...)``): a
    :class:`~tensordict.store.TensorDictStore`, or a :class:`LazyStackedTensorDictStore` for a
    lazy stack."""
    args = dict(
        backend=backend,
        host=host,
        port=port,
        db=db,
        unix_socket_path=unix_socket_path,
        prefix=prefix,
        device=device,
        **kwargs,
    )
    if isinstance(td, LazyStackedTensorDict):
        return LazyStackedTensorDictStore.from_lazy_stack(td, **args)
    return TensorDictStore.from_tensordict(td, **args)
