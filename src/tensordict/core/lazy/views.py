"""Lazy views of a tensordict: a shape operation or an index kept as an op over a source.

Upstream's legacy lazy mode (``set_lazy_legacy(True)``) makes ``permute``, ``transpose``,
``unsqueeze``, ``squeeze`` and ``view`` return such views, and ``td._get_sub_tensordict(index)``
returns one in every mode. A view holds no entry of its own:

* reading an entry applies the op to the source's entry (a tensor view where torch gives one;
  a nested tensordict comes back as a view of the same kind);
* writing an entry (``set``, ``set_``, ``update``, ``td[index] = ...``, in-place maths) writes
  into the source, through the inverse op, so new keys appear in the source too;
* everything else (``apply``, ``clone``, arithmetic, ...) works on the materialised view and
  gives a regular :class:`~tensordict.TensorDict`.

``_CustomOpTensorDict`` is the base of the shape views; ``_SubTensorDict`` views an index.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.entries import inplace_value
from tensordict.core.behaviour.setitem import setitem_index, stage_setitem
from tensordict.core.collection import OverSourceMixin
from tensordict.core.dense import TensorDict
from tensordict.core.indexing import _str_to_index, plan_index
from tensordict.core.keys import is_key_index
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.options import lazy_legacy
from tensordict.errors import (
    AlreadyMemmappedError,
    BatchSizeError,
    LazyViewError,
    LockedError,
    ShapeMismatchError,
    ViewArgumentError,
)

__all__ = [
    "_CustomOpTensorDict",
    "_PermutedTensorDict",
    "_SqueezedTensorDict",
    "_SubTensorDict",
    "_TransposedTensorDict",
    "_UnsqueezedTensorDict",
    "_ViewedTensorDict",
    "_str_to_index",
]

_MISSING: Any = object()
LeafFn = Callable[[torch.Tensor], torch.Tensor]


class _ViewBase(OverSourceMixin, TensorDictBase):
    """What every view shares: entries, lock and device come from ``_source``
    (``OverSourceMixin``)."""

    __slots__ = ("__weakref__", "_context", "_last_op", "_source")
    _source: Any
    _context: list[tuple[str, bool] | None] | None

    def _init_view(self, source: Any) -> None:
        if getattr(type(source), "_is_tensorclass", False):
            source = source._tensordict
        self._source = source
        self._lock_parents = None
        self._last_op = None
        self._context = None

    # ------------------------------------------------------------------ what a view maps
    def _read(self, value: Any) -> Any:
        """The source's entry as this view shows it."""
        raise NotImplementedError

    def _write(self, key: str, value: Any) -> None:
        """Store ``value`` (shaped like this view) as the source's entry ``key``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ primitives
    @property
    def batch_size(self) -> torch.Size:
        raise NotImplementedError

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        if torch.Size(value) != self.batch_size:
            raise BatchSizeError(
                f"the batch size of a {type(self).__name__} follows its source "
                f"({list(self.batch_size)}); call .to_tensordict() first to change it."
            )

    @property
    def names(self) -> list[str | None]:
        """The source's dimension names, as the view shows them (read only)."""
        names = self._names_or_none()
        return [None] * len(self.batch_size) if names is None else names

    @names.setter
    def names(self, value: Any) -> None:
        raise LazyViewError(self._names_frozen)

    _names_frozen = (
        "Names of a lazy tensordict cannot be modified. Call to_tensordict() first (or name "
        "the dims of its source)."
    )

    def _names_or_none(self) -> list[str | None] | None:
        source_names = self._source._names_or_none()
        if source_names is None:
            return None
        names = self._view_names(list(source_names))
        return names if any(n is not None for n in names) else None

    def _view_names(self, names: list[str | None]) -> list[str | None]:
        """The names of this view's batch dims, given its source's."""
        raise NotImplementedError

    def _check_unlockable(self) -> None:
        self._source._check_unlockable()

    def is_shared(self) -> bool:
        return self._source.is_shared()  # type: ignore[no-any-return]

    def _own_items(self) -> Iterator[tuple[str, Any]]:
        for key, value in self._source._own_items():
            yield key, self._read(value)

    def _own_key_items(self) -> Iterator[tuple[str, Any]]:
        return self._own_items()  # the entries as the view shows them, not its source's

    def _get_str(self, key: str, default: Any) -> Any:
        value = self._source._get_str(key, _MISSING)
        return default if value is _MISSING else self._read(value)

    def _set_str(
        self,
        key: str,
        value: Any,
        *,
        validated: bool,
        inplace: bool = False,
        ignore_lock: bool = False,
        non_blocking: bool = False,
    ) -> None:
        # (inplace / ignore_lock / non_blocking: upstream's signature, which lazy stacks of views
        # and TorchRL call). A shape view reads views of the source's tensors: an in-place write
        # copies into them; a sub-tensordict writes at its index in any case.
        if inplace and isinstance(self, _CustomOpTensorDict):
            existing = self._get_str(key, None)
            if isinstance(existing, torch.Tensor) and isinstance(value, torch.Tensor):
                existing.copy_(value)
                return
        if not validated:
            value = self._convert(key, value, self.batch_size)
        self._write(key, value)

    def _new_dense(self, source: dict[str, Any], batch_size: torch.Size, names: Any = None) -> Any:
        return TensorDict._new_unsafe(source, batch_size, self.device, names)

    def _materialize(self) -> Any:
        """A TensorDict of the entries as this view shows them (views of the source's tensors
        where torch gives views)."""
        return self._new_dense(dict(self._own_items()), self.batch_size, self._names_or_none())

    # ------------------------------------------------------------------ derived behaviour
    def _index(self, index: Any) -> Any:
        return self._materialize()._index(index)

    def _stage_setitem_index(self, index: Any, value: Any) -> list[Any]:
        """``self[index] = value``: written into the materialised view, whose keys new to the
        source are then handed to the source."""
        target = self._materialize()
        before = set(target._own_keys())
        writes = stage_setitem(target, index, value)

        def hand_over_new_keys() -> None:
            for key in target._own_keys():
                if key not in before:
                    self._write(key, target._get_str(key, None))

        return [*writes, hand_over_new_keys]

    def _apply_leaves(self, fn: Any, *others: Any, **kwargs: Any) -> Any:
        out = self._materialize()._apply_leaves(fn, *others, **kwargs)
        return self if kwargs.get("inplace") else out

    def _inplace_result(self, result: Any, inplace: bool, what: str) -> Any:
        if inplace and what == "to":
            raise ViewArgumentError(self._no_inplace_to)
        return super()._inplace_result(result, inplace, what)

    _no_inplace_to = (
        "Cannot use inplace=True with a lazy tensordict's to(): its entries live in its source. "
        "Call source.to(..., inplace=True), or keep the result of view.to(...)."
    )

    def _transform(self, leaf_fn: Any, batch_size: Any = None, names: Any = None) -> Any:
        out = self._materialize()._transform(leaf_fn, batch_size, names)
        if self.is_locked and not out.is_locked:  # shape operations keep the lock, as upstream
            out._set_locked(True)
        return out

    def _tensor_leaves(self) -> list[torch.Tensor]:
        return self._materialize()._tensor_leaves()  # type: ignore[no-any-return]

    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        return self._materialize().to_tensordict(retain_none=retain_none)

    def contiguous(self, *, inplace: bool = False, canonical: bool = False) -> Any:
        if inplace:
            raise LazyViewError(
                f"Cannot call contiguous inplace on a lazy tensordict ({type(self).__name__}): "
                "call td.contiguous() (a dense copy)."
            )
        return self.to_tensordict()

    def clone(self, recurse: bool = True, **kwargs: Any) -> Any:
        """A dense copy; with ``recurse=False``, the same view of a shallow copy of the
        source (as upstream)."""
        if not recurse:
            return self._rewrap(self._source.clone(recurse=False))
        return self._materialize().clone(recurse, **kwargs)

    def _rewrap(self, source: Any) -> Any:
        """This view, over another source."""
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as its dense copy: ``itemgetter(0)((copy,))`` names only the standard library,
        # so the pickle loads wherever the copy does (upstream too), and multiprocessing's
        # pickler still applies its own reduction (shared memory) to the copy
        return (operator.itemgetter(0), ((self.to_tensordict(),),))

    # ------------------------------------------------------------------ what a view refuses
    def _dense_first(self, op: str) -> LazyViewError:
        hint = "Call `reshape` instead" if op == "view" else "Make it dense"
        return LazyViewError(
            f"Cannot call `{op}` on a lazy tensordict ({type(self).__name__}). {hint} before "
            "calling this method by calling `to_tensordict` (or use set_lazy_legacy(True) for "
            "a lazy view of the view)."
        )

    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> Any:
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):  # on the dense copy
            return self._materialize().view(*shape, batch_size=batch_size)
        if size is not None:
            shape = (*shape, size)
        if not lazy_legacy():
            raise self._dense_first("view")
        return super().view(*shape)

    def permute(self, *dims: Any) -> Any:
        if not lazy_legacy():
            raise self._dense_first("permute")
        return super().permute(*dims)

    def transpose(self, dim0: int, dim1: int) -> Any:
        if not lazy_legacy():
            raise self._dense_first("transpose")
        return super().transpose(dim0, dim1)

    def unsqueeze(self, dim: int) -> Any:
        if not lazy_legacy():
            raise self._dense_first("unsqueeze")
        return super().unsqueeze(dim)

    def squeeze(self, dim: int | None = None) -> Any:
        if not lazy_legacy():
            sizes = self.batch_size if dim is None else self.batch_size[dim : dim + 1 or None]
            if 1 not in sizes:
                return self  # nothing to squeeze
            raise self._dense_first("squeeze")
        return super().squeeze(dim)

    def select(
        self, *keys: Any, inplace: bool = False, strict: bool = True, as_tensordict: bool = False
    ) -> Any:
        if inplace:
            raise LazyViewError(
                f"Cannot call select inplace on a lazy tensordict ({type(self).__name__}): "
                "select on its source, or use inplace=False."
            )
        return super().select(*keys, strict=strict, as_tensordict=as_tensordict)

    def split_keys(self, *key_sets: Any, inplace: bool = False, **kwargs: Any) -> tuple[Any, ...]:
        """Like :meth:`TensorDict.split_keys`; in place, the selected keys are deleted from the
        source."""
        parts = super().split_keys(*key_sets, inplace=False, **kwargs)
        if not inplace:
            return parts  # type: ignore[no-any-return]
        for part in parts[:-1]:
            for key in part._own_keys():
                if key in self._source._own_keys():
                    self._source._del_str(key)
        return (*parts[:-1], self)

    def _exclude_path(self, path: tuple[str, ...]) -> None:
        self._replace_contents(self)

    def _replace_contents(self, other: Any) -> Any:
        raise LazyViewError(
            f"Cannot call exclude inplace on a lazy tensordict ({type(self).__name__}) (nor "
            "flatten_keys/unflatten_keys): act on its source, or use inplace=False."
        )


