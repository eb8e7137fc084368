"""BackedTensorDict: the behaviour shared by tensordicts whose leaves live outside the process.

A file (:class:`~tensordict.formats.persistent.PersistentTensorDict`) or a key-value server
(:class:`~tensordict.store.TensorDictStore`) holds the data; reading a leaf returns a new tensor.
The core's in-place paths write into the tensors they get, which here would be copies, so every
one of them is routed to :meth:`BackedTensorDict._write_leaf` instead: ``set_`` /
``set(inplace=True)`` / ``update_`` (``_write_inplace``), ``set_at_``, ``apply_`` and the in-place
operators (``_apply_leaves(inplace=True)``), ``zero_``, ``fill_``. Nested keys reach nested
groups of the backing store (``_parent_for_write``). A subclass provides the primitives: the kind
of an entry, its shape and dtype, reading and writing a leaf, the nested view of a group.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.entries import locked_message
from tensordict.core.dense import TensorDict
from tensordict.core.keys import key_path
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.serial.printing import field_lines
from tensordict.errors import (
    LockedError,
    ShapeMismatchError,
    TensorDictKeyError,
    ViewArgumentError,
)

__all__ = ["BackedTensorDict", "LeafInfo", "UnreadInfo"]

_MISSING: Any = object()

#: entry kinds: a tensor, a nested group, python object(s), a number stored for a whole batch
ARRAY, GROUP, NON_TENSOR, SCALAR = "array", "group", "non_tensor", "scalar"


class LeafInfo:
    """What ``repr`` shows for a leaf that is not read: its shape and dtype."""

    def __init__(self, shape: Sequence[int], dtype: torch.dtype, device: Any) -> None:
        self.shape, self.dtype, self.device = torch.Size(shape), dtype, device

    def __repr__(self) -> str:
        return (
            f"Tensor(shape={self.shape}, device={self.device or 'cpu'}, dtype={self.dtype}, "
            "is_shared=False)"
        )


class UnreadInfo:
    """What ``repr`` shows for python objects it must not read (pickles, which it never
    unpickles; data of a type torch cannot hold): why, instead of the value."""

    def __init__(self, why: str, per_element: bool, batch_size: torch.Size, device: Any) -> None:
        self.why, self.per_element = why, per_element
        self.batch_size, self.device = batch_size, device

    def __repr__(self) -> str:
        name = "NonTensorStack" if self.per_element else "NonTensorData"
        return f"{name}(data=<{self.why}>, batch_size={self.batch_size}, device={self.device})"


class BackedTensorDict(TensorDictBase):
    """A tensordict whose leaves are read from, and written to, a backing store (abstract)."""

    __slots__ = (
        "__weakref__",
        "_batch_size",
        "_context",
        "_device",
        "_is_locked",
        "_last_op",
        "_names",
    )

    #: reading a leaf gives a new tensor: writing into it is lost (views write through set_)
    _reads_copies = True

    _batch_size: torch.Size
    _device: torch.device | None
    _names: list[str | None] | None
    _is_locked: bool
    _context: list[tuple[str, bool] | None] | None

    def _init_state(self, batch_size: Any, device: Any, names: Any, locked: bool) -> None:
        self._batch_size = torch.Size(batch_size)
        self._device = torch.device(device) if device is not None else None
        self._names = list(names) if names is not None and any(names) else None
        self._is_locked = locked
        self._lock_parents = None
        self._last_op = None
        self._context = None

    # ================================================================== primitives to provide
    def _kind(self, key: str) -> str | None:
        """``"array"``, ``"group"``, ``"non_tensor"``, ``"scalar"`` or None if absent."""
        raise NotImplementedError

    def _leaf_meta(self, key: str) -> tuple[tuple[int, ...], torch.dtype]:
        """The shape (as this tensordict reads it) and dtype of an array, without reading it."""
        raise NotImplementedError

    def _read_leaf(self, key: str) -> torch.Tensor:
        raise NotImplementedError

    def _read_non_tensor(self, key: str, kind: str) -> Any:
        raise NotImplementedError

    def _child(self, key: str) -> BackedTensorDict:
        raise NotImplementedError

    def _write_leaf(self, key: str, value: Any, index: Any = None) -> None:
        """Write ``value`` into the array ``key`` (at ``index`` of the leaf, if given)."""
        raise NotImplementedError

    def _repr_extra(self) -> list[str]:
        return []

    # ================================================================== state
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        raise NotImplementedError

    @property
    def device(self) -> torch.device | None:
        return self._device

    @device.setter
    def device(self, value: Any) -> None:
        raise RuntimeError("the device of a tensordict cannot be set. Use td.to(device).")

    def _set_device(self, device: torch.device | None) -> None:
        self._device = device

    @property
    def names(self) -> list[str | None]:
        return list(self._names) if self._names is not None else [None] * self.batch_dims

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        from tensordict.errors import BatchSizeError

        if value is not None and len(value) != self.batch_dims:
            raise BatchSizeError(
                f"got {len(value)} names for batch_size={list(self._batch_size)}: give one name "
                "(or None) per batch dimension."
            )
        self._names = list(value) if value is not None and any(value) else None

    def _names_or_none(self) -> list[str | None] | None:
        return self._names

    @property
    def is_locked(self) -> bool:
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def _set_locked(self, value: bool, parent: TensorDictBase | None = None) -> None:
        if value and parent is not None:
            self._add_lock_parent(parent)
        self._is_locked = value

    def _context_ops(self) -> list[tuple[str, bool] | None]:
        if self._context is None:
            self._context = []
        return self._context

    def _new_dense(
        self, source: dict[str, Any], batch_size: torch.Size, names: Any = None
    ) -> TensorDict:
        return TensorDict._new_unsafe(source, batch_size, self._device, names)

    def is_memmap(self) -> bool:
        return False

    def is_shared(self) -> bool:
        return False

    @property
    def saved_path(self) -> str | None:
        return None

    def is_contiguous(self) -> bool:
        return False

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`TensorDictBase.to`, without ``inplace=True``: the data stays in its file
        or server, so an in-place move is refused even onto the device it reports (as upstream).

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> path = os.path.join(tempfile.mkdtemp(), "to.h5")
            >>> ptd = TensorDict({"a": torch.zeros(2)}, [2]).to_h5(path)
            >>> ptd.to(torch.float64)["a"].dtype
            torch.float64
            >>> ptd.close()
        """
        if kwargs.get("inplace"):
            self._inplace_result(self, True, "to")
        return super().to(*args, **kwargs)

    def _inplace_result(self, result: Any, inplace: bool, what: str) -> Any:
        if inplace:
            raise ViewArgumentError(
                f"Cannot use inplace=True with a {type(self).__name__}'s {what}(): its data "
                f"lives in its file or server. Use the out-of-place {what}() and keep the result."
            )
        return result

    def share_memory_(self) -> Any:
        raise NotImplementedError(
            f"a {type(self).__name__} keeps its data outside the process and cannot be moved to "
            "shared memory. Read it with .to_tensordict() first, or pass it to workers as it is "
            "(they reconnect to the data)."
        )

    # ================================================================== reading
    def _get_str(self, key: str, default: Any) -> Any:
        kind = self._kind(key)
        if kind is None:
            return default
        if kind == ARRAY:
            return self._read_leaf(key)
        if kind == GROUP:
            return self._child(key)
        return self._read_non_tensor(key, kind)

    def _own_items(self) -> Iterator[tuple[str, Any]]:
        for key in self._own_keys():
            yield key, self._get_str(key, None)

    def _own_key_items(self) -> Iterator[tuple[str, Any]]:
        # keys() needs the kind of each entry, not its data: arrays are stood in by meta
        # tensors, python objects by empty stand-ins (a payload is never read, nor unpickled)
        for key in self._own_keys():
            kind = self._kind(key)
            if kind == ARRAY:
                shape, dtype = self._leaf_meta(key)
                yield key, torch.empty(shape, dtype=dtype, device="meta")
            elif kind == NON_TENSOR and self._non_tensor_layout(key) is not None:
                yield key, self._non_tensor_stand_in(key)
            else:
                yield key, self._get_str(key, None)

    def _non_tensor_layout(self, key: str) -> tuple[str | None, tuple[int, ...] | None] | None:
        """``(why repr must not read it or None, per-element shape or None)`` of the
        python-object entry ``key``, from its metadata only; None when the backing store cannot
        tell without reading it."""
        return None

    def _non_tensor_stand_in(self, key: str) -> Any:
        """What ``keys()`` needs of a python-object entry: its class, not its value."""
        layout = self._non_tensor_layout(key)
        if layout is not None and layout[1] is not None:
            return NonTensorStack.from_array(np.empty((0,), dtype=object), self._device)
        return NonTensorData._new(None, self._batch_size, self._device)

    def _shown(self, key: str, kind: str | None) -> Any:
        """What ``repr`` shows for the entry ``key``: nothing is read but python objects that
        need no unpickling."""
        if kind == ARRAY:
            shape, dtype = self._leaf_meta(key)
            return LeafInfo(shape, dtype, self._device)
        layout = self._non_tensor_layout(key) if kind == NON_TENSOR else None
        if layout is not None and layout[0] is not None:
            return UnreadInfo(layout[0], layout[1] is not None, self._batch_size, self._device)
        return self._get_str(key, None)

    def entry_class(self, key: Any) -> type:
        """The class of the entry at ``key``, without reading a tensor."""
        path = key_path(key)
        parent = self._get_path(path[:-1], None) if len(path) > 1 else self
        if isinstance(parent, BackedTensorDict) and parent._kind(path[-1]) == ARRAY:
            return torch.Tensor
        return super().entry_class(key)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """Read everything into a regular :class:`TensorDict`."""
        source: dict[str, Any] = {}
        for key, value in self._own_items():
            if isinstance(value, BackedTensorDict):
                value = value.to_tensordict()
            source[key] = value
        return TensorDict._new_unsafe(source, self._batch_size, self._device, self._names)

    def to_local(self) -> TensorDict:
        """Same as :meth:`to_tensordict`."""
        return self.to_tensordict()

    def contiguous(self, *, inplace: bool = False, canonical: bool = False) -> Any:
        """A dense in-memory copy (``inplace`` is refused: the data stays in the file)."""
        if inplace:
            raise ValueError(
                "contiguous(inplace=True) is not supported on a file-backed tensordict: its data "
                "stays in the file. Call td.contiguous() for an in-memory copy."
            )
        return self.to_tensordict()

    def __repr__(self) -> str:
        lines = [(key, self._shown(key, self._kind(key))) for key in self._own_keys()]
        fields = textwrap.indent("\n" + ",\n".join(field_lines(lines)), "    ")
        parts = [
            f"fields={{{fields}}}",
            f"batch_size={self._batch_size}",
            f"device={self._device}",
            *self._repr_extra(),
        ]
        body = textwrap.indent(",\n".join(parts), "    ")
        return f"{type(self).__name__}(\n{body})"

    # ================================================================== writing
    def _parent_for_write(self, path: tuple[str, ...], create: bool) -> Any:
        node: Any = self
        for i, part in enumerate(path[:-1]):
            if not isinstance(node, BackedTensorDict):
                return node._parent_for_write(path[i:], create)
            kind = node._kind(part)
            if kind is None:
                if not create:
                    raise self._missing_key(path[: i + 1])
                if node.is_locked:
                    raise LockedError(locked_message(f"create the nested key {path[: i + 1]!r}"))
                node._set_str(part, node._new_dense({}, node.batch_size), validated=True)
            elif kind != GROUP:
                raise TensorDictKeyError(
                    f"cannot reach {path!r}: {path[: i + 1]!r} is a leaf, not a nested "
                    "tensordict. Use a different key, or delete the entry first."
                )
            node = node._child(part)
        return node

    def _write_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        parent = self._parent_for_write(path, create=False)
        if isinstance(parent, BackedTensorDict):
            kind = parent._kind(path[-1])
            if kind == ARRAY:
                parent._write_leaf(path[-1], item)
                return
            if kind == GROUP:
                parent._child(path[-1]).update_(item)
                return
        super()._write_inplace(path, existing, item)

    def set_at_(self, key: Any, value: Any, index: Any) -> Any:
        """Write ``value`` into ``td[key][index]`` where the data lives."""
        path = key_path(key)
        parent = self._parent_for_write(path, create=False)
        if parent._kind(path[-1]) != ARRAY:
            raise self._missing_key(key)
        parent._write_leaf(path[-1], value, index)
        return self

    def _apply_leaves(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> Any:
        if not kwargs.get("inplace"):
            return super()._apply_leaves(fn, *others, **kwargs)
        from tensordict.core.behaviour.ops import _other_value

        default = kwargs.get("default", _MISSING)
        named, prefix = kwargs.get("named", False), kwargs.get("prefix", ())
        for key in self._own_keys():
            kind = self._kind(key)
            theirs = [_other_value(o, key, default, prefix) for o in others]
            if kind == GROUP:
                self._child(key)._apply_leaves(fn, *theirs, **dict(kwargs, prefix=prefix + (key,)))
            elif kind == ARRAY:
                value = self._read_leaf(key)
                name = prefix + (key,) if kwargs.get("nested_keys") and prefix else key
                result = fn(name, value, *theirs) if named else fn(value, *theirs)
                if result is not None:
                    self._write_leaf(key, result)
        return self

    def zero_(self) -> Any:
        """Write zeros into every array."""
        return self._apply_leaves(lambda t: t.zero_(), inplace=True)

    def fill_(self, key: Any, value: Any) -> Any:
        """Fill the entry ``key`` (an array, or every array of a group) with ``value``."""
        entry = self.get(key)
        if isinstance(entry, BackedTensorDict):
            entry._apply_leaves(lambda t: t.fill_(value), inplace=True)
        else:
            self.set_(key, torch.full_like(entry, value))
        return self


def check_fits(key: str, value: torch.Tensor, shape: Sequence[int]) -> None:
    """Raise before writing if ``value`` does not broadcast to the selected ``shape``."""
    from tensordict.core.behaviour.shape import broadcasts_to

    if not broadcasts_to(value.shape, torch.Size(shape)):
        raise ShapeMismatchError(
            f"cannot write a value of shape {list(value.shape)} into {key!r}, whose selected "
            f"part has shape {list(shape)}. Nothing was written."
        )
