"""The tree-walk engine: one walk over the leaves serves apply, arithmetic, comparisons, reductions.

:meth:`OpsMixin._apply_leaves` visits every tensor of a tensordict (and the matching tensors of
``others``), calls a function on it and builds the result with the same structure. ``None`` results
drop the entry. Non-tensor entries are carried over unchanged, except by ``==``/``!=`` which compare
them element by element. Reductions, written on the same walk, live in ``reductions``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from tensordict.core.collection import TensorCollection
from tensordict.core.non_tensor import NonTensorData, NonTensorStack
from tensordict.core.shape import broadcasts_to, nested_names
from tensordict.core.unbatched import is_unbatched, rebatch
from tensordict.errors import (
    BatchSizeError,
    DTypeCastError,
    KeyMismatchError,
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


def _on_data(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """``op`` on the python values of two non-tensor entries (upstream's ``|`` and ``^``)."""

    def fn(value: Any, *theirs: Any) -> Any:
        other = theirs[0] if theirs else None
        if isinstance(value, NonTensorData) and isinstance(other, NonTensorData):
            return value._with_batch_size(value.batch_size).update_(
                NonTensorData(op(value.data, other.data))
            )
        return value

    return fn


def _rebatch_non_tensor(
    path: tuple[str, ...], value: NonTensorData | NonTensorStack, batch_size: torch.Size
) -> NonTensorData:
    """Non-tensor data under a batch-size-changing apply/reduction: broadcast to the new size."""
    if isinstance(value, NonTensorStack):
        collapsed = value.maybe_collapse()
        if not isinstance(collapsed, NonTensorData):
            key = path[0] if len(path) == 1 else path
            raise BatchSizeError(
                f"cannot carry the non-tensor stack {key!r} (one python object per element, "
                f"batch_size={list(value.batch_size)}) over to the new batch_size="
                f"{list(batch_size)}: there is no per-element rule for python objects. Drop it "
                "first with td.exclude(key) or td.filter_non_tensor_data()."
            )
        value = collapsed
    return value._with_batch_size(batch_size)


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


def _leaf_keys(td: Any) -> set[Any]:
    return set(td.keys(include_nested=True, leaves_only=True))


def _check_same_keys(td: Any, other: Any) -> None:
    mine, theirs = _leaf_keys(td), _leaf_keys(other)
    if mine == theirs:
        return
    only_mine, only_theirs = mine - theirs, theirs - mine
    message = "keys in tensordicts mismatch."
    if only_mine:
        message += f" The first TD has keys {_key_set(only_mine)} that the second does not have."
    if only_theirs:
        message += f" The second TD has keys {_key_set(only_theirs)} that the first does not have."
    raise KeyMismatchError(
        f"{message} Both operands need the same keys: align them first with td.select(...) or "
        "td.exclude(...)."
    )


def _key_set(keys: set[Any]) -> str:
    return "{" + ", ".join(sorted(map(repr, keys))) + "}"


def broadcast_batch(batch_size: Sequence[int], shape: Sequence[int]) -> torch.Size:
    """The batch size that ``batch_size`` and an operand of ``shape`` broadcast to (as torch).

    Examples:
        >>> broadcast_batch((3, 4), (4,)), broadcast_batch((3, 1), (2, 1, 5))
        (torch.Size([3, 4]), torch.Size([2, 3, 5]))
    """
    n = max(len(batch_size), len(shape))
    a = (1,) * (n - len(batch_size)) + tuple(batch_size)
    b = (1,) * (n - len(shape)) + tuple(shape)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ShapeMismatchError(
                f"an operand of shape {list(shape)} does not broadcast with batch_size="
                f"{list(batch_size)}: a tensor lines up with the batch dimensions (aligned from "
                "the right, as torch broadcasts), not with each entry's trailing dimensions. Give "
                "a tensor shaped like the batch size (or broadcastable to it), or use "
                "td.apply(lambda x: x + t) to combine it with each entry as is."
            )
        out.append(y if x == 1 else x)
    return torch.Size(out)


def batch_aligned(t: torch.Tensor, batch_dims: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``t`` (broadcastable to the batch size) viewed with trailing singleton dims for a leaf."""
    t = t.reshape((1,) * (batch_dims - t.ndim) + tuple(t.shape))
    views: dict[int, torch.Tensor] = {}

    def for_leaf(x: torch.Tensor) -> torch.Tensor:
        view = views.get(x.ndim)
        if view is None:
            view = views[x.ndim] = t.reshape(tuple(t.shape) + (1,) * (x.ndim - t.ndim))
        return view

    return for_leaf


def keep_lock_of(source: Any, result: Any) -> Any:
    """Lock ``result`` when ``source`` is locked (upstream's elementwise ops keep the lock)."""
    if source.is_locked:
        result._set_locked(True)
    return result


def _key_str(path: tuple[str, ...]) -> str:
    return repr(path[0]) if len(path) == 1 else repr(path)


class _InplaceCheck:
    """Raise before an in-place operator changes anything if one leaf would fail."""

    _SYMBOLS = {"iadd": "+=", "isub": "-=", "imul": "*=", "itruediv": "/=", "ipow": "**="}

    def __init__(self, op: Callable[[Any, Any], Any]) -> None:
        self.op = op
        self.name = self._SYMBOLS.get(op.__name__, op.__name__)

    def __call__(self, path: Any, x: torch.Tensor, y: Any) -> torch.Tensor:
        path = path if isinstance(path, tuple) else (path,)
        shape = y.shape if isinstance(y, torch.Tensor) else ()
        if not broadcasts_to(shape, x.shape):
            raise ShapeMismatchError(
                f"in-place {self.name}: the other operand's {_key_str(path)} "
                f"has shape {list(shape)}, which does not broadcast to {list(x.shape)}. Nothing "
                "was changed."
            )
        if isinstance(y, np.generic):
            y = y.item()
        if isinstance(y, (torch.Tensor, bool, int, float, complex)):
            result = torch.result_type(x, y)
            if self.op is operator.itruediv and not (result.is_floating_point or result.is_complex):
                result = torch.get_default_dtype()
            if not torch.can_cast(result, x.dtype):
                raise DTypeCastError(
                    f"in-place {self.name}: the result for {_key_str(path)} "
                    f"would be {result}, which cannot be stored in its dtype {x.dtype}. Nothing "
                    "was changed; use the out-of-place operator or cast the tensordict first."
                )
        return x  # the same tensor: nothing to write


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
            theirs = [_other_value(o, key, default, prefix) for o in others]
            if isinstance(value, torch.Tensor):
                if named:
                    name = prefix + (key,) if nested_keys and prefix else key
                    result = fn(name, value, *theirs)
                else:
                    result = fn(value, *theirs)
                if result is None:
                    continue
                if result.__class__ is not torch.Tensor and is_unbatched(result):
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
                    result = non_tensor_fn(value, *theirs)
                    if result is not None and not inplace:
                        out[key] = result
                elif not inplace:
                    if batch_size is not None:
                        value = _rebatch_non_tensor(prefix + (key,), value, new_bs)
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
                if inplace or (filter_empty and _is_empty(result)):
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
                shape = getattr(value, "shape", None)
                if is_unbatched(value):
                    continue
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

        ``None`` results drop the entry. ``batch_size`` sets the result's batch size.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2), "b": {"c": torch.zeros(2)}}, [2])
            >>> (td.apply(lambda x: x + 1) == td + 1).all()
            True
            >>> list(td.apply(lambda x: None if x.sum() == 0 else x).keys(True, True))
            ['a']
        """
        return self._apply_leaves(
            fn,
            *others,
            batch_size=batch_size,
            device=device,
            names=names,
            inplace=inplace,
            default=default,
            filter_empty=filter_empty,
        )

    def named_apply(
        self,
        fn: Callable[..., Any],
        *others: Any,
        nested_keys: bool = False,
        batch_size: Sequence[int] | None = None,
        names: Any = _KEEP,
        inplace: bool = False,
        default: Any = _MISSING,
        filter_empty: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Like :meth:`apply`, with the key first (the full tuple if ``nested_keys``)."""
        return self._apply_leaves(
            fn,
            *others,
            batch_size=batch_size,
            names=names,
            inplace=inplace,
            default=default,
            filter_empty=filter_empty,
            named=True,
            nested_keys=nested_keys,
        )

    def apply_(self: T, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> T:
        """Apply ``fn`` and write each result in place as soon as it is computed.

        Memory stays at one result at a time (a memory-mapped tensordict larger than RAM works),
        so if ``fn`` raises, or returns a result that does not broadcast to its entry, the entries
        before it are already written. For all or nothing, build the results first:
        ``td.update_(td.apply(fn))``.
        """
        return self._apply_leaves(fn, *others, inplace=True, **kwargs)  # type: ignore[no-any-return]

    # ================================================================== binary operators
    def _binary(
        self,
        other: Any,
        op: Callable[[Any, Any], Any],
        inplace: bool = False,
        keep_lock: bool = True,
        batch_align: bool = True,
        on_data: bool = False,
    ) -> Any:
        """``op`` on every leaf with the matching leaf of ``other``, or with ``other`` itself.

        A tensor lines up with the batch dimensions (as upstream): its shape broadcasts with the
        batch size, and each leaf sees it with trailing singleton dims. The result is locked
        when ``self`` is and ``keep_lock`` (upstream keeps the lock of most elementwise ops).
        ``batch_align=False`` combines a tensor with each leaf as torch would (upstream's ``&``).
        """
        if _is_collection(other):
            target, other = self._align_collection(other, inplace)
            _check_same_keys(target, other)
            if inplace:  # every leaf is checked before the first one changes
                target._apply_leaves(
                    _InplaceCheck(op), other, inplace=True, named=True, nested_keys=True
                )
            result = target._apply_leaves(
                op, other, inplace=inplace, non_tensor_fn=_on_data(op) if on_data else None
            )
        elif batch_align and isinstance(other, torch.Tensor) and other.ndim:
            target, aligned = self._align_tensor(other, inplace)
            if inplace:
                check = _InplaceCheck(op)
                target._apply_leaves(
                    lambda k, x: check(k, x, aligned(x)), inplace=True, named=True, nested_keys=True
                )
            result = target._apply_leaves(lambda x: op(x, aligned(x)), inplace=inplace)
            keep_lock = False  # (upstream's broadcasting path drops the lock)
        else:
            if inplace:
                check = _InplaceCheck(op)
                self._apply_leaves(
                    lambda k, x: check(k, x, other), inplace=True, named=True, nested_keys=True
                )
            result = self._apply_leaves(lambda x: op(x, other), inplace=inplace)
        if inplace or not keep_lock:
            return result
        return keep_lock_of(self, result)

    def _align_tensor(
        self, other: torch.Tensor, inplace: bool
    ) -> tuple[Any, Callable[[torch.Tensor], torch.Tensor]]:
        """The tensordict to combine (expanded if ``other`` broadcasts it), ``other`` per leaf."""
        target = self._expanded_for(other.shape, inplace)
        return target, batch_aligned(other, len(target.batch_size))

    def _align_collection(self, other: Any, inplace: bool) -> tuple[Any, Any]:
        """Both operands with one batch size, when ``other`` has batch dims and they differ."""
        other_bs = other.batch_size
        if not other_bs or other_bs == self.batch_size:
            return self, other
        target = self._expanded_for(other_bs, inplace)
        if other_bs != target.batch_size:
            other = other.expand(target.batch_size)
        return target, other

    def _expanded_for(self, other_shape: Sequence[int], inplace: bool) -> Any:
        bs = self.batch_size
        shape = broadcast_batch(bs, other_shape)
        if shape == bs:
            return self
        if inplace:
            raise ShapeMismatchError(
                f"an in-place operation with an operand of shape {list(other_shape)} would expand "
                f"batch_size={list(bs)} to {list(shape)}, which cannot be written in place. Use "
                "the out-of-place operator, or an operand that broadcasts to the batch size."
            )
        return self.expand(shape)  # type: ignore[attr-defined]

    def __add__(self, other: Any) -> Any:
        return self._binary(other, operator.add)

    def __radd__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y + x)

    def __sub__(self, other: Any) -> Any:
        return self._binary(other, operator.sub)

    def __rsub__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y - x)

    def __mul__(self, other: Any) -> Any:
        return self._binary(other, operator.mul)

    def __rmul__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y * x)

    def __truediv__(self, other: Any) -> Any:
        return self._binary(other, operator.truediv)

    def __rtruediv__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y / x)

    def __floordiv__(self, other: Any) -> Any:
        return self._binary(other, operator.floordiv)

    def __mod__(self, other: Any) -> Any:
        return self._binary(other, operator.mod)

    def __pow__(self, other: Any) -> Any:
        return self._binary(other, operator.pow)

    def __rpow__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y**x)

    def __matmul__(self, other: Any) -> Any:
        return self._binary(other, operator.matmul)

    def __and__(self, other: Any) -> Any:
        return self._binary(other, operator.and_, batch_align=False)

    def __or__(self, other: Any) -> Any:
        return self._binary(other, operator.or_, keep_lock=False, on_data=True)

    def __xor__(self, other: Any) -> Any:
        return self._binary(other, operator.xor, keep_lock=False, on_data=True)

    def __iadd__(self: T, other: Any) -> T:
        return self._binary(other, operator.iadd, inplace=True)  # type: ignore[no-any-return]

    def __isub__(self: T, other: Any) -> T:
        return self._binary(other, operator.isub, inplace=True)  # type: ignore[no-any-return]

    def __imul__(self: T, other: Any) -> T:
        return self._binary(other, operator.imul, inplace=True)  # type: ignore[no-any-return]

    def __itruediv__(self: T, other: Any) -> T:
        return self._binary(other, operator.itruediv, inplace=True)  # type: ignore[no-any-return]

    def __ipow__(self: T, other: Any) -> T:
        return self._binary(other, operator.ipow, inplace=True)  # type: ignore[no-any-return]

    def add(self, other: Any, *, alpha: float | None = None) -> Any:
        return self + (other * alpha if alpha is not None else other)

    def sub(self, other: Any, *, alpha: float | None = None) -> Any:
        return self - (other * alpha if alpha is not None else other)

    def mul(self, other: Any) -> Any:
        return self * other

    def div(self, other: Any) -> Any:
        return self / other

    def pow(self, other: Any) -> Any:
        return self**other

    def add_(self: T, other: Any, *, alpha: float | None = None) -> T:
        return self._binary(other * alpha if alpha is not None else other, operator.iadd, True)  # type: ignore[no-any-return]

    def sub_(self: T, other: Any, *, alpha: float | None = None) -> T:
        return self._binary(other * alpha if alpha is not None else other, operator.isub, True)  # type: ignore[no-any-return]

    def mul_(self: T, other: Any) -> T:
        return self._binary(other, operator.imul, True)  # type: ignore[no-any-return]

    def div_(self: T, other: Any) -> T:
        return self._binary(other, operator.itruediv, True)  # type: ignore[no-any-return]

    def pow_(self: T, other: Any) -> T:
        return self._binary(other, operator.ipow, True)  # type: ignore[no-any-return]

    def lerp(self, end: Any, weight: Any) -> Any:
        return self + (end - self) * weight

    # ================================================================== comparisons
    def _compare(self, other: Any, op: Callable[[Any, Any], Any], negate: bool = False) -> Any:
        def non_tensor(value: Any, *theirs: Any) -> Any:
            other_v = theirs[0] if theirs else other
            if op not in (operator.eq, operator.ne):
                return None
            if isinstance(other_v, (NonTensorData, NonTensorStack)):
                flags = value == other_v
            else:  # compared with a number: nothing to compare (upstream gives an empty node)
                return self._new_dense({}, value.batch_size)
            return ~flags if op is operator.ne else flags

        if _is_collection(other):
            target, other = self._align_collection(other, False)
            _check_same_keys(target, other)
            return target._apply_leaves(op, other, non_tensor_fn=non_tensor)
        if isinstance(other, torch.Tensor) and other.ndim:
            target, aligned = self._align_tensor(other, False)
            return target._apply_leaves(lambda x: op(x, aligned(x)), non_tensor_fn=non_tensor)
        return self._apply_leaves(lambda x: op(x, other), non_tensor_fn=non_tensor)

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        if other is None:
            return False
        return self._compare(other, operator.eq)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        if other is None:
            return True
        return self._compare(other, operator.ne)

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, operator.lt)

    def __le__(self, other: Any) -> Any:
        return self._compare(other, operator.le)

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, operator.gt)

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, operator.ge)

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

    def clamp(self, min: Any = None, max: Any = None) -> Any:
        return self._apply_leaves(lambda x: torch.clamp(x, min, max))

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

    def clamp_(self: T, min: Any = None, max: Any = None) -> T:
        return self._apply_leaves(lambda x: x.clamp_(min, max), inplace=True)  # type: ignore[no-any-return]

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


def _is_empty(td: Any) -> bool:
    return not any(True for _ in td.keys(include_nested=True, leaves_only=True))


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