# ====================================================================== shape views
class _CustomOpTensorDict(_ViewBase):
    """A lazy view of ``source`` through a shape operation on its batch dims.

    Subclasses give the op (:meth:`_forward`) and its inverse (:meth:`_backward`) on a tensor
    whose leading dims are the source's batch dims.
    """

    __slots__ = ("_bd", "custom_op_kwargs", "inv_op_kwargs")
    custom_op: str = ""  # the op's name, and its inverse's (class attributes, as upstream)
    inv_op: str = ""

    def __init__(self, source: Any, custom_op_kwargs: dict[str, Any], bd: int | None = None):
        self._init_view(source)
        # the number of leading dims the op acts on (a nested tensordict may have more)
        self._bd = len(self._source.batch_size) if bd is None else bd
        self.custom_op_kwargs = dict(custom_op_kwargs)
        self.inv_op_kwargs = self._inverse_kwargs()

    def _inverse_kwargs(self) -> dict[str, Any]:
        return {}

    def _forward(self, t: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _backward(self, t: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @property
    def batch_size(self) -> torch.Size:
        bs = self._source.batch_size
        head = self._forward(torch.empty(bs[: self._bd], device="meta")).shape
        return torch.Size([*head, *bs[self._bd :]])

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        _ViewBase.batch_size.fset(self, value)  # type: ignore[attr-defined]

    def _view_of(self, source: Any) -> Any:
        return type(self)(source, self.custom_op_kwargs, self._bd)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`TensorDictBase.to`, without ``batch_size=`` (as upstream)."""
        if kwargs.get("batch_size") is not None:
            raise ViewArgumentError(
                f"Cannot pass batch-size to a {type(self).__name__}: its batch size follows its "
                "source. Call view.to_tensordict().to(..., batch_size=...) instead."
            )
        return super().to(*args, **kwargs)

    def _view_names(self, names: list[str | None]) -> list[str | None]:
        head = self._forward_names(names[: self._bd], self._source.batch_size[: self._bd])
        return head + names[self._bd :]

    def _forward_names(self, names: list[str | None], sizes: torch.Size) -> list[str | None]:
        """The names of the op's output dims, given its input dims' names and sizes (default:
        unnamed, as upstream's ``view``)."""
        return [None] * len(self._forward_shape(sizes))

    def memmap_(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Any:
        """Write the view's entries (as the view shows them) to memory-mapped files, and make
        the source use them (through the inverse op): the source is memory-mapped too."""
        saved = self.saved_path
        moved = prefix is not None and os.path.abspath(os.fspath(prefix)) != saved
        if saved is not None and moved and not copy_existing and self.is_memmap():
            raise AlreadyMemmappedError(  # (upstream's wording first)
                "A filename was provided but the tensor already has a file associated: the "
                f"source of this view is memory-mapped at {saved}. Pass copy_existing=True to "
                "copy the files, or use view.memmap(prefix) for a copy."
            )
        mapped = self._materialize().memmap_(prefix, copy_existing=copy_existing, **kwargs)
        source = self._source
        was_locked = source.is_locked
        if was_locked:
            source._set_locked(False)
        for key, value in mapped._own_items():
            self._write(key, value)
        if hasattr(source, "_is_memmap"):
            source._is_memmap = True
            source._memmap_prefix = mapped.saved_path
        source._set_locked(True)  # memory-mapped tensordicts are locked
        return self

    _rewrap = _view_of

    def _read(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self._forward(value)
        if isinstance(value, TensorDictBase):
            return self._view_of(value)
        if isinstance(value, NonTensorData):
            return value._with_batch_size(self.batch_size)
        if isinstance(value, NonTensorStack):
            return value._transform(self._forward)
        if getattr(type(value), "_is_tensorclass", False):
            return value._transform(self._forward, self._forward_shape(value.batch_size))
        return value

    def _forward_shape(self, batch_size: torch.Size) -> torch.Size:
        return self._forward(torch.empty(batch_size, device="meta")).shape

    def _write(self, key: str, value: Any) -> None:
        source_bs = self._source.batch_size
        if isinstance(value, torch.Tensor):
            value = self._backward(value)
        elif isinstance(value, NonTensorData):
            value = value._with_batch_size(source_bs)
        elif isinstance(value, NonTensorStack):
            value = value._transform(self._backward)
        elif isinstance(value, TensorDictBase) or getattr(type(value), "_is_tensorclass", False):
            value = value._transform(self._backward, self._backward_shape(value.batch_size))
        self._source._set_str(key, value, validated=True)

    def _backward_shape(self, batch_size: torch.Size) -> torch.Size:
        return self._backward(torch.empty(batch_size, device="meta")).shape

    def _write_leaf_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        # a source that reads copies (a file, a server) is written through its own in-place
        # path, the value brought back to its shape; otherwise ``existing`` views its tensor
        if getattr(type(self._source), "_reads_copies", False) and isinstance(
            existing, torch.Tensor
        ):
            value = inplace_value(path, existing, item)
            self._source.set_(path[-1], self._backward(value.expand_as(existing)))
            return
        super()._write_leaf_inplace(path, existing, item)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(\n\tsource={self._source!r}, \n\top={self.custom_op}("
            + ", ".join(f"{k}={v}" for k, v in self.custom_op_kwargs.items())
            + "))"
        )

    def _undoes(self, op: str, kwargs: dict[str, Any]) -> bool:
        """Whether applying ``op(**kwargs)`` to this view gives back its source."""
        return op == self.inv_op and kwargs == self.inv_op_kwargs


def _trail(t: torch.Tensor, bd: int) -> list[int]:
    return list(range(bd, t.ndim))


class _PermutedTensorDict(_CustomOpTensorDict):
    """``source.permute(dims)`` as a lazy view (legacy lazy mode)."""

    __slots__ = ()
    custom_op = "permute"
    inv_op = "permute"

    def _inverse_kwargs(self) -> dict[str, Any]:
        dims = self.custom_op_kwargs["dims"]
        return {"dims": sorted(range(len(dims)), key=dims.__getitem__)}

    def _forward(self, t: torch.Tensor) -> torch.Tensor:
        dims = self.custom_op_kwargs["dims"]
        return t.permute(*dims, *_trail(t, len(dims)))

    def _forward_names(self, names: list[str | None], sizes: torch.Size) -> list[str | None]:
        return [names[d] for d in self.custom_op_kwargs["dims"]]

    def _backward(self, t: torch.Tensor) -> torch.Tensor:
        dims = self.inv_op_kwargs["dims"]
        return t.permute(*dims, *_trail(t, len(dims)))


class _TransposedTensorDict(_CustomOpTensorDict):
    """``source.transpose(dim0, dim1)`` as a lazy view (legacy lazy mode)."""

    __slots__ = ()
    custom_op = "transpose"
    inv_op = "transpose"

    def _inverse_kwargs(self) -> dict[str, Any]:
        return dict(self.custom_op_kwargs)

    def _forward(self, t: torch.Tensor) -> torch.Tensor:
        return t.transpose(self.custom_op_kwargs["dim0"], self.custom_op_kwargs["dim1"])

    _backward = _forward

    def _forward_names(self, names: list[str | None], sizes: torch.Size) -> list[str | None]:
        d0, d1 = self.custom_op_kwargs["dim0"], self.custom_op_kwargs["dim1"]
        names[d0], names[d1] = names[d1], names[d0]
        return names

    def _undoes(self, op: str, kwargs: dict[str, Any]) -> bool:
        pair = {kwargs.get("dim0"), kwargs.get("dim1")}
        mine = {self.custom_op_kwargs["dim0"], self.custom_op_kwargs["dim1"]}
        return op == "transpose" and pair == mine


class _UnsqueezedTensorDict(_CustomOpTensorDict):
    """``source.unsqueeze(dim)`` as a lazy view (legacy lazy mode)."""

    __slots__ = ()
    custom_op = "unsqueeze"
    inv_op = "squeeze"

    def _inverse_kwargs(self) -> dict[str, Any]:
        return dict(self.custom_op_kwargs)

    def _forward(self, t: torch.Tensor) -> torch.Tensor:
        return t.unsqueeze(self.custom_op_kwargs["dim"])

    def _forward_names(self, names: list[str | None], sizes: torch.Size) -> list[str | None]:
        names.insert(self.custom_op_kwargs["dim"], None)
        return names

    def _backward(self, t: torch.Tensor) -> torch.Tensor:
        return t.squeeze(self.custom_op_kwargs["dim"])


class _SqueezedTensorDict(_CustomOpTensorDict):
    """``source.squeeze(dim)`` as a lazy view (legacy lazy mode)."""

    __slots__ = ()
    custom_op = "squeeze"
    inv_op = "unsqueeze"

    def _inverse_kwargs(self) -> dict[str, Any]:
        return dict(self.custom_op_kwargs)

    def _forward(self, t: torch.Tensor) -> torch.Tensor:
        return t.squeeze(self.custom_op_kwargs["dim"])

    def _forward_names(self, names: list[str | None], sizes: torch.Size) -> list[str | None]:
        dims = self.custom_op_kwargs["dim"]
        if dims is None:
            dims = range(len(sizes))
        elif not isinstance(dims, (tuple, list)):
            dims = (dims,)
        gone = {d for d in dims if sizes[d] == 1}
        return [n for d, n in enumerate(names) if d not in gone]

    def _backward(self, t: torch.Tensor) -> torch.Tensor:
        dims = self.custom_op_kwargs["dim"]
        for d in sorted(dims) if isinstance(dims, tuple) else (dims,):
            t = t.unsqueeze(d)
        return t


class _ViewedTensorDict(_CustomOpTensorDict):
    """``source.view(size)`` as a lazy view (legacy lazy mode)."""

    __slots__ = ()
    custom_op = "view"
    inv_op = "view"

    def _inverse_kwargs(self) -> dict[str, Any]:
        return {"size": self._source.batch_size[: self._bd]}

    def _forward(self, t: torch.Tensor) -> torch.Tensor:
        size = self.custom_op_kwargs["size"]
        return t.view((*size, *t.shape[self._bd :]))

    def _backward(self, t: torch.Tensor) -> torch.Tensor:
        size = self.inv_op_kwargs["size"]
        n = len(self.custom_op_kwargs["size"])
        return t.view((*size, *t.shape[n:]))

    def _undoes(self, op: str, kwargs: dict[str, Any]) -> bool:
        return op == "view" and torch.Size(kwargs["size"]) == torch.Size(self.inv_op_kwargs["size"])


def lazy_shape_view(td: Any, op: str, **kwargs: Any) -> Any:
    """``td.<op>(**kwargs)`` as a lazy view (legacy lazy mode); the source when the op undoes
    the view ``td`` is."""
    if isinstance(td, _CustomOpTensorDict) and td._undoes(op, kwargs):
        return td._source
    if (op == "permute" and list(kwargs["dims"]) == list(range(len(kwargs["dims"])))) or (
        op == "transpose" and kwargs["dim0"] == kwargs["dim1"]
    ):
        return td  # a no-op: the tensordict itself, as upstream
    cls = _VIEWS[op]
    return cls(td, kwargs)


_VIEWS: dict[str, type[_CustomOpTensorDict]] = {
    "permute": _PermutedTensorDict,
    "transpose": _TransposedTensorDict,
    "unsqueeze": _UnsqueezedTensorDict,
    "squeeze": _SqueezedTensorDict,
    "view": _ViewedTensorDict,
}


# ====================================================================== index views
class _SubTensorDict(_ViewBase):
    """``source[index]`` as a view: reads index the source's entries, writes go into the source
    at ``index`` (new keys are created in the source, zero-filled elsewhere)."""

    __slots__ = ("_bs", "idx")

    def __init__(self, source: Any, idx: Any, batch_size: Any = None) -> None:
        self._init_view(source)
        self.idx = idx
        self._bs = plan_index(idx, self._source.batch_size).batch_size

    @property
    def batch_size(self) -> torch.Size:
        return self._bs

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        _ViewBase.batch_size.fset(self, value)  # type: ignore[attr-defined]

    _no_inplace_to = (
        "Cannot send a _SubTensorDict instance to device/dtype inplace: its entries live in its "
        "parent. Move the parent (parent.to(..., inplace=True)), or keep the result of sub.to()."
    )
    _names_frozen = (
        "Names of a subtensordict cannot be modified. Instantiate it as a TensorDict first "
        "(sub.to_tensordict()), or name the dims of its parent."
    )

    def _view_names(self, names: list[str | None]) -> list[str | None]:
        # an empty tensordict indexed like the source says which named dims survive the index
        return TensorDict({}, self._source.batch_size, names=names)[self.idx].names  # type: ignore[no-any-return]

    def _read(self, value: Any) -> Any:
        if isinstance(value, TensorDictBase):
            return _SubTensorDict(value, self.idx)
        return value[self.idx]

    def _write(self, key: str, value: Any) -> None:
        existing = self._source._get_str(key, _MISSING)
        is_td = isinstance(value, TensorDictBase) or getattr(type(value), "_is_tensorclass", False)
        if isinstance(existing, TensorDictBase) and not is_td:
            raise ShapeMismatchError(
                f"Tried to replace a tensordict with a {type(value).__name__} under {key!r} "
                "through a sub-tensordict, which can only write into the existing entries at "
                "its index. Delete the entry from the parent tensordict first."
            )
        if existing is _MISSING and is_td:
            # a new nested tensordict keeps the value's own extra batch dims
            empty = _empty_in_source(value, self._bs, self._source.batch_size)
            self._source._set_str(key, empty, validated=True)
        setitem_index(self._source, self.idx, {key: value})

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`TensorDictBase.to`; with ``batch_size=``, a TensorDict of that batch size
        (the view's own batch size follows its parent)."""
        if kwargs.get("batch_size") is not None:
            return self._materialize().to(*args, **kwargs)
        return super().to(*args, **kwargs)

    def get_parent_tensordict(self) -> Any:
        """The tensordict this one views (as upstream)."""
        return self._source

    def set(self, key: Any, item: Any, inplace: bool = False, **kwargs: Any) -> Any:
        """Set an entry: a new key is created in the parent (zero elsewhere); an existing
        tensor must be written with ``set_`` (or ``inplace=True``), as upstream."""
        existing = self.get(key, _MISSING) if not inplace else _MISSING
        if isinstance(existing, torch.Tensor):
            raise LazyViewError(
                f"Calling `_SubTensorDict.set(key, value, inplace=False)` is prohibited for "
                f"existing tensors ({key!r}): it would replace the parent's whole entry. Call "
                "_SubTensorDict.set_(...) (or td[key] = value) to write at the sub-tensordict's "
                "index, or clone the tensordict first."
            )
        return super().set(key, item, inplace, **kwargs)

    def __setitem__(self, index: Any, value: Any) -> None:
        if is_key_index(index):
            # written at the index, as upstream (a tensordict value is merged in)
            self.set(index, value, inplace=not isinstance(value, TensorDictBase))
            return
        super().__setitem__(index, value)

    def _write_leaf_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        if isinstance(existing, torch.Tensor):
            self._write(path[-1], item)  # ``existing`` may be a copy (an index tensor)
            return
        super()._write_leaf_inplace(path, existing, item)

    def _write_leaf_at(self, path: tuple[str, ...], existing: Any, value: Any, index: Any) -> None:
        for write in self._stage_setitem_index(index, {path[-1]: value}):
            write()

    def lock_(self) -> Any:
        raise LockedError(
            "Cannot lock a _SubTensorDict. Lock the parent tensordict instead (a "
            "sub-tensordict reads the lock of its parent)."
        )

    def unlock_(self) -> Any:
        """Nothing to do while the parent is unlocked; else unlock the parent instead."""
        if self._source.is_locked:
            raise LockedError(
                "Cannot unlock a _SubTensorDict. Unlock the parent tensordict instead."
            )
        self._last_op = ("unlock_", False)
        return self

    def memmap_(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Any:
        raise LazyViewError(
            "Converting a sub-tensordict values to memmap cannot be done: memory-map the parent "
            "tensordict (parent.memmap_()), or a copy (sub.to_tensordict().memmap_())."
        )

    def _stage_setitem_index(self, index: Any, value: Any) -> list[Any]:
        """``self[index] = value``: written into the materialised view, then every entry is
        written back into the source at ``self.idx`` (the view may hold copies)."""
        target = self._materialize()
        writes = stage_setitem(target, index, value)

        def write_back() -> None:
            for key in target._own_keys():
                self._write(key, target._get_str(key, None))

        return [*writes, write_back]

    def _get_sub_tensordict(self, index: Any) -> Any:
        return _SubTensorDict(self, index)

    def _rewrap(self, source: Any) -> Any:
        return _SubTensorDict(source, self.idx)


def _empty_in_source(value: Any, view_bs: torch.Size, source_bs: torch.Size) -> Any:
    """An empty tensordict shaped like ``value`` (nested ones included) in the source: the
    view's batch dims replaced by the source's, the value's extra batch dims kept."""
    inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
    out = inner.empty(batch_size=source_bs + inner.batch_size[len(view_bs) :])
    for key, nested in inner._own_items():
        if isinstance(nested, TensorDictBase) or getattr(type(nested), "_is_tensorclass", False):
            out._set_str(key, _empty_in_source(nested, view_bs, source_bs), validated=True)
    return out
