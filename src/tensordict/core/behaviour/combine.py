"""stack / cat / split / chunk / unbind, and the one ``__torch_function__`` dispatch table.

``torch.stack(tds)`` gives a dense tensordict when every member has the same keys and leaf shapes
and refuses members that differ, as upstream; the internal :func:`stack` gives a
:class:`~tensordict.LazyStackedTensorDict` for those. ``split``/``chunk``/``unbind`` are
slices of the source (views).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

from tensordict.core import factory
from tensordict.core.behaviour.autograd import out_writes
from tensordict.core.behaviour.ops import keep_lock_of
from tensordict.core.behaviour.shape import normalize_dim
from tensordict.core.collection import TensorCollection, publish_as
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.combine import cat_non_tensor, stack_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.options import lazy_legacy
from tensordict.core.unbatched import is_unbatched, stack_unbatched
from tensordict.errors import BatchSizeError, DimIndexError, KeyMismatchError, ShapeMismatchError

__all__ = [
    "TORCH_FUNCTIONS",
    "CombineMixin",
    "cat",
    "private_cat",
    "private_stack",
    "run_higher_order_op",
    "stack",
    "stack_or_lazy",
    "where",
]

_MISSING: Any = object()


def _common_device(tds: Sequence[Any]) -> torch.device | None:
    device = tds[0].device
    return device if all(td.device == device for td in tds[1:]) else None


def _check_batch_sizes(tds: Sequence[Any], what: str, skip_dim: int | None = None) -> None:
    ref = tds[0].batch_size
    for i, td in enumerate(tds[1:], 1):
        bs = td.batch_size
        same = (
            bs == ref
            if skip_dim is None
            else len(bs) == len(ref)
            and all(a == b for j, (a, b) in enumerate(zip(bs, ref)) if j != skip_dim)
        )
        if not same:
            detail = "" if skip_dim is None else f" (except along dim {skip_dim})"
            raise ShapeMismatchError(
                f"cannot {what} tensordicts with different batch sizes{detail}: member 0 has "
                f"batch_size={list(ref)}, member {i} has batch_size={list(bs)}."
            )


def _stacked_names(tds: Sequence[Any]) -> list[str | None] | None:
    """The members' dimension names when they all have the same ones, else None (as upstream's
    stack: members that name any dim differently, or leave it unnamed, give an unnamed result)."""
    names = _names_of(tds[0])
    if names is None or any(_names_of(td) != names for td in tds[1:]):
        return None
    return list(names)


def _names_of(td: Any) -> list[str | None] | None:
    return td._names_or_none() if hasattr(td, "_names_or_none") else None


def _plain_same_shape(values: list[Any], shape: torch.Size) -> bool:
    """Whether every value is a plain ``torch.Tensor`` (no subclass, not missing) of ``shape``."""
    for v in values:  # noqa: SIM110 (a loop: the generator of all() costs more here)
        if type(v) is not torch.Tensor or v.shape != shape:
            return False
    return True


def _dense_stack_source(tds: Sequence[Any], dim: int, strict: bool) -> dict[str, Any] | None:
    """The stacked entries, or None when the members differ in keys or leaf shapes (``strict``:
    raise what ``torch.stack`` raises for them instead)."""
    first = tds[0]
    keys = first._own_keys()
    n = len(keys)
    if any(len(td._own_keys()) != n for td in tds[1:]):
        return _mismatch(strict, _refuse_keys, tds)
    source: dict[str, Any] = {}
    for key in keys:
        values = [td._get_str(key, _MISSING) for td in tds]
        v0 = values[0]
        if type(v0) is torch.Tensor and _plain_same_shape(values, v0.shape):
            source[key] = torch.stack(values, dim)  # the common case, checked without generators
            continue
        if any(v is _MISSING for v in values):
            return _mismatch(strict, _refuse_keys, tds)
        if is_unbatched(v0):
            bs = v0.batch_size
            source[key] = stack_unbatched(values, torch.Size([*bs[:dim], len(tds), *bs[dim:]]))
        elif isinstance(v0, torch.Tensor):
            shape = v0.shape
            if any(not isinstance(v, torch.Tensor) or v.shape != shape for v in values[1:]):
                return _mismatch(strict, _refuse_shapes, key, values)
            source[key] = torch.stack(values, dim)
        elif isinstance(v0, (NonTensorData, NonTensorStack)):
            if not all(isinstance(v, (NonTensorData, NonTensorStack)) for v in values):
                return _mismatch(strict, _refuse_shapes, key, values)
            source[key] = stack_non_tensor(values, dim)
        elif isinstance(v0, TensorCollection):
            bs0 = v0.batch_size
            if any(not isinstance(v, TensorCollection) or v.batch_size != bs0 for v in values):
                return _mismatch(strict, _refuse_shapes, key, values)
            if not strict and any(type(v) is not type(v0) for v in values[1:]):
                return None  # (strict: a lazy stack beside a dense one is stacked key by key)
            nested = stack_or_lazy(values, dim, strict=strict)
            if (
                not strict
                and type(nested).__name__ == "LazyStackedTensorDict"
                and type(v0).__name__ != type(nested).__name__
            ):
                return None
            source[key] = nested
        elif getattr(type(v0), "_is_tensorclass", False) and all(
            type(v) is type(v0) for v in values[1:]
        ):  # (with members of another kind: torch.stack's dispatch error, as upstream)
            bs0 = v0.batch_size
            if any(v.batch_size != bs0 for v in values[1:]):
                return _mismatch(strict, _refuse_shapes, key, values)
            if strict:
                source[key] = torch.stack(values, dim)  # tensorclass members dispatch themselves
                continue
            # the inner tensordicts, re-wrapped: a lazy stack inside when their leaves differ
            source[key] = stack_or_lazy(values, dim)
        else:
            source[key] = torch.stack(values, dim)
    return source


def _mismatch(strict: bool, refuse: Callable[..., NoReturn], *args: Any) -> dict[str, Any] | None:
    """Members that cannot be stacked densely: no dense source (a lazy stack), or ``refuse``
    them (``strict``)."""
    if strict:
        refuse(*args)
    return None


#: upstream's first words for members whose keys differ (TorchRL's rollout matches them)
_KEYS_DIFFER = "The sets of keys in the tensordicts to stack are exclusive."
#: ... and for entries whose shapes differ
_SHAPES_DIFFER = "The shapes of the tensors to stack is incompatible:"


def _refuse_keys(tds: Sequence[Any]) -> NoReturn:
    ref = set(tds[0]._own_keys())
    i, other = next((i, k) for i, td in enumerate(tds) if (k := set(td._own_keys())) != ref)
    differ = [
        f"{what} {sorted(keys)}"
        for what, keys in (("has", other - ref), ("lacks", ref - other))
        if keys
    ]
    raise KeyMismatchError(
        f"{_KEYS_DIFFER} Consider using `LazyStackedTensorDict.maybe_dense_stack` instead. "
        f"Member {i} {' and '.join(differ)} compared with member 0 (at this level of nesting): "
        "torch.stack needs the same keys in every member; LazyStackedTensorDict.lazy_stack / "
        "maybe_dense_stack stack them as they are."
    )


def _refuse_shapes(key: str, values: list[Any]) -> NoReturn:
    def shape(v: Any) -> Any:
        return getattr(v, "shape", type(v).__name__)

    s0, t0 = shape(values[0]), type(values[0])
    i, v = next((i, v) for i, v in enumerate(values) if shape(v) != s0 or type(v) is not t0)
    kinds = "" if shape(v) != s0 else f" ({t0.__name__} vs {type(v).__name__})"
    raise ShapeMismatchError(
        f"{_SHAPES_DIFFER} {shape(v)} vs {s0} for key {key}{kinds}. Member {i} holds the entry "
        "with another shape (or kind) than member 0: torch.stack needs the same shapes; "
        "LazyStackedTensorDict.lazy_stack / maybe_dense_stack stack them as they are."
    )


def stack_or_lazy(
    tds: Sequence[Any],
    dim: int = 0,
    *,
    out: Any = None,
    maybe_dense_stack: bool = True,
    contiguous: bool = False,
    strict: bool = False,
    **kwargs: Any,
) -> Any:
    """Stack tensordicts along a new batch dimension, dense where they agree (the internal
    stack; ``torch.stack`` is :func:`stack`, which refuses members that differ).

    Identical keys and leaf shapes give a dense :class:`~tensordict.TensorDict`; otherwise a
    :class:`~tensordict.LazyStackedTensorDict`, unless ``strict``: then members whose (nested)
    keys or leaf shapes differ are refused, as upstream's ``torch.stack`` refuses them.

    In upstream's legacy lazy mode (``set_lazy_legacy(True)``) the result is always lazy;
    ``contiguous=True`` makes it dense where it would be lazy.

    Raises:
        ShapeMismatchError: the members have different batch sizes (``strict``: or entries of
            different shapes).
        KeyMismatchError: ``strict`` and the members' keys differ.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(3)}, [3])
        >>> torch.stack([td, td], 0).batch_size
        torch.Size([2, 3])
    """
    tds = list(tds)
    if not tds:
        raise ValueError("cannot stack an empty list of tensordicts.")
    if getattr(type(tds[0]), "_is_tensorclass", False):  # the inner tensordicts, re-wrapped
        flags = {"maybe_dense_stack": maybe_dense_stack, "contiguous": contiguous, "strict": strict}
        return factory.tensorclass_dispatch(stack_or_lazy, (tds, dim), {"out": out, **flags})
    _check_batch_sizes(tds, "stack")
    bs = tds[0].batch_size
    d = normalize_dim(dim, len(bs), bs, "stack", extra=1)
    if out is not None:
        stacked = torch.Size([*bs[:d], len(tds), *bs[d:]])
        if out.batch_size != stacked:
            raise ShapeMismatchError(
                f"out.batch_size and stacked batch size must match, got "
                f"out.batch_size={out.batch_size} and batch_size={stacked}. Give an out= of the "
                "stacked batch size (nothing was written)."
            )
        members = _only_keys_of(out, tds)
        with out_writes("stack", out, members):
            for i, td in enumerate(members):
                out[(slice(None),) * d + (i,)] = td
        return out
    if contiguous:
        result = stack_or_lazy(tds, d, strict=strict)
        return result.contiguous() if hasattr(result, "stack_dim") else result
    if lazy_legacy():
        return factory.LazyStackedTensorDict(*tds, stack_dim=d)
    if any(hasattr(td, "stack_dim") for td in tds):
        lazy = factory.stack_lazy(tds, d, strict)
        if lazy is not None:  # lazy stacks of as many members: stacked member by member
            return lazy
    source = _dense_stack_source(tds, d, strict) if maybe_dense_stack or strict else None
    if source is None:
        return factory.LazyStackedTensorDict(*tds, stack_dim=d)
    new_bs = torch.Size([*bs[:d], len(tds), *bs[d:]])
    names = _stacked_names(tds)
    if names is not None:
        names = [*names[:d], None, *names[d:]]
    result = tds[0]._new_dense(source, new_bs, names)
    result._device = _common_device(tds)
    return result


def _only_keys_of(out: Any, tds: list[Any]) -> list[Any]:
    """The members restricted to the entries ``out`` holds (as upstream, ``stack(out=)`` writes
    those only: the members' other keys are left out, ``out``'s other keys left alone)."""
    target = out._tensordict if getattr(type(out), "_is_tensorclass", False) else out
    keys = set(target.keys(True, True, is_leaf=leaf_or_non_tensor))
    restricted = []
    for td in tds:
        inner = td._tensordict if getattr(type(td), "_is_tensorclass", False) else td
        if set(inner.keys(True, True, is_leaf=leaf_or_non_tensor)) <= keys:
            restricted.append(td)
        else:
            restricted.append(inner.select(*keys, strict=False))
    return restricted


def stack(input: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """``torch.stack`` / ``TensorDict.stack`` / ``tensordict.stack``: stack tensordicts that
    agree along a new batch dimension, as upstream does.

    The members must have the same (nested) keys and, entry by entry, the same shapes: the
    result is a dense :class:`~tensordict.TensorDict`. Lazy stacks with the same stack dim and
    member count are stacked member by member (the result stays lazy). Members that differ are
    refused, as upstream refuses them: :meth:`~tensordict.LazyStackedTensorDict.lazy_stack` keeps
    them apart and :meth:`~tensordict.LazyStackedTensorDict.maybe_dense_stack` stacks densely what
    agrees. With ``out=``, the stack is written into ``out``, its keys only (as upstream: the
    members' other keys are left out, ``out``'s other keys left alone).

    Raises:
        KeyMismatchError: the members' keys differ (a ``RuntimeError`` and a ``KeyError``; the
            message starts as upstream's).
        ShapeMismatchError: the members' batch sizes, or the shapes of an entry, differ (a
            ``RuntimeError``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = TensorDict(obs=torch.zeros(3), reward=torch.ones(1))
        >>> b = TensorDict(obs=torch.ones(3))
        >>> try:
        ...     torch.stack([a, b])
        ... except RuntimeError as err:
        ...     print(str(err).split(".")[0])
        The sets of keys in the tensordicts to stack are exclusive
        >>> type(torch.stack([b, b.clone()])).__name__
        'TensorDict'
        >>> type(TensorDict.maybe_dense_stack([a, b])).__name__
        'LazyStackedTensorDict'
    """
    return stack_or_lazy(input, dim, out=out, strict=True)


def private_stack(
    list_of_tensordicts: Sequence[Any],
    dim: int = 0,
    device: Any = None,
    out: Any = None,
    strict: bool = False,
    contiguous: bool = False,
    maybe_dense_stack: bool | None = None,
) -> Any:
    """Upstream's private stack: ``torch.stack``'s rules (members that differ are refused)
    unless ``maybe_dense_stack``, which stacks them lazily; ``contiguous`` makes a lazy result
    dense; ``device`` moves the result. ``strict`` is accepted as upstream accepts it.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> a, b = TensorDict(x=torch.zeros(2)), TensorDict(y=torch.zeros(2))
        >>> type(private_stack([a, b], maybe_dense_stack=True)).__name__
        'LazyStackedTensorDict'
    """
    result = stack_or_lazy(
        list_of_tensordicts, dim, out=out, strict=not maybe_dense_stack, contiguous=contiguous
    )
    return result if device is None else result.to(device)


def private_cat(
    list_of_tensordicts: Sequence[Any], dim: int = 0, device: Any = None, out: Any = None
) -> Any:
    """Upstream's private cat: ``torch.cat`` of tensordicts, then moved to ``device``."""
    result = cat(list_of_tensordicts, dim, out=out)
    return result if device is None else result.to(device)


