"""Shape operations on a lazy stack that keep it lazy (as upstream).

``unsqueeze``/``squeeze``/``permute``/``transpose`` move the stack dim and apply the rest to each
member. ``view``/``reshape``/``flatten``/``unflatten`` *regroup* the stack when the new shape only
merges adjacent dims (the elements become the members of one stack) or splits one dim (nested
stacks of slices); ``view`` refuses any other shape and ``reshape`` then makes a dense copy.
``torch.stack``/``torch.cat`` of lazy stacks give lazy stacks (:func:`stack_lazy`,
:func:`cat_lazy`).
Members are views of the source's members wherever torch gives views, so in-place writes into the
result reach the source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from tensordict.core.behaviour.combine import cat, stack_or_lazy
from tensordict.core.behaviour.shape import _unsqueezed, _written_back, normalize_dim
from tensordict.core.collection import TensorCollection as TensorDictBaseLike
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.lazy.views import lazy_shape_view
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.options import lazy_legacy
from tensordict.errors import BatchSizeError, InplaceNotSupportedError, ShapeMismatchError

__all__ = ["LazyShapeMixin", "cat_lazy", "maybe_dense_stack", "pad_lazy", "stack_lazy"]


def _sizes(args: tuple[Any, ...]) -> list[int]:
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        return [int(s) for s in args[0]]
    return [int(s) for s in args]


def _new_stack(members: Sequence[Any], stack_dim: int, like: Any) -> Any:
    from tensordict.core.lazy.stack import LazyStackedTensorDict  # (it imports this module)

    out = LazyStackedTensorDict(*members, stack_dim=stack_dim)
    if like is not None and like.is_locked:  # shape operations keep the lock, as upstream
        out._set_locked(True)
    return out


class LazyShapeMixin:
    """Shape operations of :class:`~tensordict.LazyStackedTensorDict` that keep it lazy."""

    __slots__ = ()
    tensordicts: list[Any]
    stack_dim: int
    batch_size: torch.Size
    is_locked: bool

    def _members_op(self, name: str, *args: Any) -> list[Any]:
        return [getattr(m, name)(*args) for m in self.tensordicts]

    def unsqueeze(self, dim: int) -> Any:
        """Insert a batch dim of size 1 (in each member, or before the stack dim)."""
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "unsqueeze", extra=1)
        sd = self.stack_dim
        if d <= sd:
            out = _new_stack(self._members_op("unsqueeze", d), sd + 1, self)
        else:
            out = _new_stack(self._members_op("unsqueeze", d - 1), sd, self)
        return _written_back(self, out, lambda o: o.squeeze(d))

    def squeeze(self, dim: int | None = None) -> Any:
        """Remove batch dims of size 1 (the stack dim too: its only member is returned)."""
        bs = self.batch_size
        if dim is None:
            out: Any = self
            for d in reversed(range(len(bs))):
                if bs[d] == 1:
                    out = out.squeeze(d)
            return out
        d = normalize_dim(dim, len(bs), bs, "squeeze")
        sd = self.stack_dim
        if bs[d] != 1:
            return self
        if d == sd:
            return self.tensordicts[0]  # (a member: what the block sets in it is ours)
        if d < sd:
            out = _new_stack(self._members_op("squeeze", d), sd - 1, self)
        else:
            out = _new_stack(self._members_op("squeeze", d - 1), sd, self)
        return _written_back(self, out, lambda o: _unsqueezed(o, [d]))

    def permute(self, *dims: Any) -> Any:
        """Permute the batch dims: the members permute theirs, the stack dim moves."""
        order = _sizes(dims)
        bs = self.batch_size
        bd = len(bs)
        if len(order) != bd:
            raise BatchSizeError(
                f"number of dims don't match in permute (got {len(order)}, expected {bd}): "
                f"{order} for batch_size={list(bs)}. Give an order of all {bd} batch dimensions."
            )
        order = [normalize_dim(d, bd, bs, "permute") for d in order]
        if sorted(order) != list(range(bd)):
            raise BatchSizeError(
                f"repeated dim in permute: {order} is not a permutation of range({bd}). "
                "Give each batch dimension once."
            )
        if lazy_legacy():  # upstream's legacy lazy mode: a lazy view of the stack (or itself)
            if order == list(range(bd)):
                return self
            return lazy_shape_view(self, "permute", dims=order)
        sd = self.stack_dim
        member_order = [o - (o > sd) for o in order if o != sd]
        out = _new_stack(self._members_op("permute", member_order), order.index(sd), self)
        inverse = [order.index(d) for d in range(bd)]  # (entries set in `with` come back)
        return _written_back(self, out, lambda o: o.permute(*inverse))

    def repeat(self, *repeats: Any, inplace: bool = False) -> Any:
        _refuse_inplace("repeat", inplace)
        return super().repeat(*repeats)  # type: ignore[misc]

    def gather(
        self, dim: int, index: torch.Tensor, out: Any = None, *, inplace: bool = False
    ) -> Any:
        _refuse_inplace("gather", inplace)
        return super().gather(dim, index, out)  # type: ignore[misc]

    # ------------------------------------------------------------------ any shape function
    def _transform(self, leaf_fn: Any, batch_size: Any = None, names: Any = None) -> Any:
        """Apply a batch-dims shape function (see ``ShapeMixin._transform``), keeping the stack.

        The function is first run on the stack coordinates: when the stack dim comes out as one
        dim (possibly moved, repeated or reordered), each member is transformed on its own (as
        a stack of copies of itself, from which its slot is taken: views stay views); otherwise
        the stack is regrouped element by element.
        """
        bs = self.batch_size
        n, sd = bs[self.stack_dim], self.stack_dim
        coords = torch.arange(n).view([n if d == sd else 1 for d in range(len(bs))])
        moved = leaf_fn(coords.expand(bs).contiguous())
        dim = _single_varying_dim(moved)
        if dim is None or n == 0:
            return self._transform_elements(leaf_fn)
        along = _along(moved, dim)
        new_bs = moved.shape
        members = []
        for k, i in enumerate(along):
            copies = self.tensordicts[i].unsqueeze(sd).expand(bs)
            members.append(copies._transform(leaf_fn, new_bs)[(slice(None),) * dim + (k,)])
        return _new_stack(members, dim, self)

    def _transform_elements(self, leaf_fn: Any) -> Any:
        if not self.batch_size.numel():
            return self.to_tensordict()._transform(leaf_fn)  # type: ignore[attr-defined]
        ids = leaf_fn(torch.arange(self.batch_size.numel()).view(self.batch_size))
        out = self.reshape(-1)[ids]  # a lazy stack of the elements, nested as ``ids``
        if self.is_locked:
            out._set_locked(True)
        return out

    # ------------------------------------------------------------------ regrouping
    def view(self, *shape: Any, batch_size: Any = None) -> Any:
        """View with a new batch shape that merges adjacent dims or splits one dim, or every
        leaf as a dtype (with ``batch_size``: the members' views are stacked when the stack
        dim is kept, else a dense copy is viewed).

        Raises:
            BatchSizeError: the new shape does more than merge or split dims (use reshape).
        """
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            if batch_size is None:
                return _new_stack(self._members_op("view", shape[0]), self.stack_dim, self)
            bs, sd = list(batch_size), self.stack_dim
            if sd >= len(bs):
                return self.to_tensordict().view(shape[0], batch_size=bs)  # type: ignore[attr-defined]
            members = [
                m.view(shape[0], batch_size=bs[:sd] + bs[sd + 1 :]) for m in self.tensordicts
            ]
            return _new_stack(members, sd, self)
        if batch_size is not None:
            raise TypeError("view(): batch_size= goes with a dtype view, not with a shape.")
        new_bs = self._target_shape(_sizes(shape), "view")
        if new_bs == self.batch_size:
            return self
        if lazy_legacy():  # upstream's legacy lazy mode: a lazy view of the stack
            return lazy_shape_view(self, "view", size=new_bs)
        out = self._regroup(new_bs) if self.batch_size.numel() else None
        if out is None:
            raise BatchSizeError(
                f"cannot view a lazy stack of batch_size={list(self.batch_size)} as "
                f"{list(new_bs)}: a view of a lazy stack can only merge adjacent dims or split "
                "one dim. Call reshape() instead (it copies when needed)."
            )
        old_bs = self.batch_size
        return _written_back(self, out, lambda o: o.reshape(old_bs))

    def reshape(self, *shape: Any, size: Any = None) -> Any:
        """Like :meth:`view`; any other shape gives a dense (copied) tensordict."""
        if size is not None:  # (upstream's keyword form)
            shape = (*shape, tuple(size))
        new_bs = self._target_shape(_sizes(shape), "reshape")
        if new_bs == self.batch_size:
            return self
        out = self._regroup(new_bs) if self.batch_size.numel() else None
        if out is None:
            dense = self.to_tensordict().reshape(new_bs)  # type: ignore[attr-defined]
            if self.is_locked:
                dense._set_locked(True)
            return dense
        return out

    def flatten(self, start_dim: int = 0, end_dim: int = -1, *, inplace: bool = False) -> Any:
        """Merge the batch dims ``start_dim..end_dim`` (the elements become the members)."""
        _refuse_inplace("flatten", inplace)
        bs = self.batch_size
        s = normalize_dim(start_dim, len(bs), bs, "flatten")
        e = normalize_dim(end_dim, len(bs), bs, "flatten")
        if e < s:
            raise BatchSizeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}.")
        if s == e:
            return self
        out = self.reshape(*bs[:s], math.prod(bs[s : e + 1]), *bs[e + 1 :])
        return _written_back(self, out, lambda o: o.reshape(bs))

    def unflatten(self, dim: int, unflattened_size: Sequence[int], *, inplace: bool = False) -> Any:
        """Split batch dim ``dim`` into ``unflattened_size`` (nested stacks of slices)."""
        _refuse_inplace("unflatten", inplace)
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "unflatten")
        try:
            new_bs = torch.empty(bs, device="meta").unflatten(d, list(unflattened_size)).shape
        except RuntimeError as err:
            raise BatchSizeError(
                f"cannot unflatten dim {dim} of batch_size={list(bs)} into "
                f"{list(unflattened_size)}: {err}"
            ) from None
        out = self.reshape(new_bs)
        return _written_back(self, out, lambda o: o.reshape(bs))

    def _target_shape(self, sizes: list[int], what: str) -> torch.Size:
        try:
            return torch.empty(self.batch_size, device="meta").reshape(sizes).shape
        except RuntimeError as err:
            raise BatchSizeError(
                f"cannot {what} batch_size={list(self.batch_size)} to {sizes}: {err}"
            ) from None

    def _regroup(self, new_bs: torch.Size) -> Any:
        """The stack with batch size ``new_bs`` made of the same elements, or None when
        ``new_bs`` does more than merge adjacent dims or split one dim."""
        old = list(self.batch_size)
        new = list(new_bs)
        i = 0
        while i < min(len(old), len(new)) and old[i] == new[i]:
            i += 1
        if i == min(len(old), len(new)):  # one shape extends the other with size-1 dims
            i -= 1
        if i < 0:
            return None
        if len(new) < len(old):  # merge dims i..j of old into dim i of new
            for j in range(i, len(old)):
                if math.prod(old[i : j + 1]) == new[i] and old[j + 1 :] == new[i + 1 :]:
                    return self._merge(i, j)
            return None
        for j in range(i, len(new)):  # split dim i of old into dims i..j of new
            if math.prod(new[i : j + 1]) == old[i] and new[j + 1 :] == old[i + 1 :]:
                return self._split_dim(i, new[i : j + 1])
        return None

    def _merge(self, i: int, j: int) -> Any:
        elements: list[Any] = [self]
        for _ in range(i, j + 1):
            elements = [e for td in elements for e in td.unbind(i)]
        return _new_stack(elements, i, self)

    def _split_dim(self, i: int, sizes: list[int]) -> Any:
        out: Any = self
        for k, size in enumerate(sizes[:-1]):
            d = i + k
            step = out.batch_size[d] // size
            out = _new_stack(out.split(step, d), d, self)
        return out


def _refuse_inplace(op: str, inplace: bool) -> None:
    if inplace:
        raise InplaceNotSupportedError(
            f"{op}(..., inplace=True) is not supported on a LazyStackedTensorDict: its batch "
            f"size follows its members. Call {op}(...) without inplace (a new lazy stack), or "
            "make it dense first (to_tensordict())."
        )


def _single_varying_dim(moved: torch.Tensor) -> int | None:
    """The one dim along which ``moved`` varies (the stack dim after a shape function), or
    None when it varies along several, or along none (the stack dim was merged away, or a
    single member's slot cannot be told apart)."""
    varying = [
        d
        for d in range(moved.ndim)
        if moved.shape[d] > 1 and not bool((moved == moved.narrow(d, 0, 1)).all())
    ]
    return varying[0] if len(varying) == 1 else None


def _along(moved: torch.Tensor, dim: int) -> list[int]:
    index = [0] * moved.ndim
    index[dim] = slice(None)  # type: ignore[call-overload]
    return moved[tuple(index)].tolist()  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- stack and cat
def is_lazy(td: Any) -> bool:
    return hasattr(td, "stack_dim") and hasattr(td, "tensordicts")


def stack_lazy(tds: Sequence[Any], dim: int, strict: bool = False) -> Any:
    """``torch.stack`` of lazy stacks sharing a stack dim and a member count: a lazy stack whose
    members stack the matching members (None when the inputs do not qualify). ``strict``: the
    matching members must agree as ``torch.stack`` demands (see :func:`stack`)."""
    if not is_lazy(tds[0]):  # (a dense one first: not stacks alike)
        return None
    sd = tds[0].stack_dim
    n = len(tds[0].tensordicts)
    if not all(is_lazy(td) and td.stack_dim == sd and len(td.tensordicts) == n for td in tds):
        return None
    member_dim = dim if dim <= sd else dim - 1
    columns = [[td.tensordicts[k] for td in tds] for k in range(n)]
    members = [stack_or_lazy(column, member_dim, strict=strict) for column in columns]
    return _new_stack(members, sd + 1 if dim <= sd else sd, None)


def maybe_dense_stack(tds: Sequence[Any], dim: int = 0) -> Any:
    """Stack densely what agrees and lazily what does not (upstream's "best intention" stack).

    Members with the same keys and leaf shapes give a dense TensorDict; nested tensordicts
    that differ become lazy stacks inside it; differing keys or leaf shapes at the top give a
    lazy stack. Lazy stacks along the same dim with the same keys are stacked member by member.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = TensorDict({"x": torch.zeros(()), "n": {"c": torch.zeros(())}})
        >>> b = TensorDict({"x": torch.ones(()), "n": {"d": torch.ones(())}})
        >>> out = maybe_dense_stack([a, b])
        >>> type(out).__name__, type(out["n"]).__name__
        ('TensorDict', 'LazyStackedTensorDict')
    """
    tds = list(tds)
    if getattr(type(tds[0]), "_is_tensorclass", False) or not tds:
        return stack_or_lazy(tds, dim)
    bs = tds[0].batch_size
    d = normalize_dim(dim, len(bs), bs, "stack", extra=1)
    if all(is_lazy(td) for td in tds):
        return _stack_lazy_members(tds, d, dense=_same_keys(tds))
    keys = tds[0]._own_keys()
    if any(set(td._own_keys()) != set(keys) for td in tds[1:]) or any(
        td.batch_size != bs for td in tds[1:]
    ):
        return _new_stack(tds, d, None) if _all_same_bs(tds) else stack_or_lazy(tds, d)
    source: dict[str, Any] = {}
    for key in keys:
        try:
            values = [td._get_str(key, None) for td in tds]
        except ShapeMismatchError:  # a lazy stack among them with no stacked value for key
            return _new_stack(tds, d, None)
        if all(isinstance(v, TensorDictBaseLike) for v in values) and not any(
            getattr(type(v), "_is_tensorclass", False) for v in values
        ):
            source[key] = maybe_dense_stack(values, d)
            continue
        out = stack_or_lazy([td.select(key) for td in tds], d)
        if is_lazy(out):
            return _new_stack(tds, d, None)
        source[key] = out._get_str(key, None)
    new_bs = torch.Size([*bs[:d], len(tds), *bs[d:]])
    result = tds[0]._new_dense(source, new_bs)
    devices = {td.device for td in tds}
    result._device = devices.pop() if len(devices) == 1 else None
    return result


def _same_keys(tds: Sequence[Any]) -> bool:
    keys = set(tds[0].keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor))
    return all(
        set(td.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)) == keys
        for td in tds[1:]
    )


