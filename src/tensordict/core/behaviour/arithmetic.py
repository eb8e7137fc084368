"""Arithmetic and comparisons of tensordicts: ``+ - * / ** % & | ^``, their in-place and method
forms, ``== != < <= > >=``, ``clamp``.

The other operand is a tensordict (matched key by key; batch sizes broadcast), a tensor (lined
up with the batch dimensions, as upstream: its shape broadcasts with the batch size, and each
leaf sees it with trailing singleton dims) or a number. In-place forms check every leaf before
the first one changes. Written on the tree walk of ``ops``.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from tensordict.core.behaviour.ops import OpsMixin, _is_collection, keep_lock_of
from tensordict.core.behaviour.shape import broadcasts_to
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import DTypeCastError, KeyMismatchError, ShapeMismatchError

__all__ = ["ArithmeticMixin", "batch_aligned", "broadcast_batch"]

T = TypeVar("T", bound="ArithmeticMixin")


def _comparable(other: object) -> bool:
    """What ``==`` compares entry by entry: tensordicts, dicts, tensors, arrays and numbers."""
    return isinstance(
        other, (TensorCollection, Mapping, torch.Tensor, np.ndarray, np.generic, numbers.Number)
    ) or bool(getattr(type(other), "_is_tensorclass", False))


def _leaf_keys(td: Any) -> set[Any]:
    return set(td.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor))


def _check_same_keys(td: Any, other: Any) -> set[Any]:
    """Raise unless both have the same leaf keys; return ``td``'s keys that name a field the
    other side's tensorclass holds as None (not compared, as upstream)."""
    mine, theirs = _leaf_keys(td), _leaf_keys(other)
    if mine == theirs:
        return set()
    # a key naming a non-tensor field of a tensorclass on the other side (``y=None``, which the
    # tensorclass holds outside its tensors) is not a missing key, as upstream
    fields_of_other = {k for k in mine - theirs if _non_tensor_field(other, k)}
    only_mine = mine - theirs - fields_of_other
    only_theirs = {k for k in theirs - mine if not _non_tensor_field(td, k)}
    if not only_mine and not only_theirs:
        return fields_of_other
    message = "keys in tensordicts mismatch."
    if only_mine:
        message += f" The first TD has keys {_key_set(only_mine)} that the second does not have."
    if only_theirs:
        message += f" The second TD has keys {_key_set(only_theirs)} that the first does not have."
    raise KeyMismatchError(
        f"{message} Both operands need the same keys: align them first with td.select(...) or "
        "td.exclude(...)."
    )


def _non_tensor_field(td: Any, key: Any) -> bool:
    """Whether ``key`` names a non-tensor field of a tensorclass in ``td``."""
    path = key if isinstance(key, tuple) else (key,)
    holder = td.get(path[:-1], None) if len(path) > 1 else td
    fields = getattr(holder, "_non_tensordict", None)
    return getattr(type(holder), "_is_tensorclass", False) and path[-1] in (fields or {})


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


def _key_str(path: tuple[str, ...]) -> str:
    return repr(path[0]) if len(path) == 1 else repr(path)


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
        if torch.compiler.is_compiling():
            # torch.result_type is not traced; a failing cast raises while the graph is traced,
            # before it writes anything
            return x
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