def cat(input: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """Concatenate tensordicts along an existing batch dimension.

    Raises:
        ShapeMismatchError: different keys, or batch sizes that differ outside ``dim``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(3)}, [3])
        >>> torch.cat([td[:1], td[1:]], 0)["a"]
        tensor([0, 1, 2])
    """
    tds = list(input)
    if not tds:
        raise ValueError("cannot concatenate an empty list of tensordicts.")
    if getattr(type(tds[0]), "_is_tensorclass", False):  # concatenates the inner tensordicts
        return torch.cat(tds, dim, out=out)
    bs = tds[0].batch_size
    if not bs:
        raise BatchSizeError("cannot concatenate tensordicts without batch dimensions; use stack.")
    d = normalize_dim(dim, len(bs), bs, "cat")
    if out is not None:
        with out_writes("cat", out, tds):
            out.update_(cat(tds, d))
        return out
    if any(hasattr(td, "stack_dim") for td in tds):
        lazy = factory.cat_lazy(tds, d)  # a lazy stack (members checked as they are combined)
        if lazy is not None:
            return lazy
        tds = [td.to_tensordict() if hasattr(td, "stack_dim") else td for td in tds]
    _check_batch_sizes(tds, "concatenate", skip_dim=d)
    keys = tds[0]._own_keys()
    for i, td in enumerate(tds[1:], 1):
        other = td._own_keys()
        if set(other) != set(keys):
            raise ShapeMismatchError(
                f"cannot concatenate tensordicts with different keys: member 0 has "
                f"{sorted(keys)}, member {i} has {sorted(other)}."
            )
    new_bs = list(bs)
    new_bs[d] = sum(td.batch_size[d] for td in tds)
    source: dict[str, Any] = {}
    for key in keys:
        values = [td._get_str(key, None) for td in tds]
        v0 = values[0]
        if is_unbatched(v0):
            source[key] = stack_unbatched(values, torch.Size(new_bs))
        elif isinstance(v0, torch.Tensor):
            source[key] = torch.cat(values, d)
        elif isinstance(v0, (NonTensorData, NonTensorStack)):
            source[key] = cat_non_tensor(values, d)
        elif isinstance(v0, TensorCollection):
            source[key] = cat(values, d)
        else:
            source[key] = torch.cat(values, d)
    # (as upstream: the first tensordict's names, whatever the others name their dims)
    result = tds[0]._new_dense(source, torch.Size(new_bs), _names_of(tds[0]))
    result._device = _common_device(tds)
    return result


def where(condition: Any, input: Any, other: Any, *, out: Any = None) -> Any:
    """``torch.where`` with tensordicts: the condition has the batch shape (or is a tensordict)."""
    flip = not isinstance(input, TensorCollection)
    base, rest = (other, input) if flip else (input, other)
    result = keep_lock_of(base, _where(condition, base, rest, flip))
    if out is not None:
        out.update_(result)
        return out
    return result


def _where(condition: Any, base: Any, rest: Any, flip: bool) -> Any:
    """``where`` entry by entry; a lazy stack splits the condition and the other operand along
    its stack dim and answers member by member."""
    if hasattr(base, "stack_dim") and base.tensordicts:
        sd, n = base.stack_dim, len(base.tensordicts)
        parts = zip(base.tensordicts, split_operand(condition, sd, n), split_operand(rest, sd, n))
        members = [_where(c, m, r, flip) for m, c, r in parts]
        return factory.LazyStackedTensorDict(*members, stack_dim=sd)
    if getattr(type(base), "_is_tensorclass", False):
        # (each leaf meets the matching leaf of a collection operand, not the whole operand)
        others = [o for o in (condition, rest) if _is_coll(o)]

        def leaf(x: torch.Tensor, *matching: Any) -> torch.Tensor:
            found = iter(matching)
            c = next(found) if _is_coll(condition) else condition
            r = next(found) if _is_coll(rest) else rest
            return _where_leaf(c, x, r, flip)

        return base._apply_leaves(leaf, *others)
    out: dict[str, Any] = {}
    for key, value in base._own_items():
        r = rest._get_str(key, None) if isinstance(rest, TensorCollection) else rest
        c = condition._get_str(key, None) if isinstance(condition, TensorCollection) else condition
        if isinstance(value, torch.Tensor):
            out[key] = _where_leaf(c, value, r, flip)
        elif isinstance(value, TensorCollection) or getattr(type(value), "_is_tensorclass", False):
            out[key] = _where(c, value, r, flip)
        else:
            out[key] = value
    return base._new_dense(out, base.batch_size, base._names_or_none())


def _is_coll(operand: Any) -> bool:
    return isinstance(operand, TensorCollection) or getattr(type(operand), "_is_tensorclass", False)


def _where_leaf(c: Any, x: torch.Tensor, y: Any, flip: bool) -> torch.Tensor:
    if isinstance(c, torch.Tensor):
        c = c.reshape((*c.shape, *([1] * (x.ndim - c.ndim))))
    return torch.where(c, y, x) if flip else torch.where(c, x, y)


def split_operand(operand: Any, dim: int, n: int) -> list[Any]:
    """An operand of a lazy stack's ``where`` cut along its stack dim (broadcast if it lacks it)."""
    if isinstance(operand, TensorCollection) or getattr(type(operand), "_is_tensorclass", False):
        return list(operand.unbind(dim))
    if isinstance(operand, torch.Tensor) and operand.ndim > dim and operand.shape[dim] == n:
        return list(operand.unbind(dim))
    return [operand] * n


def _pass_lock(source: Any, pieces: tuple[Any, ...]) -> tuple[Any, ...]:
    """split/chunk/unbind of a locked tensordict give locked pieces (as upstream)."""
    if source.is_locked:
        for piece in pieces:
            piece._set_locked(True)
    return pieces


def _split_bounds(
    split_size: Any, n: int, batch_size: torch.Size, dim: int
) -> list[tuple[int, int]]:
    """The ``(start, stop)`` of each piece of ``split`` along a dim of size ``n`` (upstream's
    error types and wording for a bad ``split_size``)."""
    if isinstance(split_size, int) and not isinstance(split_size, bool):
        if split_size <= 0:
            raise ValueError(f"TensorDict.split: split_size must be positive, got {split_size}.")
        return [(s, min(s + split_size, n)) for s in range(0, n, split_size)] or [(0, 0)]
    sizes = list(split_size) if isinstance(split_size, (list, tuple, torch.Size)) else None
    if sizes is None or not all(isinstance(s, int) for s in sizes):
        raise TypeError(
            f"split(): argument 'split_size' must be int or list of ints, got {split_size!r}."
        )
    if not sizes:
        raise BatchSizeError(
            f"Insufficient number of elements in split_size: got [] for dim {dim} of "
            f"batch_size={list(batch_size)} (size {n}). Give sizes that sum to {n}."
        )
    if sum(sizes) != n:
        raise BatchSizeError(
            f"Split method expects split_size to sum exactly to {n}, but got sum({sizes}) = "
            f"{sum(sizes)} (dim {dim} of batch_size={list(batch_size)})."
        )
    starts = list(itertools.accumulate(sizes, initial=0))
    return list(itertools.pairwise(starts))


class CombineMixin(TensorCollection):
    """split / chunk / unbind methods, stack / cat constructors, and ``__torch_function__``."""

    __slots__ = ()

    def _dim_slices(self, dim: int, what: str) -> tuple[int, int]:
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, what)
        return d, bs[d]

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Any, ...]:
        """Split into pieces of ``split_size`` (an int, or a list of sizes) along ``dim``; views.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(5)}, [5])
            >>> [t["a"].tolist() for t in td.split([2, 3])]
            [[0, 1], [2, 3, 4]]
        """
        bs = self.batch_size
        if not -len(bs) <= dim < len(bs):  # an IndexError, with upstream's wording
            raise DimIndexError(
                f"Incompatible dim {dim} for tensordict with shape {bs}: split acts on the batch "
                f"dims, expected a dim in [{-len(bs)}, {len(bs) - 1}]."
            )
        d, n = self._dim_slices(dim, "split")
        bounds = _split_bounds(split_size, n, bs, d)
        prefix = (slice(None),) * d
        return _pass_lock(self, tuple(self._index(prefix + (slice(a, b),)) for a, b in bounds))

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Any, ...]:
        """Split into ``chunks`` pieces along ``dim`` like ``torch.chunk`` (views)."""
        if chunks <= 0:
            raise ValueError(f"chunks must be a positive int, got {chunks}.")
        _, n = self._dim_slices(dim, "chunk")
        return self.split(max(1, math.ceil(n / chunks)), dim)

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        """The elements along ``dim``, with that dimension removed (views)."""
        d, n = self._dim_slices(dim, "unbind")
        prefix = (slice(None),) * d
        return _pass_lock(self, tuple(self._index(prefix + (i,)) for i in range(n)))

    @classmethod
    def stack(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
        """Stack tensordicts that agree (see :func:`tensordict.stack`: members whose keys or entry
        shapes differ are refused, as upstream)."""
        return stack(input, dim, out=out)

    @classmethod
    def cat(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
        """Concatenate tensordicts (see :func:`tensordict.core.behaviour.combine.cat`)."""
        return cat(input, dim, out=out)

    @classmethod
    def lazy_stack(
        cls, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any
    ) -> Any:
        """Stack without copying: a :class:`~tensordict.LazyStackedTensorDict` (the options of
        :meth:`LazyStackedTensorDict.lazy_stack <tensordict.LazyStackedTensorDict.lazy_stack>`)."""
        return factory.LazyStackedTensorDict.lazy_stack(input, dim, out=out, **kwargs)

    @classmethod
    def maybe_dense_stack(
        cls, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any
    ) -> Any:
        """Dense where the members agree, lazy where they differ (see
        :func:`tensordict.maybe_dense_stack`)."""
        return factory.LazyStackedTensorDict.maybe_dense_stack(input, dim, out=out, **kwargs)

    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        impl = TORCH_FUNCTIONS.get(func)
        if impl is None:
            return run_higher_order_op(func, args, kwargs)
        return impl(*args, **(kwargs or {}))


def run_higher_order_op(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    """``func`` run on tensordict arguments when it is a higher-order operator (what
    ``torch.compiler.nested_compile_region`` calls, for instance), which handles pytree
    arguments itself; ``NotImplemented`` for any other function torch hands to
    ``__torch_function__``."""
    if isinstance(func, torch._ops.HigherOrderOperator):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))
    return NotImplemented


def _like(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    def impl(td: Any, *args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device")
        extra = {} if device is None else {"device": torch.device(device)}  # (the td's device)
        return keep_lock_of(td, td._apply_leaves(lambda t: fn(t, *args, **kwargs), **extra))

    return impl


def _loss(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    """A ``torch.nn.functional`` loss of two tensordicts, entry by entry (reduced per entry
    unless ``reduction="none"``)."""

    def impl(input: Any, target: Any, *args: Any, reduction: str = "mean", **kwargs: Any) -> Any:
        batch_size = None if reduction == "none" else torch.Size([])
        return input._apply_leaves(
            lambda x, y: fn(x, y, *args, reduction=reduction, **kwargs),
            target,
            batch_size=batch_size,
        )

    return impl


def _autograd_grad(outputs: Any, inputs: Any, grad_outputs: Any = None, **kwargs: Any) -> Any:
    """``torch.autograd.grad`` of tensordicts: a tensordict of gradients shaped like ``inputs``,
    entries matched by key (lazy stacks member by member: their stacked tensors are not in the
    graph)."""
    outputs, inputs, grad_outputs = (
        x[0] if isinstance(x, (tuple, list)) and len(x) == 1 else x
        for x in (outputs, inputs, grad_outputs)
    )
    outs: list[Any] = []
    ins: list[Any] = []
    gos: list[Any] | None = [] if isinstance(grad_outputs, TensorCollection) else None
    rebuild = _grad_pairs(outputs, inputs, grad_outputs, outs, ins, gos)
    grads = torch.autograd.grad(outs, ins, gos if gos is not None else grad_outputs, **kwargs)
    return rebuild(iter(grads))


def _grad_pairs(
    outputs: Any, inputs: Any, grad_outputs: Any, outs: list[Any], ins: list[Any], gos: Any
) -> Callable[[Any], Any]:
    """Append the matching output / input (/ grad output) tensors; return how to rebuild the
    gradients of ``inputs`` from an iterator over them."""
    members = getattr(inputs, "tensordicts", None)
    sd = getattr(inputs, "stack_dim", None)
    out_members = getattr(outputs, "tensordicts", None)
    if members is not None and sd is not None and len(out_members or ()) == len(members):
        go_members: list[Any] = [None] * len(members)
        if gos is not None:
            go_members = getattr(grad_outputs, "tensordicts", None) or list(grad_outputs.unbind(sd))
        parts = [
            _grad_pairs(o, i, g, outs, ins, gos)
            for o, i, g in zip(out_members, members, go_members)  # type: ignore[arg-type]
        ]
        return lambda it: factory.LazyStackedTensorDict(*[p(it) for p in parts], stack_dim=sd)
    keys = [
        k
        for k, v in inputs.items(True, True, is_leaf=leaf_or_non_tensor)
        if isinstance(v, torch.Tensor)
    ]
    outs.extend(outputs.get(k) for k in keys)
    ins.extend(inputs.get(k) for k in keys)
    if gos is not None:
        gos.extend(grad_outputs.get(k) for k in keys)

    def rebuild(it: Any) -> Any:
        by_key = {k: next(it) for k in keys}
        return inputs.named_apply(lambda k, x: by_key[k], nested_keys=True)

    return rebuild


def _atleast(name: str) -> Callable[..., Any]:
    """``torch.atleast_nd(td)`` (one result) or ``torch.atleast_nd(td0, td1, ...)`` (a list)."""

    def impl(*tds: Any) -> Any:
        out = [getattr(td, name)() for td in tds]
        return out[0] if len(out) == 1 else out

    return impl


#: The one table of torch functions a tensordict answers to.
TORCH_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {
    torch.stack: stack,
    torch.cat: cat,
    torch.concat: cat,
    torch.concatenate: cat,
    torch.split: lambda td, split_size_or_sections, dim=0: td.split(split_size_or_sections, dim),
    torch.chunk: lambda td, chunks, dim=0: td.chunk(chunks, dim),
    torch.unbind: lambda td, dim=0: td.unbind(dim),
    torch.zeros_like: _like(torch.zeros_like),
    torch.ones_like: _like(torch.ones_like),
    torch.empty_like: _like(torch.empty_like),
    torch.full_like: _like(torch.full_like),
    torch.rand_like: _like(torch.rand_like),
    torch.randn_like: _like(torch.randn_like),
    torch.where: where,
    torch.clone: lambda td, **kw: td.clone(),
    torch.squeeze: lambda td, dim=None: td.squeeze(dim),
    torch.unsqueeze: lambda td, dim: td.unsqueeze(dim),
    torch.permute: lambda td, dims: td.permute(dims),
    torch.reshape: lambda td, shape: td.reshape(shape),
    torch.flatten: lambda td, start_dim=0, end_dim=-1: td.flatten(start_dim, end_dim),
    torch.unflatten: lambda td, dim, sizes: td.unflatten(dim, sizes),
    torch.transpose: lambda td, dim0, dim1: td.transpose(dim0, dim1),
    torch.gather: lambda td, dim, index, out=None, **kw: td.gather(dim, index, out=out),
    torch.isfinite: lambda td: td.isfinite(),
    torch.isnan: lambda td: td.isnan(),
    torch.abs: lambda td: td.abs(),
    torch.all: lambda td, dim=None: td.all(dim),
    torch.any: lambda td, dim=None: td.any(dim),
    torch.flip: lambda td, dims: td.flip(dims),
    torch.masked_select: lambda td, mask: td.masked_select(mask),
    torch.lerp: lambda td, end, weight: td.lerp(end, weight),
    torch.maximum: lambda td, other: td.maximum(other),
    torch.minimum: lambda td, other: td.minimum(other),
    torch.sum: lambda td, dim=None, keepdim=False, **kw: td.sum(dim, keepdim, **kw),
    torch.mean: lambda td, dim=None, keepdim=False, **kw: td.mean(dim, keepdim, **kw),
    torch.var: lambda td, dim=None, *, keepdim=False, **kw: td.var(dim, keepdim, **kw),
    torch.std: lambda td, dim=None, *, keepdim=False, **kw: td.std(dim, keepdim, **kw),
    torch.nn.functional.l1_loss: _loss(torch.nn.functional.l1_loss),
    torch.nn.functional.mse_loss: _loss(torch.nn.functional.mse_loss),
    torch.nn.functional.smooth_l1_loss: _loss(torch.nn.functional.smooth_l1_loss),
    torch.autograd.grad: _autograd_grad,
    torch.tensor_split: lambda td, indices_or_sections, dim=0: td.tensor_split(
        indices_or_sections, dim
    ),
    torch.repeat_interleave: lambda td, repeats, dim=None, **kw: td.repeat_interleave(
        repeats, dim, **kw
    ),
    # torch's shape functions, acting on the batch dims (``core.behaviour.shape``)
    torch.movedim: lambda td, source, destination: td.movedim(source, destination),
    torch.moveaxis: lambda td, source, destination: td.movedim(source, destination),
    torch.swapaxes: lambda td, axis0, axis1: td.swapdims(axis0, axis1),
    torch.swapdims: lambda td, dim0, dim1: td.swapdims(dim0, dim1),
    torch.narrow: lambda td, dim, start, length: td.narrow(dim, start, length),
    torch.roll: lambda td, shifts, dims=None: td.roll(shifts, dims),
    torch.rot90: lambda td, k=1, dims=(0, 1): td.rot90(k, dims),
    torch.fliplr: lambda td: td.fliplr(),
    torch.flipud: lambda td: td.flipud(),
    torch.tile: lambda td, dims: td.tile(dims),
    torch.broadcast_to: lambda td, size: td.broadcast_to(size),
    torch.atleast_1d: _atleast("atleast_1d"),
    torch.atleast_2d: _atleast("atleast_2d"),
    torch.atleast_3d: _atleast("atleast_3d"),
}


publish_as("tensordict._td", cat, stack)  # upstream's path