def _all_same_bs(tds: Sequence[Any]) -> bool:
    return all(td.batch_size == tds[0].batch_size for td in tds[1:])


def _stack_lazy_members(tds: Sequence[Any], dim: int, dense: bool) -> Any:
    sd = tds[0].stack_dim
    n = len(tds[0].tensordicts)
    if not all(td.stack_dim == sd and len(td.tensordicts) == n for td in tds):
        return _new_stack(tds, dim, None)
    member_dim = dim if dim <= sd else dim - 1
    members = [
        maybe_dense_stack([td.tensordicts[k] for td in tds], member_dim)
        if dense
        else _new_stack([td.tensordicts[k] for td in tds], member_dim, None)
        for k in range(n)
    ]
    return _new_stack(members, sd + 1 if dim <= sd else sd, None)


def cat_lazy(tds: Sequence[Any], dim: int) -> Any:
    """``torch.cat`` with a lazy stack among the inputs: a lazy stack (dense inputs are seen as
    stacks along the first lazy input's stack dim)."""
    ref = next(td for td in tds if is_lazy(td))
    sd = ref.stack_dim

    def members_of(td: Any) -> list[Any]:
        if is_lazy(td) and td.stack_dim == sd:
            return list(td.tensordicts)
        return list(td.unbind(sd))  # a dense input seen as a stack along sd

    parts = [members_of(td) for td in tds]
    if dim == sd:
        members = [m for part in parts for m in part]
        return _new_stack(members, sd, None) if members else None
    n = len(parts[0])
    if any(len(part) != n for part in parts):
        raise ShapeMismatchError(
            "cannot concatenate lazy stacks along a dim other than the stack dim unless they have "
            f"the same number of stacked tensordicts: got {[len(part) for part in parts]}."
        )
    member_dim = dim if dim < sd else dim - 1
    members = [cat([part[k] for part in parts], member_dim) for k in range(n)]
    return _new_stack(members, sd, None)


