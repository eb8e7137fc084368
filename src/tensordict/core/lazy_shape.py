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

from tensordict.core.shape import normalize_dim
from tensordict.errors import BatchSizeError, ShapeMismatchError

__all__ = ["LazyShapeMixin", "cat_lazy", "stack_lazy"]


def _sizes(args: tuple[Any, ...]) -> list[int]:
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        return [int(s) for s in args[0]]
    return [int(s) for s in args]


def _new_stack(members: Sequence[Any], stack_dim: int, like: Any) -> Any:
    from tensordict.core.lazy_stack import LazyStackedTensorDict

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
            return _new_stack(self._members_op("unsqueeze", d), sd + 1, self)
        return _new_stack(self._members_op("unsqueeze", d - 1), sd, self)

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
            return self.tensordicts[0]
        if d < sd:
            return _new_stack(self._members_op("squeeze", d), sd - 1, self)
        return _new_stack(self._members_op("squeeze", d - 1), sd, self)

    def permute(self, *dims: Any) -> Any:
        """Permute the batch dims: the members permute theirs, the stack dim moves."""
        order = _sizes(dims)
        bs = self.batch_size
        bd = len(bs)
        if len(order) != bd:
            raise BatchSizeError(
                f"permute got {len(order)} dims {order} for batch_size={list(bs)}: give an order "
                f"of all {bd} batch dimensions."
            )
        order = [normalize_dim(d, bd, bs, "permute") for d in order]
        if sorted(order) != list(range(bd)):
            raise BatchSizeError(f"permute: {order} is not a permutation of range({bd}).")
        sd = self.stack_dim
        member_order = [o - (o > sd) for o in order if o != sd]
        return _new_stack(self._members_op("permute", member_order), order.index(sd), self)

    # ------------------------------------------------------------------ regrouping
    def view(self, *shape: Any) -> Any:
        """View with a new batch shape that merges adjacent dims or splits one dim.

        Raises:
            BatchSizeError: the new shape does more than merge or split dims (use reshape).
        """
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            return _new_stack(self._members_op("view", shape[0]), self.stack_dim, self)
        new_bs = self._target_shape(_sizes(shape), "view")
        if new_bs == self.batch_size:
            return self
        out = self._regroup(new_bs) if self.batch_size.numel() else None
        if out is None:
            raise BatchSizeError(
                f"cannot view a lazy stack of batch_size={list(self.batch_size)} as "
                f"{list(new_bs)}: a view of a lazy stack can only merge adjacent dims or split "
                "one dim. Call reshape() instead (it copies when needed)."
            )
        return out

    def reshape(self, *shape: Any) -> Any:
        """Like :meth:`view`; any other shape gives a dense (copied) tensordict."""
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

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        """Merge the batch dims ``start_dim..end_dim`` (the elements become the members)."""
        bs = self.batch_size
        s = normalize_dim(start_dim, len(bs), bs, "flatten")
        e = normalize_dim(end_dim, len(bs), bs, "flatten")
        if e < s:
            raise BatchSizeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}.")
        if s == e:
            return self
        return self.reshape(*bs[:s], math.prod(bs[s : e + 1]), *bs[e + 1 :])

    def unflatten(self, dim: int, unflattened_size: Sequence[int]) -> Any:
        """Split batch dim ``dim`` into ``unflattened_size`` (nested stacks of slices)."""
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "unflatten")
        try:
            new_bs = torch.empty(bs, device="meta").unflatten(d, list(unflattened_size)).shape
        except RuntimeError as err:
            raise BatchSizeError(
                f"cannot unflatten dim {dim} of batch_size={list(bs)} into "
                f"{list(unflattened_size)}: {err}"
            ) from None
        return self.reshape(new_bs)

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


# ---------------------------------------------------------------------- stack and cat
def _is_lazy(td: Any) -> bool:
    return hasattr(td, "stack_dim") and hasattr(td, "tensordicts")


def stack_lazy(tds: Sequence[Any], dim: int) -> Any:
    """``torch.stack`` of lazy stacks sharing a stack dim and a member count: a lazy stack whose
    members stack the matching members (None when the inputs do not qualify)."""
    sd = tds[0].stack_dim
    n = len(tds[0].tensordicts)
    if not all(_is_lazy(td) and td.stack_dim == sd and len(td.tensordicts) == n for td in tds):
        return None
    from tensordict.core.combine import stack

    member_dim = dim if dim <= sd else dim - 1
    members = [stack([td.tensordicts[k] for td in tds], member_dim) for k in range(n)]
    return _new_stack(members, sd + 1 if dim <= sd else sd, None)


def cat_lazy(tds: Sequence[Any], dim: int) -> Any:
    """``torch.cat`` with a lazy stack among the inputs: a lazy stack (dense inputs are seen as
    stacks along the first lazy input's stack dim)."""
    from tensordict.core.combine import cat

    ref = next(td for td in tds if _is_lazy(td))
    sd = ref.stack_dim

    def members_of(td: Any) -> list[Any]:
        if _is_lazy(td) and td.stack_dim == sd:
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
