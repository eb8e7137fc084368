"""Tensor-like methods of a tensordict that upstream code uses: masks, ``where``, scans, autograd
helpers, ``new_*`` constructors and introspection (``dtype``, ``bytes``, ...).

Each one is a thin layer over a primitive that already exists (the tree walk of ``ops``,
boolean-mask indexing and its validate-then-write assignment, ``empty``), so lazy stacks and
tensorclasses get them too.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from tensordict.core import factory
from tensordict.core.behaviour.arithmetic import _same, number_as_tensor, pad_missing
from tensordict.core.behaviour.autograd import backward, grad_of
from tensordict.core.behaviour.combine import split_operand
from tensordict.core.behaviour.ops import _is_collection, keep_lock_of
from tensordict.core.behaviour.shape import normalize_dim
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorStack, is_non_tensor
from tensordict.errors import BatchSizeError, DTypeCastError

__all__ = ["TensorMethodsMixin"]

T = TypeVar("T", bound="TensorMethodsMixin")


def _right_expand(t: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    """``t`` (shaped like leading dims of ``leaf``) viewed with trailing singleton dims."""
    return t.reshape(tuple(t.shape) + (1,) * (leaf.ndim - t.ndim))


def _unary(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return keep_lock_of(self, self._apply_leaves(lambda x: fn(x, *args, **kwargs)))

    method.__name__ = fn.__name__
    method.__doc__ = f"``torch.{fn.__name__}`` of every entry."
    return method


def _unary_(fn: Callable[..., torch.Tensor], fn_: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        # every entry is checked before the first changes: an integer entry cannot hold sin(x)
        for t in self._tensor_leaves():
            produced = fn(torch.empty(0, dtype=t.dtype), *args, **kwargs).dtype
            if not torch.can_cast(produced, t.dtype):
                raise DTypeCastError(
                    f"{fn_}(): an entry of dtype {t.dtype} cannot hold its result ({produced}). "
                    f"Nothing was changed; use {fn.__name__}() (out of place) or cast first."
                )
        return self._apply_leaves(lambda x: getattr(x, fn_)(*args, **kwargs), inplace=True)

    method.__name__ = fn_
    method.__doc__ = f"``{fn.__name__}`` of every entry, in place."
    return method


def _binary(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    def method(self: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        def op(x: torch.Tensor, y: Any) -> torch.Tensor:
            if not isinstance(y, torch.Tensor):  # a number takes the entry's dtype if it can
                y = number_as_tensor(y, x)
            return fn(x, y, *args, **kwargs)

        return self._binary(other, op)  # (tensordicts and tensorclasses alike)

    method.__name__ = fn.__name__
    method.__doc__ = (
        f"``torch.{fn.__name__}`` of every entry with the matching entry of ``other`` (a "
        "tensordict with the same keys), or with ``other`` itself (a tensor or a number)."
    )
    return method


def _memory_parts(t: torch.Tensor) -> list[torch.Tensor]:
    """The tensors holding a leaf's memory: a jagged tensor's components, and its gradient."""
    if t.is_nested and t.layout == torch.jagged:
        jagged: Any = t  # (a NestedTensor: offsets() and lengths() are not on torch.Tensor)
        parts = [jagged.values(), jagged.offsets()]
        lengths = jagged.lengths()
        if lengths is not None:
            parts.append(lengths)
    else:
        parts = [t]
    if t.grad is not None:
        parts.append(t.grad)
    return parts


def _memory_key(t: torch.Tensor, nbytes: int) -> tuple[Any, ...]:
    """Equal for two tensors viewing the same memory (identity where there is no memory)."""
    if t.device.type == "meta" or nbytes == 0:
        return ("id", id(t))
    return (t.device, t.data_ptr(), nbytes)


def _batch_shape_of(other: Any) -> tuple[int, ...]:
    if getattr(type(other), "_is_tensorclass", False) or isinstance(other, TensorCollection):
        return tuple(other.batch_size)
    return tuple(other.shape)


def _size_arg(size: tuple[Any, ...]) -> torch.Size:
    if len(size) == 1 and not isinstance(size[0], int):
        return torch.Size(size[0])
    return torch.Size(size)


def _add_missing_non_tensor(result: Any, other: Any, cond: torch.Tensor) -> None:
    """The non-tensor entries of ``where(cond, self, other)``: those only ``other`` holds come
    along; those both sides hold are picked element by element (a :class:`NonTensorStack`),
    as upstream."""
    other_td = other._tensordict if getattr(type(other), "_is_tensorclass", False) else other
    for key, value in other_td.items(True, True, is_leaf=leaf_or_non_tensor):
        if not is_non_tensor(value):
            continue
        mine = result.get(key, None)
        if mine is None:
            result.set(key, value)
        elif is_non_tensor(mine):
            bs = mine.batch_size
            mask = cond.reshape(*cond.shape, *[1] * (len(bs) - cond.ndim)).expand(bs)
            result.set(key, mine.maybe_to_stack().where(mask, value))


def _where_member(member: Any, cond: torch.Tensor, other: Any, out: Any, pad: Any) -> Any:
    """One member of a lazy stack's ``where``: kept whole where its condition holds everywhere,
    replaced whole by ``other``'s member where it holds nowhere (their entries may differ in
    shape, as ragged members do), picked element by element otherwise (as upstream)."""
    if _is_collection(other) and not cond.any():
        return other.clone(False) if out is None else out.update(other)
    if cond.all():
        return member.clone(False) if out is None or out is member else out.update(member)
    return member.where(cond, other, out=out, pad=pad)


class TensorMethodsMixin(TensorCollection):
    """Masks, ``where``, scans, autograd helpers, ``new_*`` and introspection."""

    __slots__ = ()

    def _leaves(self) -> list[torch.Tensor]:
        td: Any = self
        return td._tensor_leaves()  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ batch-shaped masks
    def _check_batch_mask(self, mask: torch.Tensor, what: str) -> torch.Tensor:
        mask = torch.as_tensor(mask)
        bs = tuple(self.batch_size)
        if mask.dtype is not torch.bool or tuple(mask.shape) != bs[: mask.ndim]:
            raise BatchSizeError(
                f"{what}: the mask must be a bool tensor shaped like the leading batch dims "
                f"{list(bs)}, got {mask.dtype} of shape {list(mask.shape)}."
            )
        return mask

    def masked_fill_(self: T, mask: torch.Tensor, value: Any) -> T:
        """Write ``value`` into every entry where ``mask`` (shaped like the batch) is True.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 2)}, [3])
            >>> td.masked_fill_(torch.tensor([True, False, True]), 1.0)["a"][:, 0]
            tensor([1., 0., 1.])
        """
        mask = self._check_batch_mask(mask, "masked_fill_")
        td: Any = self
        if not mask.ndim:  # a 0-d mask: everything or nothing
            if bool(mask):
                torch.as_tensor(value)
                td.apply_(lambda x: x.fill_(value))
            return self
        td[mask] = value  # validate-then-write assignment: a failure changes nothing
        return self

    def masked_fill(self: T, mask: torch.Tensor, value: Any) -> T:
        """Like :meth:`masked_fill_`, on a copy."""
        td: Any = self
        return td.clone().masked_fill_(mask, value)  # type: ignore[no-any-return]

    def masked_select(self: T, mask: torch.Tensor) -> T:
        """The elements where ``mask`` is True, along a new first batch dim (as ``td[mask]``)."""
        td: Any = self
        return td[self._check_batch_mask(mask, "masked_select")]  # type: ignore[no-any-return]

    def where(
        self: T,
        condition: torch.Tensor,
        other: Any,
        *,
        out: Any = None,
        pad: Any = None,
        update_batch_size: bool = False,
    ) -> T:
        """``self`` where ``condition`` (shaped like leading batch dims) is True, else ``other``.

        ``other`` is a tensordict with the same keys, a tensor or a number. With ``pad``, an
        entry only one side has is met by ``pad`` on the other side. ``out`` receives the
        result: its entries are replaced by the result's (tensors it held are left as they
        were, as upstream), its missing entries are created.

        Raises:
            KeyMismatchError: the keys differ and no ``pad`` is given (a ``KeyError``).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3)}, [3])
            >>> td.where(torch.tensor([True, False, True]), 5.0)["a"]
            tensor([0., 5., 0.])
            >>> td.where(torch.tensor([True, False, True]), td.empty(), pad=1)["a"]
            tensor([0., 1., 0.])
        """
        base: Any = self
        cond = torch.as_tensor(condition, dtype=torch.bool)
        if getattr(self, "tensordicts", None) and cond.ndim > getattr(self, "stack_dim", cond.ndim):
            # a lazy stack answers member by member (its members may hold entries of different
            # shapes, which have no stacked value; upstream picks member by member too)
            return self._where_members(cond, other, out, pad)
        if _is_collection(other):
            base, other = pad_missing(self, other, pad, "where")
        if tuple(cond.shape) != tuple(base.batch_size)[: cond.ndim]:
            raise BatchSizeError(
                f"where: condition of shape {list(cond.shape)} must match the leading batch dims "
                f"{list(base.batch_size)}."
            )

        def pick(x: torch.Tensor, *y: Any) -> torch.Tensor:
            return torch.where(_right_expand(cond, x), x, y[0] if y else other)

        # (batch_size: the condition spans the whole batch, so a lazy stack goes dense first)
        others = (other,) if _is_collection(other) else ()
        result = base._apply_leaves(
            pick,
            *others,
            batch_size=base.batch_size,
            names=base._names_or_none(),
            nested_extra=True,
            non_tensor_fn=_same,  # (stacks of objects kept: picked below)
            default=None,  # (a non-tensor entry may be on one side only)
        )
        if not others:  # (as upstream: a tensordict `other` gives an unlocked result)
            result = keep_lock_of(self, result)
        else:  # non-tensor entries only ``other`` holds come along, as upstream
            _add_missing_non_tensor(result, other, cond)
        if out is not None:  # (as upstream: out's leaves are replaced, not written into)
            return out.update(result)  # type: ignore[no-any-return]
        return result  # type: ignore[no-any-return]

    def _where_members(self, cond: torch.Tensor, other: Any, out: Any, pad: Any) -> Any:
        td: Any = self
        sd, n = td.stack_dim, len(td.tensordicts)
        parts = zip(td.tensordicts, cond.unbind(sd), split_operand(other, sd, n))
        lazy_out = (
            getattr(out, "stack_dim", None) == sd and len(getattr(out, "tensordicts", ())) == n
        )
        outs = out.tensordicts if lazy_out else [None] * n
        members = [_where_member(m, c, o, mo, pad) for (m, c, o), mo in zip(parts, outs)]
        if lazy_out:
            return out
        result = factory.LazyStackedTensorDict(*members, stack_dim=sd)
        return result if out is None else out.update(result)

    # ------------------------------------------------------------------ along a batch dim
    def _batch_dim(self, dim: int, what: str) -> int:
        return normalize_dim(dim, len(self.batch_size), self.batch_size, what)

    def _along_batch(self: T, fn: Callable[[torch.Tensor], torch.Tensor]) -> T:
        """``fn`` (which keeps the shape) of every leaf; a lazy stack gives a dense result."""
        return self._apply_leaves(  # type: ignore[no-any-return]
            fn, batch_size=self.batch_size, names=self._names_or_none(), nested_extra=True
        )

    def cumsum(self: T, dim: int, dtype: torch.dtype | None = None) -> T:
        """Cumulative sum of every entry along batch dimension ``dim``."""
        d = self._batch_dim(dim, "cumsum")
        fn = lambda x: torch.cumsum(x, d, dtype=dtype)  # noqa: E731
        return self._along_batch(fn)

    def softmax(self: T, dim: int, dtype: torch.dtype | None = None) -> T:
        """Softmax of every entry along batch dimension ``dim``."""
        d = self._batch_dim(dim, "softmax")
        fn = lambda x: torch.softmax(x, d, dtype=dtype)  # noqa: E731
        return self._along_batch(fn)

    # ------------------------------------------------------------------ element-wise maths
    log1p = _unary(torch.log1p)
    expm1 = _unary(torch.expm1)
    sin = _unary(torch.sin)
    cos = _unary(torch.cos)
    tanh = _unary(torch.tanh)
    floor = _unary(torch.floor)
    ceil = _unary(torch.ceil)
    round = _unary(torch.round)
    trunc = _unary(torch.trunc)
    frac = _unary(torch.frac)
    nan_to_num = _unary(torch.nan_to_num)
    log_ = _unary_(torch.log, "log_")
    log1p_ = _unary_(torch.log1p, "log1p_")
    expm1_ = _unary_(torch.expm1, "expm1_")
    sin_ = _unary_(torch.sin, "sin_")
    cos_ = _unary_(torch.cos, "cos_")
    tanh_ = _unary_(torch.tanh, "tanh_")
    floor_ = _unary_(torch.floor, "floor_")
    ceil_ = _unary_(torch.ceil, "ceil_")
    round_ = _unary_(torch.round, "round_")
    trunc_ = _unary_(torch.trunc, "trunc_")
    frac_ = _unary_(torch.frac, "frac_")
    sigmoid_ = _unary_(torch.sigmoid, "sigmoid_")
    reciprocal_ = _unary_(torch.reciprocal, "reciprocal_")
    sign_ = _unary_(torch.sign, "sign_")
    nan_to_num_ = _unary_(torch.nan_to_num, "nan_to_num_")
    acos = _unary(torch.acos)
    asin = _unary(torch.asin)
    atan = _unary(torch.atan)
    cosh = _unary(torch.cosh)
    sinh = _unary(torch.sinh)
    tan = _unary(torch.tan)
    erf = _unary(torch.erf)
    erfc = _unary(torch.erfc)
    lgamma = _unary(torch.lgamma)
    log2 = _unary(torch.log2)
    log10 = _unary(torch.log10)
    isneginf = _unary(torch.isneginf)
    isposinf = _unary(torch.isposinf)
    isreal = _unary(torch.isreal)
    acos_ = _unary_(torch.acos, "acos_")
    asin_ = _unary_(torch.asin, "asin_")
    atan_ = _unary_(torch.atan, "atan_")
    cosh_ = _unary_(torch.cosh, "cosh_")
    sinh_ = _unary_(torch.sinh, "sinh_")
    tan_ = _unary_(torch.tan, "tan_")
    erf_ = _unary_(torch.erf, "erf_")
    erfc_ = _unary_(torch.erfc, "erfc_")
    lgamma_ = _unary_(torch.lgamma, "lgamma_")
    log2_ = _unary_(torch.log2, "log2_")
    log10_ = _unary_(torch.log10, "log10_")
    bitwise_and = _binary(torch.bitwise_and)
    mod = _binary(torch.remainder)

    def rsub(self: T, other: Any, alpha: float = 1) -> T:
        """``other - alpha * self`` for every entry (as ``torch.rsub``)."""
        return self._binary(other, lambda x, y: torch.rsub(x, y, alpha=alpha))  # type: ignore[attr-defined, no-any-return]

    def addcdiv(self: T, other1: Any, other2: Any, *, value: float = 1) -> T:
        """``self + value * other1 / other2`` entry by entry (as ``torch.addcdiv``)."""
        td: Any = self
        return td + (other1 / other2) * value  # type: ignore[no-any-return]

    def addcmul(self: T, other1: Any, other2: Any, *, value: float = 1) -> T:
        """``self + value * other1 * other2`` entry by entry (as ``torch.addcmul``)."""
        td: Any = self
        return td + (other1 * other2) * value  # type: ignore[no-any-return]

    def addcdiv_(self: T, other1: Any, other2: Any, *, value: float = 1) -> T:
        """In-place :meth:`addcdiv`."""
        td: Any = self
        return td.add_((other1 / other2) * value)  # type: ignore[no-any-return]

    def addcmul_(self: T, other1: Any, other2: Any, *, value: float = 1) -> T:
        """In-place :meth:`addcmul`."""
        td: Any = self
        return td.add_((other1 * other2) * value)  # type: ignore[no-any-return]

    def lerp_(self: T, end: Any, weight: Any) -> T:
        """``self += weight * (end - self)`` for every entry, in place."""
        td: Any = self
        return td.add_((end - td) * weight)  # type: ignore[no-any-return]

    def maximum_(self: T, other: Any) -> T:
        """The element-wise maximum with ``other``, in place."""
        td: Any = self
        return td.update_(td.maximum(other))  # type: ignore[no-any-return]

    def minimum_(self: T, other: Any) -> T:
        """The element-wise minimum with ``other``, in place."""
        td: Any = self
        return td.update_(td.minimum(other))  # type: ignore[no-any-return]

    def clamp_max_(self: T, other: Any) -> T:
        """Clamp every entry to at most ``other``, in place."""
        td: Any = self
        return td.update_(td.clamp_max(other))  # type: ignore[no-any-return]

    def clamp_min_(self: T, other: Any) -> T:
        """Clamp every entry to at least ``other``, in place."""
        td: Any = self
        return td.update_(td.clamp_min(other))  # type: ignore[no-any-return]

    def as_tensor(self: T) -> T:
        """Every entry as a plain ``torch.Tensor`` (``Tensor.as_subclass``: a memory-mapped or
        other tensor subclass becomes a tensor over the same memory)."""
        return self._apply_leaves(  # type: ignore[no-any-return]
            lambda x: x if type(x) is torch.Tensor else x.as_subclass(torch.Tensor)
        )

    def data_ptr(self, *, storage: bool = False) -> Any:
        """A tensordict of the leaves' data pointers (``storage=True``: of their storages)."""
        td: Any = self
        return td._apply_leaves(
            lambda x: torch.tensor(x.untyped_storage().data_ptr() if storage else x.data_ptr()),
            batch_size=torch.Size([]),
            names=None,
        )

    @property
    def is_cpu(self) -> bool:
        """Whether the tensordict's device is the cpu (``False`` without a device, as upstream)."""
        device = self.device
        return device is not None and device.type == "cpu"

    @property
    def is_cuda(self) -> bool:
        """Whether the tensordict's device is a CUDA device."""
        device = self.device
        return device is not None and device.type == "cuda"

    @property
    def is_meta(self) -> bool:
        """Whether the tensordict's device is the meta device."""
        device = self.device
        return device is not None and device.type == "meta"

    logical_and = _binary(torch.logical_and)
    logical_or = _binary(torch.logical_or)
    logical_xor = _binary(torch.logical_xor)
    isclose = _binary(torch.isclose)

    def allclose(
        self, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
    ) -> bool:
        """Whether every entry is close to the matching entry of ``other`` (``torch.allclose``)."""
        td: Any = self
        close = td.isclose(other, rtol=rtol, atol=atol, equal_nan=equal_nan)
        return all(bool(t.all()) for t in close._tensor_leaves())

    def is_floating_point(self) -> bool:
        """Whether every entry is a floating point tensor."""
        return all(t.is_floating_point() for t in self._leaves())

    def _arg_reduce(self, name: str, dim: int, keepdim: bool) -> Any:
        d = self._batch_dim(dim, name)
        bs = list(self.batch_size)
        bs[d : d + 1] = [1] if keepdim else []
        names = self._names_or_none()
        if names and not keepdim:
            names = [n for i, n in enumerate(names) if i != d]
        return self._apply_leaves(
            lambda x: getattr(x, name)(d, keepdim),
            batch_size=bs,
            names=names if names and any(n is not None for n in names) else None,
            nested_extra=True,
        )

    def argmax(self: T, dim: int, keepdim: bool = False) -> T:
        """The index of the maximum of every entry along batch dimension ``dim``."""
        return self._arg_reduce("argmax", dim, keepdim)  # type: ignore[no-any-return]

    def argmin(self: T, dim: int, keepdim: bool = False) -> T:
        """The index of the minimum of every entry along batch dimension ``dim``."""
        return self._arg_reduce("argmin", dim, keepdim)  # type: ignore[no-any-return]

    def pin_memory(self: T) -> T:
        """Every entry in pinned memory (needs an accelerator, as ``Tensor.pin_memory``)."""
        return self._apply_leaves(lambda x: x.pin_memory())  # type: ignore[no-any-return]

    def reshape_as(self: T, other: Any) -> T:
        """Reshaped to the batch size of ``other`` (a tensordict or a tensor)."""
        td: Any = self
        return td.reshape(*_batch_shape_of(other))  # type: ignore[no-any-return]

    def view_as(self: T, other: Any) -> T:
        """Viewed with the batch size of ``other`` (a tensordict or a tensor)."""
        td: Any = self
        return td.view(*_batch_shape_of(other))  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ autograd
    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        """Set ``requires_grad`` on every (floating point) entry, in place."""
        for t in self._leaves():
            if t.is_floating_point() or t.is_complex():  # (integer tensors cannot)
                t.requires_grad_(requires_grad)
        return self

    @property
    def requires_grad(self) -> bool:
        """Whether any entry requires grad."""
        return any(t.requires_grad for t in self._leaves())

    @property
    def data(self: T) -> T:
        """The entries' ``.data`` (detached, sharing storage)."""
        return keep_lock_of(self, self._apply_leaves(lambda x: x.data))  # type: ignore[no-any-return]

    @property
    def grad(self) -> Any:
        """The gradients of the entries that have one, as a tensordict (None if none has); a
        lazy stack gathers its members' (see :mod:`tensordict.core.behaviour.autograd`)."""
        out = grad_of(self)
        return None if out is None else keep_lock_of(self, out)  # (locked like this, as upstream)

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Back-propagate from every leaf that requires gradients, in one call (the others are
        ignored); each must be a scalar, or ``gradient`` gives its gradient under the same key.
        ``inputs`` (a tensordict or tensors) limits which graph leaves receive gradients.

        Raises:
            BackwardError: no leaf requires gradients, a leaf is not a scalar and ``gradient``
                is None, or a gradient has the wrong shape.
            TensorDictKeyError: ``gradient`` lacks a leaf's key.
            NotATensorDictError: ``gradient`` is not a tensordict.

        Examples:
            >>> from tensordict import TensorDict
            >>> x = torch.ones(3, requires_grad=True)
            >>> TensorDict(a=x.sum(), b=(2 * x).sum(), c=torch.zeros(2)).backward()
            >>> x.grad
            tensor([3., 3., 3.])
        """
        backward(self, gradient, retain_graph, create_graph, inputs)

    def zero_grad(self: T, set_to_none: bool = True) -> T:
        """Reset the gradients of every entry (to None, or to zeros in place)."""
        for t in self._leaves():
            if t.grad is None:
                continue
            if set_to_none:
                t.grad = None
            else:
                t.grad.zero_()
        return self

    # ------------------------------------------------------------------ new_* constructors
    def _new_filled(
        self,
        size: torch.Size,
        method: str,
        dtype: torch.dtype | None,
        device: Any,
        empty_lazy: bool,
        *args: Any,
    ) -> Any:
        """``x.<method>(size + trailing dims of x, *args)`` for every entry, same dtype and
        device unless given."""
        if empty_lazy:
            return factory.new_like_lazy(
                self, size, method, args, {"dtype": dtype, "device": device}
            )
        n = len(self.batch_size)

        def make(x: torch.Tensor) -> torch.Tensor:
            shape = (*size, *x.shape[n:])
            return getattr(x, method)(
                shape, *args, dtype=dtype or x.dtype, device=device or x.device
            )

        def make_non_tensor(value: Any) -> Any:
            # as upstream: one object is carried to the new size, a stack of objects becomes an
            # empty tensordict of that size (TorchRL's batched envs fill it by indexed writes)
            bs = torch.Size([*size, *value.batch_size[n:]])
            if isinstance(value, NonTensorStack):
                return factory.TensorDict({}, bs, device=device or value.device)
            return value._with_batch_size(bs)

        names = self._names_or_none()
        if names:  # (as upstream: the names of the last dims, aligned from the right)
            names = [*[None] * (len(size) - len(names)), *names[max(len(names) - len(size), 0) :]]
        # nested tensordicts keep their own batch dims, and are kept when left empty (upstream)
        return self._apply_leaves(
            make,
            batch_size=size,
            names=names,
            filter_empty=False,
            non_tensor_fn=make_non_tensor,
            nested_extra=True,
        )

    def new_tensor(
        self,
        data: Any,
        *,
        dtype: torch.dtype | None = None,
        device: Any = None,
        requires_grad: bool = False,
    ) -> Any:
        """Every entry's ``Tensor.new_tensor(data)``: with a tensor, each entry becomes a copy of
        it (batch size: its shape); with a tensordict, each entry a copy of the matching one.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, dtype=torch.int64)}, [3])
            >>> td.new_tensor(TensorDict({"a": torch.zeros(2)}, [2]))["a"]
            tensor([0, 0])
        """
        kw: dict[str, Any] = {"requires_grad": requires_grad}
        if device is not None:
            kw["device"] = device

        def make(x: torch.Tensor, y: Any) -> torch.Tensor:
            return x.new_tensor(y, dtype=dtype or x.dtype, **kw)

        if _is_collection(data):
            return self._apply_leaves(make, data, batch_size=data.batch_size, names=None)
        data = torch.as_tensor(data)
        out_device = device if device is not None else (self.device or data.device)
        return self._apply_leaves(
            lambda x: make(x, data), batch_size=data.shape, names=None, device=out_device
        )

    def new_zeros(
        self,
        *size: Any,
        dtype: torch.dtype | None = None,
        device: Any = None,
        empty_lazy: bool = False,
    ) -> Any:
        """A tensordict of batch size ``size``, same keys and trailing shapes, filled with 0.

        ``empty_lazy=True`` (as upstream) turns every lazy stack into a lazy stack of members
        with its first member's structure and no leaves, to be filled by indexed writes (see
        :mod:`tensordict.core.lazy.new_lazy`); ``new_ones``, ``new_empty`` and ``new_full`` take it
        too.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, 2)}, [3])
            >>> td.new_zeros(5)["a"].shape
            torch.Size([5, 2])
        """
        return self._new_filled(_size_arg(size), "new_zeros", dtype, device, empty_lazy)

    def new_ones(
        self,
        *size: Any,
        dtype: torch.dtype | None = None,
        device: Any = None,
        empty_lazy: bool = False,
    ) -> Any:
        return self._new_filled(_size_arg(size), "new_ones", dtype, device, empty_lazy)

    def new_empty(
        self,
        *size: Any,
        dtype: torch.dtype | None = None,
        device: Any = None,
        empty_lazy: bool = False,
    ) -> Any:
        return self._new_filled(_size_arg(size), "new_empty", dtype, device, empty_lazy)

    def new_full(
        self,
        size: Sequence[int],
        fill_value: Any,
        *,
        dtype: torch.dtype | None = None,
        device: Any = None,
        empty_lazy: bool = False,
    ) -> Any:
        return self._new_filled(torch.Size(size), "new_full", dtype, device, empty_lazy, fill_value)

    # ------------------------------------------------------------------ introspection
    @property
    def dtype(self) -> torch.dtype | None:
        """The dtype shared by every entry, or None when they differ (or there are none)."""
        dtypes = {t.dtype for t in self._leaves()}
        return dtypes.pop() if len(dtypes) == 1 else None

    def entry_class(self, key: Any) -> type:
        """The class of the entry at ``key`` (without building it for lazy stacks' leaves)."""
        td: Any = self
        return type(td.get(key))

    def is_contiguous(self) -> bool:
        return all(t.is_contiguous() for t in self._leaves())

    def param_count(self, *, count_duplicates: bool = True) -> int:
        """The number of elements of all entries (shared tensors once unless asked)."""
        return sum(t.numel() for t in self._unique_leaves(count_duplicates))

    def bytes(self, *, count_duplicates: bool = False) -> int:
        """The bytes held by the entries: data, gradients, and the values, offsets and lengths of
        nested (jagged) tensors. Memory shared by several entries counts once unless asked.

        Examples:
            >>> from tensordict import TensorDict
            >>> x = torch.zeros(3)
            >>> TensorDict(a=x, b=x).bytes(), TensorDict(a=x, b=x).bytes(count_duplicates=True)
            (12, 24)
        """
        seen: builtins.set[tuple[Any, ...]] = builtins.set()
        total = 0
        for leaf in self._leaves():
            for part in _memory_parts(leaf):
                nbytes = part.numel() * part.element_size()
                if not count_duplicates:
                    key = _memory_key(part, nbytes)
                    if key in seen:
                        continue
                    seen.add(key)
                total += nbytes
        return total

    def _unique_leaves(self, count_duplicates: bool) -> list[torch.Tensor]:
        leaves = self._leaves()
        if count_duplicates:
            return leaves
        seen: dict[int, torch.Tensor] = {}
        for t in leaves:
            seen.setdefault(id(t), t)
        return list(seen.values())