# ---------------------------------------------------------------------- padding
def pad_lazy(
    td: Any, widths: list[tuple[int, int]], value: float, inplace: bool, pad_member: Any
) -> Any:
    """``pad`` of a lazy stack: its members are padded along their dims, and members filled
    with ``value`` (``None`` for python objects) are added along the stack dim (negative widths
    drop members). ``pad_member(member, pad_size, inplace)`` pads one member.

    Raises:
        BatchSizeError: a width would give a dim a negative size (nothing is changed).
    """
    bs = td.batch_size
    for d, (n, (a, b)) in enumerate(zip(bs, widths)):
        if n + a + b < 0:
            raise BatchSizeError(
                f"pad: dim {d} of batch_size={list(bs)} padded by ({a}, {b}) would have a "
                "negative output size. Use widths that leave every dim at least 0."
            )
    sd = td.stack_dim
    before, after = widths[sd]
    member_pad = [w for d, pair in enumerate(widths) if d != sd for w in pair]
    members = list(td.tensordicts)
    if before < 0:
        members = members[-before:]
    if after < 0:
        members = members[: len(members) + after]
    padded = [pad_member(m, member_pad, inplace) for m in members]
    template = padded[0] if padded else pad_member(td.tensordicts[0], member_pad, False)
    fill = [_filled_like(template, value) for _ in range(max(before, 0) + max(after, 0))]
    new_members = fill[: max(before, 0)] + padded + fill[max(before, 0) :]
    if not inplace:
        return _new_stack(new_members, sd, None)
    td.tensordicts[:] = new_members
    td._member_batch_size = template.batch_size
    return td


def _filled_like(td: Any, value: float) -> Any:
    """A copy of ``td`` whose tensors hold ``value`` and python objects ``None``."""
    import numpy as np

    out = td.apply(lambda x: torch.full_like(x, value))
    for key in td.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
        entry = td.get(key)
        if isinstance(entry, (NonTensorData, NonTensorStack)):
            empty = np.full(tuple(entry.batch_size), None, dtype=object)
            out.set(key, NonTensorStack.from_array(empty, entry.device))
    return out