class ArithmeticMixin(OpsMixin):
    """Binary operators, comparisons and clamps: entry by entry, tensors lined up with the batch
    dimensions (see :func:`broadcast_batch`)."""

    __slots__ = ()

    # ================================================================== binary operators
    def _binary(
        self,
        other: Any,
        op: Callable[[Any, Any], Any],
        inplace: bool = False,
        keep_lock: bool = True,
        batch_align: bool = True,
        default: Any = None,
        on_data: bool = False,
    ) -> Any:
        """``op`` on every leaf with the matching leaf of ``other``, or with ``other`` itself.

        A tensor lines up with the batch dimensions (as upstream): its shape broadcasts with the
        batch size, and each leaf sees it with trailing singleton dims. The result is locked
        when ``self`` is and ``keep_lock`` (upstream keeps the lock of most elementwise ops).
        ``batch_align=False`` combines a tensor with each leaf as torch would (upstream's ``&``).
        ``default`` stands in for the entries one tensordict lacks (``"intersection"``: only the
        common entries are combined).
        """
        if _is_collection(other):
            target, other = self._align_collection(other, inplace)
            if default is not None:
                target, other = pad_missing(target, other, default, "combine")
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

    def __rand__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y & x, batch_align=False)

    def __ror__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y | x, keep_lock=False)

    def __rxor__(self, other: Any) -> Any:
        return self._binary(other, lambda x, y: y ^ x, keep_lock=False)

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

    def add(self, other: Any, *, alpha: float | None = None, default: Any = None) -> Any:
        other = other * alpha if alpha is not None else other
        return self._binary(other, operator.add, default=default)

    def sub(self, other: Any, *, alpha: float | None = None, default: Any = None) -> Any:
        other = other * alpha if alpha is not None else other
        return self._binary(other, operator.sub, default=default)

    def mul(self, other: Any, *, default: Any = None) -> Any:
        return self._binary(other, operator.mul, default=default)

    def div(self, other: Any, *, default: Any = None) -> Any:
        return self._binary(other, operator.truediv, default=default)

    def pow(self, other: Any, *, default: Any = None) -> Any:
        return self._binary(other, operator.pow, default=default)

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

    def lerp_(self: T, end: Any, weight: Any) -> T:
        """``self += weight * (end - self)`` on every tensor, in place (target-network updates).
        ``end`` and ``weight`` may be tensordicts (read leaf by leaf), tensors or numbers."""
        end_td, weight_td = _is_collection(end), _is_collection(weight)
        others = [o for o, is_td in ((end, end_td), (weight, weight_td)) if is_td]

        def leaf(x: torch.Tensor, *theirs: Any) -> torch.Tensor:
            e = theirs[0] if end_td else torch.as_tensor(end).to(x)
            w = theirs[-1] if weight_td else weight
            return x.lerp_(e, w)

        self._apply_leaves(leaf, *others, inplace=True)
        return self

    # ================================================================== comparisons
    def _compare(self, other: Any, op: Callable[[Any, Any], Any], negate: bool = False) -> Any:
        if isinstance(other, Mapping) and not _is_collection(other):  # a dict: as a tensordict
            other = self._new_dense({}, self.batch_size).update(other)

        def non_tensor(value: Any, *theirs: Any) -> Any:
            # as upstream: against a tensor or a number, == / != give an empty tensordict (which
            # all() / any() skip) and the other comparisons carry the data over
            if not theirs:
                equality = op in (operator.eq, operator.ne)
                return self._new_dense({}, value.batch_size) if equality else value
            if op not in (operator.eq, operator.ne):
                return None
            other_v = theirs[0]
            if isinstance(other_v, (NonTensorData, NonTensorStack)):
                flags = value == other_v
            else:  # compared with a number: nothing to compare (upstream gives an empty node)
                return self._new_dense({}, value.batch_size)
            return ~flags if op is operator.ne else flags

        if _is_collection(other):
            target, other = self._align_collection(other, False)
            skipped = _check_same_keys(target, other)
            if skipped:
                target = target.exclude(*skipped)
            return target._apply_leaves(op, other, non_tensor_fn=non_tensor)
        if isinstance(other, torch.Tensor) and other.ndim:
            target, aligned = self._align_tensor(other, False)
            return target._apply_leaves(lambda x: op(x, aligned(x)), non_tensor_fn=non_tensor)
        return self._apply_leaves(lambda x: op(x, other), non_tensor_fn=non_tensor)

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        """Entry-wise ``==``; something a tensordict cannot be compared with (``None``, a str, a
        list...) gives ``False``, as upstream."""
        if not _comparable(other):
            return False
        return self._compare(other, operator.eq)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        if not _comparable(other):
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

    def clamp(self, min: Any = None, max: Any = None, *, out: Any = None) -> Any:
        """``torch.clamp`` of every entry; tensor and tensordict bounds line up as for ``+``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(4.0).reshape(2, 2)}, [2])
            >>> td.clamp(torch.tensor([1.0, 2.0]), 2.5)["a"]
            tensor([[1.0000, 1.0000],
                    [2.0000, 2.5000]])
        """
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given (not None).")
        result: Any = self
        if min is not None:
            result = result._binary(min, torch.clamp_min, keep_lock=False)
        if max is not None:
            result = result._binary(max, torch.clamp_max, keep_lock=False)
        if result.is_locked:  # (clamp gives an unlocked result, as upstream)
            result._set_locked(False)
        return out.update(result, inplace=True) if out is not None else result

    def clamp_min(self, other: Any, *, default: Any = None) -> Any:
        """``torch.clamp_min`` of every entry (tensor bounds line up as for ``+``)."""
        return self._binary(other, _as_tensor_op(torch.clamp_min), default=default)

    def clamp_max(self, other: Any, *, default: Any = None) -> Any:
        """``torch.clamp_max`` of every entry (tensor bounds line up as for ``+``)."""
        return self._binary(other, _as_tensor_op(torch.clamp_max), default=default)

    def maximum(self, other: Any, *, default: Any = None) -> Any:
        """``torch.maximum`` of every entry with ``other``'s (tensors line up as for ``+``)."""
        return self._binary(other, _as_tensor_op(torch.maximum), default=default)

    def minimum(self, other: Any, *, default: Any = None) -> Any:
        """``torch.minimum`` of every entry with ``other``'s (tensors line up as for ``+``)."""
        return self._binary(other, _as_tensor_op(torch.minimum), default=default)

    def clamp_(self: T, min: Any = None, max: Any = None) -> T:
        """:meth:`clamp` in place (every entry checked before the first one changes)."""
        if min is not None:
            self._binary(min, _clamp_min_, inplace=True)
        if max is not None:
            self._binary(max, _clamp_max_, inplace=True)
        return self


