"""The tree-walk engine: one walk over the leaves serves apply, arithmetic, comparisons, reductions.

:meth:`OpsMixin._apply_leaves` visits every tensor of a tensordict (and the matching tensors of
``others``), calls a function on it and builds the result with the same structure. ``None`` results
drop the entry. Non-tensor entries are carried over unchanged, except by ``==``/``!=`` which compare
them element by element. Arithmetic and comparisons (``arithmetic``) and reductions
(``reductions``) are written on this walk.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from tensordict.core.batch_shape import is_uninitialized, leaf_shape
from tensordict.core.behaviour.locking import warn_lock_in_compile
from tensordict.core.behaviour.shape import nested_names
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.unbatched import is_unbatched, rebatch
from tensordict.errors import (
    BatchSizeError,
    ShapeMismatchError,
)

__all__ = ["OpsMixin"]

T = TypeVar("T", bound="OpsMixin")
_KEEP: Any = object()
_MISSING: Any = object()


def _is_collection(value: Any) -> bool:
    return isinstance(value, TensorCollection) or getattr(type(value), "_is_tensorclass", False)


def _other_value(other: Any, key: str, default: Any, path: tuple[str, ...]) -> Any:
    if isinstance(other, TensorCollection):
        value = other._get_str(key, _MISSING)
    elif getattr(type(other), "_is_tensorclass", False):
        value = other._tensordict._get_str(key, _MISSING)
    else:
        return other
    if value is _MISSING:
        if default is not _MISSING:
            return default
        raise ShapeMismatchError(
            f"the other tensordict has no entry {path + (key,)!r}. Both operands need the same "
            "keys; use td.select(...) or td.exclude(...) to align them, or pass default=."
        )
    return value


def _others_of(
    others: Sequence[Any], key: str, default: Any, path: tuple[str, ...], value: Any
) -> list[Any]:
    """The others' entries at ``key``; a nested tensordict holding no tensor that the others
    lack stands in for itself (its non-tensor entries pass through, as upstream's where)."""
    try:
        return [_other_value(o, key, default, path) for o in others]
    except ShapeMismatchError:
        inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
        if not isinstance(inner, TensorCollection) or inner._tensor_leaves():  # type: ignore[attr-defined]
            raise
        return [value for _ in others]


def _rebatch_non_tensor(
    value: NonTensorData | NonTensorStack, batch_size: torch.Size
) -> NonTensorData | None:
    """Non-tensor data under a batch-size-changing apply/reduction: one object is broadcast to
    the new size; a stack of different objects has no per-element rule and is dropped (None),
    as upstream (TorchRL's batched envs index their buffers this way on partial steps)."""
    if isinstance(value, NonTensorStack):
        collapsed = value.maybe_collapse()
        if not isinstance(collapsed, NonTensorData):
            return None
        value = collapsed
    return value._with_batch_size(batch_size)


def refuse_object_stacks(td: Any, what: str) -> None:
    """Raise if ``td`` holds a stack of different python objects: ``what`` (a reduction over
    batch dims) has no per-element rule for them (as upstream, which raises too)."""
    for key, value in td.items(True, True, is_leaf=leaf_or_non_tensor):
        if isinstance(value, NonTensorStack) and isinstance(value.maybe_collapse(), NonTensorStack):
            raise BatchSizeError(
                f"cannot carry the non-tensor stack {key!r} (one python object per element, "
                f"batch_size={list(value.batch_size)}) through {what}: there is no per-element "
                "rule for python objects. Drop it first with td.exclude(key) or "
                "td.filter_non_tensor_data()."
            )


def _nested_args(
    value: Any,
    batch_size: Any,
    new_bs: torch.Size,
    names: Any,
    nested_extra: bool,
    parent_dims: int,
) -> tuple[Any, Any]:
    """The batch size and names a nested tensordict's walk builds its result with."""
    keeps_extra = batch_size is None or nested_extra
    if names is _KEEP or (names is None and not keeps_extra):
        nested_nm = names
    elif keeps_extra:
        nested_nm = nested_names(names, len(new_bs), value, parent_dims)
    else:
        nested_nm = list(names)
    if batch_size is None:
        return None, nested_nm
    if nested_extra:
        return new_bs + value.batch_size[parent_dims:], nested_nm
    return new_bs, nested_nm


def keep_lock_of(source: Any, result: Any) -> Any:
    """Lock ``result`` when ``source`` is locked (upstream's elementwise ops keep the lock)."""
    if source.is_locked:
        if torch.compiler.is_compiling():
            warn_lock_in_compile()
        result._set_locked(True)
    return result


class OpsMixin(TensorCollection):
    """apply / named_apply, arithmetic, comparisons and reductions."""

    __slots__ = ()

    # ================================================================== the engine
    def _apply_leaves(
        self,
        fn: Callable[..., Any],
        *others: Any,
        batch_size: Sequence[int] | None = None,
        device: Any = _KEEP,
        names: Any = _KEEP,
        inplace: bool = False,
        default: Any = _MISSING,
        filter_empty: bool | None = None,
        named: bool = False,
        nested_keys: bool = False,
        prefix: tuple[str, ...] = (),
        keep_non_tensor_copy: bool = False,
        non_tensor_fn: Callable[..., Any] | None = None,
        nested_extra: bool = False,
    ) -> Any:
        """The walk. ``nested_extra``: with ``batch_size``, nested tensordicts keep their extra
        batch dims after it (reductions over batch dims leave them alone)."""
        new_bs = self.batch_size if batch_size is None else torch.Size(batch_size)
        out: dict[str, Any] = {}
        for key, value in self._own_items():
            theirs: Sequence[Any] = ()
            if others and not (
                non_tensor_fn is None and isinstance(value, (NonTensorData, NonTensorStack))
            ):  # (a passed-through entry's counterpart is not read: it may be missing, as
                # upstream's where(pad=))
                theirs = _others_of(others, key, default, prefix, value)
            if isinstance(value, torch.Tensor):
                if named:
                    name = prefix + (key,) if nested_keys and prefix else key
                    result = fn(name, value, *theirs)
                else:
                    result = fn(value, *theirs)
                if result is None:
                    continue
                if type(result) is not torch.Tensor and is_unbatched(result):
                    result = rebatch(result, new_bs)
                if inplace:
                    # written at once: memory stays at one result, even for a memory-mapped
                    # tensordict larger than RAM (operators check every leaf beforehand)
                    if result is not value:
                        value.copy_(result)
                    continue
                out[key] = result
            elif isinstance(value, (NonTensorData, NonTensorStack)):
                if non_tensor_fn is not None:
                    if named:
                        name = prefix + (key,) if nested_keys and prefix else key
                        result = non_tensor_fn(name, value, *theirs)
                    else:
                        result = non_tensor_fn(value, *theirs)
                    if result is not None and not inplace:
                        out[key] = result
                elif not inplace:
                    if batch_size is not None:
                        value = _rebatch_non_tensor(value, new_bs)
                        if value is None:
                            continue
                    out[key] = value.clone() if keep_non_tensor_copy else value
            elif _is_collection(value):
                nested_bs, nested_nm = _nested_args(
                    value, batch_size, new_bs, names, nested_extra, len(self.batch_size)
                )
                result = value._apply_leaves(
                    fn,
                    *theirs,
                    batch_size=nested_bs,
                    device=device,
                    names=nested_nm,
                    inplace=inplace,
                    default=default,
                    filter_empty=filter_empty,
                    named=named,
                    nested_keys=nested_keys,
                    prefix=prefix + (key,),
                    keep_non_tensor_copy=keep_non_tensor_copy,
                    non_tensor_fn=non_tensor_fn,
                    nested_extra=nested_extra,
                )
                if inplace or (filter_empty is not False and _emptied(result, value, filter_empty)):
                    continue
                out[key] = result
        if inplace:
            return self
        return self._build_result(out, new_bs, batch_size, device, names)

    def _build_result(
        self, out: dict[str, Any], new_bs: torch.Size, batch_size: Any, device: Any, names: Any
    ) -> Any:
        if batch_size is not None:
            n = len(new_bs)
            for key, value in out.items():
                if is_unbatched(value) or is_uninitialized(value):
                    continue
                # (a nested tensor's shape: -1 where its components differ, as batch sizes say)
                shape = leaf_shape(value) if isinstance(value, torch.Tensor) else None
                shape = getattr(value, "shape", None) if shape is None else shape
                if shape is not None and tuple(shape[:n]) != tuple(new_bs):
                    raise BatchSizeError(
                        f"apply produced {key!r} of shape {list(shape)}, which does not start "
                        f"with the requested batch_size={list(new_bs)}."
                    )
        if names is _KEEP:
            names = self._names_or_none() if batch_size is None else None
        elif names is not None and not any(n is not None for n in names):
            names = None
        result = self._new_dense(out, new_bs, names)
        if device is not _KEEP:
            result._device = torch.device(device) if device is not None else None
        return result

    # ================================================================== public apply
    def apply(
        self,
        fn: Callable[..., Any],
        *others: Any,
        batch_size: Sequence[int] | None = None,
        device: Any = _KEEP,
        names: Any = _KEEP,
        inplace: bool = False,
        default: Any = _MISSING,
        filter_empty: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Call ``fn`` on every tensor (with the matching tensors of ``others``).

        ``None`` results drop the entry; a nested tensordict ``fn`` emptied is dropped (any empty
        one with ``filter_empty=True``, none with ``False``), and so is the result: ``None``.
        ``batch_size`` sets the result's batch size; ``out`` receives the entries;
        ``propagate_lock`` locks the result if this tensordict is locked.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2), "b": {"c": torch.zeros(2)}}, [2])
            >>> (td.apply(lambda x: x + 1) == td + 1).all()
            True
            >>> list(td.apply(lambda x: None if x.sum() == 0 else x).keys(True, True))
            ['a']
        """
        if kwargs.get("call_on_nested"):
            return self._fast_apply(  # type: ignore[attr-defined]
                fn,
                *others,
                batch_size=batch_size,
                device=device,
                names=names,
                inplace=inplace,
                default=default,
                filter_empty=filter_empty,
                **kwargs,
            )
        if kwargs.pop("named", False):
            return self.named_apply(
                fn,
                *others,
                nested_keys=kwargs.pop("nested_keys", False),
                batch_size=batch_size,
                device=device,
                names=names,
                inplace=inplace,
                default=default,
                filter_empty=filter_empty,
                **kwargs,
            )
        produced: list[bool] = []
        if inplace and filter_empty:  # (was every result None? then, as upstream, None)
            inner = fn

            def fn(*args: Any) -> Any:
                result = inner(*args)
                produced.append(result is not None)
                return result

        is_leaf = kwargs.pop("is_leaf", None)
        # an ``is_leaf`` that counts non-tensor entries as leaves (``is_leaf_nontensor``) has
        # ``fn`` called on them too, as upstream
        on_non_tensor = is_leaf is not None and not inplace and bool(is_leaf(NonTensorData))
        result = self._apply_leaves(
            fn,
            *others,
            batch_size=batch_size,
            device=device,
            names=names,
            inplace=inplace,
            default=default,
            filter_empty=filter_empty,
            non_tensor_fn=fn if on_non_tensor else None,
        )
        if inplace and filter_empty and not any(produced) and not self._has_non_tensor:  # type: ignore[attr-defined]
            return None
        return self._finish_apply(result, inplace, filter_empty, kwargs)

    def named_apply(
        self,
        fn: Callable[..., Any],
        *others: Any,
        nested_keys: bool = False,
        batch_size: Sequence[int] | None = None,
        device: Any = _KEEP,
        names: Any = _KEEP,
        inplace: bool = False,
        default: Any = _MISSING,
        filter_empty: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Like :meth:`apply`, with the key first (the full tuple if ``nested_keys``).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(1)}, [], device="cpu")
            >>> td.named_apply(lambda name, x: x + len(name), device=None).device is None
            True
        """
        is_leaf = kwargs.pop("is_leaf", None)
        on_non_tensor = is_leaf is not None and not inplace and bool(is_leaf(NonTensorData))
        result = self._apply_leaves(
            fn,
            *others,
            batch_size=batch_size,
            device=device,
            names=names,
            inplace=inplace,
            default=default,
            filter_empty=filter_empty,
            named=True,
            nested_keys=nested_keys,
            non_tensor_fn=fn if on_non_tensor else None,
        )
        return self._finish_apply(result, inplace, filter_empty, kwargs)

    def _finish_apply(
        self, result: Any, inplace: bool, filter_empty: bool | None, kwargs: dict[str, Any]
    ) -> Any:
        """The upstream keywords of apply: ``out``, ``propagate_lock``; ``None`` when ``fn``
        emptied the tensordict."""
        if inplace:
            return result
        if filter_empty is not False and _emptied(result, self, filter_empty):
            return None
        if kwargs.get("propagate_lock"):
            result = keep_lock_of(self, result)
        out = kwargs.get("out")
        if out is not None:
            return out.update(result)
        return result

    def apply_(self: T, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> T:
        """Apply ``fn`` and write each result in place as soon as it is computed.

        Memory stays at one result at a time (a memory-mapped tensordict larger than RAM works),
        so if ``fn`` raises, or returns a result that does not broadcast to its entry, the entries
        before it are already written. For all or nothing, build the results first:
        ``td.update_(td.apply(fn))``.
        """
        return self._apply_leaves(fn, *others, inplace=True, **kwargs)  # type: ignore[no-any-return]

    # ================================================================== unary maths
    def _elementwise(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
        """``fn`` of every leaf; locked if ``self`` is (as upstream's elementwise maths)."""
        return keep_lock_of(self, self._apply_leaves(fn))

    def __neg__(self) -> Any:
        return self._elementwise(operator.neg)

    def __abs__(self) -> Any:
        return self._elementwise(torch.abs)

    def __invert__(self) -> Any:
        return self._elementwise(operator.invert)

    def abs(self) -> Any:
        return self._elementwise(torch.abs)

    def neg(self) -> Any:
        return self._elementwise(torch.neg)

    def exp(self) -> Any:
        return self._elementwise(torch.exp)

    def log(self) -> Any:
        return self._elementwise(torch.log)

    def sqrt(self) -> Any:
        return self._elementwise(torch.sqrt)

    def sign(self) -> Any:
        return self._elementwise(torch.sign)

    def sigmoid(self) -> Any:
        return self._elementwise(torch.sigmoid)

    def reciprocal(self) -> Any:
        return self._elementwise(torch.reciprocal)

    def isfinite(self) -> Any:
        """A tensordict of bools: which elements are finite."""
        return self._elementwise(torch.isfinite)

    def isnan(self) -> Any:
        return self._elementwise(torch.isnan)

    def isinf(self) -> Any:
        return self._elementwise(torch.isinf)

    def logical_not(self) -> Any:
        return self._elementwise(torch.logical_not)

    def abs_(self: T) -> T:
        return self._apply_leaves(torch.abs_, inplace=True)  # type: ignore[no-any-return]

    def neg_(self: T) -> T:
        return self._apply_leaves(torch.neg_, inplace=True)  # type: ignore[no-any-return]

    def exp_(self: T) -> T:
        return self._apply_leaves(torch.exp_, inplace=True)  # type: ignore[no-any-return]

    def sqrt_(self: T) -> T:
        return self._apply_leaves(torch.sqrt_, inplace=True)  # type: ignore[no-any-return]

    def fill_(self: T, key: Any, value: Any) -> T:
        """Fill the entry ``key`` with ``value`` in place."""
        td: Any = self
        entry = td.get(key)
        if entry is None:
            raise td._missing_key(key)
        if isinstance(entry, torch.Tensor):
            td.set_(key, torch.as_tensor(value, dtype=entry.dtype))  # (lazy stacks: per member)
        else:
            entry.apply_(lambda x: x.fill_(value))
        return self

    # ================================================================== leaves
    def _tensor_leaves(self) -> list[torch.Tensor]:
        """The stored tensors themselves (writing to them writes to the tensordict)."""
        leaves: list[torch.Tensor] = []
        for _, v in self._own_items():
            if getattr(type(v), "_is_tensorclass", False):
                v = v._tensordict
            if isinstance(v, torch.Tensor):
                leaves.append(v)
            elif isinstance(v, OpsMixin):  # a nested lazy stack gives its members' tensors
                leaves.extend(v._tensor_leaves())
        return leaves


def _emptied(result: Any, source: Any, filter_empty: bool | None) -> bool:
    """Whether a nested result is dropped: empty, and (by default) only if ``fn`` emptied it (an
    empty source tensordict stays), as upstream."""
    if filter_empty:
        return _is_empty(result)
    return not _own_keys(result) and bool(_own_keys(source))


def _own_keys(td: Any) -> list[str]:
    inner = td._tensordict if getattr(type(td), "_is_tensorclass", False) else td
    return inner._own_keys()  # type: ignore[no-any-return]


def _is_empty(td: Any) -> bool:
    if getattr(type(td), "_is_tensorclass", False):
        # (as upstream, whose tensorclasses keep non-tensor fields apart: a tensorclass left
        # with only those is empty; a stack of python objects, one per element, is an entry of
        # upstream's inner tensordict, and counts)
        leaves = td._tensordict.values(True, True, is_leaf=leaf_or_non_tensor)
        return not any(isinstance(v, (torch.Tensor, NonTensorStack)) for v in leaves)
    return not any(
        True for _ in td.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
    )


class CastMixin(TensorCollection):
    """dtype shortcuts; a separate class so that ``bool``/``int``/``float`` stay the builtins
    everywhere else."""

    __slots__ = ()

    def _cast(self, dtype: torch.dtype) -> Any:
        result = self._apply_leaves(lambda x: x.to(dtype))  # type: ignore[attr-defined]
        if self.is_locked:  # the dtype shortcuts keep the lock, as upstream
            result._set_locked(True)
        return result

    def half(self) -> Any:
        return self._cast(torch.float16)

    def bfloat16(self) -> Any:
        return self._cast(torch.bfloat16)

    def double(self) -> Any:
        return self._cast(torch.float64)

    def long(self) -> Any:
        return self._cast(torch.int64)

    def float(self) -> Any:
        """Cast every tensor to float32."""
        return self._cast(torch.float32)

    def int(self) -> Any:
        """Cast every tensor to int32."""
        return self._cast(torch.int32)

    def bool(self) -> Any:
        """Cast every tensor to bool."""
        return self._cast(torch.bool)

    def type(self, dst_type: torch.dtype) -> Any:
        """Cast every tensor to ``dst_type`` (as ``Tensor.type``)."""
        return self._cast(dst_type)

    # upstream's named casts, one per dtype (``td.float16()``, ``td.uint8()``, ...)
    def float16(self) -> Any:
        return self._cast(torch.float16)

    def float32(self) -> Any:
        return self._cast(torch.float32)

    def float64(self) -> Any:
        return self._cast(torch.float64)

    def int8(self) -> Any:
        return self._cast(torch.int8)

    def int16(self) -> Any:
        return self._cast(torch.int16)

    def int32(self) -> Any:
        return self._cast(torch.int32)

    def int64(self) -> Any:
        return self._cast(torch.int64)

    def uint8(self) -> Any:
        return self._cast(torch.uint8)

    def uint16(self) -> Any:
        return self._cast(torch.uint16)

    def uint32(self) -> Any:
        return self._cast(torch.uint32)

    def uint64(self) -> Any:
        return self._cast(torch.uint64)

    def complex64(self) -> Any:
        return self._cast(torch.complex64)

    def complex128(self) -> Any:
        return self._cast(torch.complex128)