def number_as_tensor(y: Any, x: torch.Tensor) -> torch.Tensor:
    """A number ``y`` as a tensor of the dtype ``x`` and ``y`` promote to (``x``'s where it
    can hold ``y``), on ``x``'s device; under ``torch.compile`` too, where ``torch.result_type``
    cannot be traced (the same rule, written out for python numbers)."""
    if not torch.compiler.is_compiling() or isinstance(y, complex):
        return torch.as_tensor(y, dtype=torch.result_type(x, y), device=x.device)
    exact = x.dtype.is_floating_point or x.dtype.is_complex
    if isinstance(y, bool):
        dtype = x.dtype
    elif isinstance(y, int):
        dtype = torch.int64 if x.dtype is torch.bool else x.dtype
    else:
        dtype = x.dtype if exact else torch.get_default_dtype()
    return torch.as_tensor(y, dtype=dtype, device=x.device)


def _as_tensor_op(fn: Callable[..., torch.Tensor]) -> Callable[[Any, Any], torch.Tensor]:
    """``fn(x, y)`` with a number ``y`` made a tensor of ``x``'s dtype where it can be."""

    def op(x: torch.Tensor, y: Any) -> torch.Tensor:
        if not isinstance(y, torch.Tensor):
            y = number_as_tensor(y, x)
        return fn(x, y)

    op.__name__ = fn.__name__
    return op


def _clamp_min_(x: torch.Tensor, y: Any) -> torch.Tensor:
    return x.clamp_(min=y)


def _clamp_max_(x: torch.Tensor, y: Any) -> torch.Tensor:
    return x.clamp_(max=y)


def _same(value: Any, *others: Any) -> Any:
    return value


def pad_missing(td: Any, other: Any, pad: Any, what: str) -> tuple[Any, Any]:
    """``td`` and ``other`` with the same tensor entries: those one side lacks are filled with
    ``pad`` (shaped like the other side's entry), or, with ``"intersection"``, dropped."""
    mine = {
        k: v
        for k, v in td.items(True, True, is_leaf=leaf_or_non_tensor)
        if isinstance(v, torch.Tensor)
    }
    theirs = {
        k: v
        for k, v in other.items(True, True, is_leaf=leaf_or_non_tensor)
        if isinstance(v, torch.Tensor)
    }
    if mine.keys() == theirs.keys():
        return td, other
    if pad is None:
        missing = sorted(map(str, mine.keys() ^ theirs.keys()))
        raise KeyMismatchError(
            f"{what}: the entries {missing} were not found and no pad value provided: one operand "
            "lacks them. Pass pad=<value> to stand in for them, or select matching keys first."
        )
    if isinstance(pad, str) and pad == "intersection":
        common = [k for k in mine if k in theirs]
        return td.select(*common), other.select(*common)
    sides = []
    for own, more in ((td, theirs.keys() - mine.keys()), (other, mine.keys() - theirs.keys())):
        copy = own._apply_leaves(  # (non-tensor entries as they are: stacks of objects too)
            lambda x: x, batch_size=own.batch_size, nested_extra=True, non_tensor_fn=_same
        )
        for key in more:
            source = theirs[key] if own is td else mine[key]
            copy.set(
                key,
                torch.full_like(source, pad)
                if not isinstance(pad, torch.Tensor)
                else pad.expand_as(source).clone(),
            )
        sides.append(copy)
    return sides[0], sides[1]
