"""Shape operations over batch dimensions: reshape, view, permute, transpose, squeeze, unsqueeze,
expand, flatten, unflatten, gather.

Every operation is one function ``leaf_fn(tensor) -> tensor`` acting on the leading (batch)
dimensions and leaving feature dimensions alone; :meth:`ShapeMixin._transform` applies it to every
leaf, to nested tensordicts (which may have extra batch dimensions) and to non-tensor data. The new
batch size is ``leaf_fn`` applied to a meta tensor of the batch shape. Torch decides what is a view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from tensordict.core import factory
from tensordict.core.behaviour.autograd import refuse_out_with_grad
from tensordict.core.behaviour.storage import keep_storage_flags
from tensordict.core.collection import TensorCollection
from tensordict.core.nontensor.data import MetaData, NonTensorData, NonTensorStack
from tensordict.core.options import lazy_legacy
from tensordict.core.unbatched import is_unbatched, rebatch
from tensordict.errors import BatchSizeError, DimIndexError, InplaceNotSupportedError

__all__ = ["ShapeMixin", "nested_names", "normalize_dim"]


def normalize_dim(dim: int, ndim: int, batch_size: torch.Size, what: str, extra: int = 0) -> int:
    """A non-negative batch dimension (``extra=1`` for ops that insert one, like unsqueeze)."""
    n = ndim + extra
    if not -n <= dim < n:  # an IndexError too, as torch and upstream raise
        raise DimIndexError(
            f"{what}: dim {dim} is out of range for batch_size={list(batch_size)} "
            f"(expected a dim in [{-n}, {n - 1}]). Shape operations act on batch dimensions only."
        )
    return dim % n if n else 0


def _written_back(source: Any, out: Any, inverse: Callable[[Any], Any]) -> Any:
    """``out`` set up so that ``with source.view(...) as out:`` (any shape op with an inverse)
    brings the entries the block sets in ``out`` back to ``source`` on exit, as upstream."""
    write_back = getattr(source, "_written_back_on_exit", None)
    if write_back is None or out is source or not hasattr(type(out), "_last_op"):
        return out
    return write_back(out, inverse)


def _unsqueezed(td: Any, dims: Sequence[int]) -> Any:
    """``td`` with a batch dim of size 1 inserted at each of ``dims`` (the inverse of a squeeze
    of those dims)."""
    for d in sorted(dims):
        td = td.unsqueeze(d)
    return td


def broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """Whether a tensor of ``shape`` can be written into one of ``target`` (torch broadcasting).

    A plain check on purpose: ``torch.broadcast_shapes`` imports sympy on its first call in a
    process (~0.5 s and ~30 MiB, paid by every worker that writes its results in place).

    Examples:
        >>> broadcasts_to((3, 1), (2, 3, 4)), broadcasts_to((3, 2), (3, 4))
        (True, False)
    """
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def nested_names(
    names: list[str | None] | None, ndim: int, nested: Any, parent_dims: int
) -> list[str | None] | None:
    """The names of a nested tensordict in a result whose batch dims are named ``names``.

    ``nested`` keeps the names of its own batch dims past the parent's ``parent_dims``.
    """
    extra = nested._names_or_none() if hasattr(nested, "_names_or_none") else None
    extra_names = list(extra[parent_dims:]) if extra else []
    if names is None and not any(n is not None for n in extra_names):
        return None
    return (list(names) if names else [None] * ndim) + extra_names


def _legacy_view(td: Any, op: str, **kwargs: Any) -> Any:
    """Upstream's legacy lazy mode: the shape op as a lazy view of ``td`` (``core.lazy.views``);
    a class with ``_lazy_shape_view`` (TensorDictParams) makes its own."""
    own = getattr(type(td), "_lazy_shape_view", None)
    if own is not None:
        return own(td, op, **kwargs)
    return factory.lazy_shape_view(td, op, **kwargs)


def _sizes(args: tuple[Any, ...]) -> list[int]:
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        return [int(s) for s in args[0]]
    return [int(s) for s in args]


def _as_stack(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """Mark a shape function after which non-tensor data holds one value per element."""
    fn.non_tensor_as_stack = True  # type: ignore[attr-defined]
    return fn


class ShapeMixin(TensorCollection):
    """Shape operations acting on the batch dimensions."""

    __slots__ = ()

    def _transform(
        self,
        leaf_fn: Callable[[torch.Tensor], torch.Tensor],
        batch_size: torch.Size | None = None,
        names: list[str | None] | None = None,
    ) -> Any:
        """Apply a batch-dims-only shape function to every leaf.

        ``names`` are the result's dimension names; nested tensordicts get them followed by the
        names of their own extra batch dimensions.
        """
        if batch_size is None:
            batch_size = leaf_fn(torch.empty(self.batch_size, device="meta")).shape
        out: dict[str, Any] = {}
        bd = len(self.batch_size)
        for key, value in self._own_items():
            if isinstance(value, torch.Tensor):
                out[key] = rebatch(value, batch_size) if is_unbatched(value) else leaf_fn(value)
            elif isinstance(value, NonTensorData):
                if getattr(leaf_fn, "non_tensor_as_stack", False) and not isinstance(
                    value, MetaData
                ):  # upstream's unsqueeze/expand give one element per batch element
                    out[key] = value.maybe_to_stack()._transform(leaf_fn)
                else:
                    out[key] = value._with_batch_size(batch_size)
            elif isinstance(value, NonTensorStack):
                out[key] = value._transform(leaf_fn)
            elif isinstance(value, ShapeMixin) or getattr(type(value), "_is_tensorclass", False):
                extra = value.batch_size[bd:]
                out[key] = value._transform(
                    leaf_fn,
                    batch_size + extra if extra else batch_size,
                    nested_names(names, len(batch_size), value, bd),
                )
            else:
                out[key] = leaf_fn(value)
        result = self._new_dense(out, torch.Size(batch_size), names)
        if self.is_locked:  # shape operations keep the lock, as upstream
            result._set_locked(True)
        return result

    def reshape(self, *shape: Any, size: Sequence[int] | None = None) -> Any:
        """Reshape the batch dimensions (copies only where torch must); the shape comes as
        ints, one sequence or ``size=``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(6, 2)}, [6])
            >>> td.reshape(2, 3)["a"].shape
            torch.Size([2, 3, 2])
        """
        if size is not None:
            if shape:
                raise TypeError("reshape() takes the shape as arguments or size=, not both.")
            shape = (tuple(size),)
        sizes = _sizes(shape)
        bd = len(self.batch_size)
        try:
            new_bs = torch.empty(self.batch_size, device="meta").reshape(sizes).shape
        except RuntimeError as err:
            raise BatchSizeError(
                f"cannot reshape batch_size={list(self.batch_size)} to {sizes}: {err}"
            ) from None
        names = self._names_or_none() if new_bs == self.batch_size else None
        return self._transform(lambda t: t.reshape((*new_bs, *t.shape[bd:])), new_bs, names)

    def _inplace_result(self, result: Any, inplace: bool, what: str) -> Any:
        """``result``, or with ``inplace`` this tensordict made to hold it (nested tensordicts
        keep their identity, the old leaves are released)."""
        if not inplace:
            return result
        assume = getattr(self, "_assume", None)
        if assume is None:
            raise NotImplementedError(
                f"{what}(inplace=True) is not supported on a {type(self).__name__}: its entries "
                f"live in its members. Use the out-of-place {what}() and keep the result."
            )
        try:
            return assume(result)
        except InplaceNotSupportedError as err:  # (a lazy stack: only member-wise results)
            raise InplaceNotSupportedError(
                f"{what}(inplace=True) is not supported on a {type(self).__name__}: {err}"
            ) from None

    def view(self, *shape: Any, batch_size: Sequence[int] | None = None) -> Any:
        """View the batch dimensions with a new shape (never copies; raises where torch would),
        or every leaf as a ``dtype`` (``batch_size``: the result's, when the leaves' last dim
        changes size with the dtype).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
            >>> td.view(6).batch_size, td.view(torch.uint8, batch_size=[2])["a"].shape
            (torch.Size([6]), torch.Size([2, 12]))
        """
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            dtype = shape[0]
            if batch_size is not None:
                return self._transform(lambda t: t.view(dtype), torch.Size(batch_size))
            return self._transform(lambda t: t.view(dtype), self.batch_size, self._names_or_none())
        if batch_size is not None:
            raise TypeError("view(): batch_size= goes with a dtype view, not with a shape.")
        sizes = _sizes(shape)
        bd = len(self.batch_size)
        try:
            new_bs = torch.empty(self.batch_size, device="meta").view(sizes).shape
        except RuntimeError as err:
            raise BatchSizeError(
                f"cannot view batch_size={list(self.batch_size)} as {sizes}: {err}"
            ) from None
        if new_bs != self.batch_size and lazy_legacy():
            return _legacy_view(self, "view", size=new_bs)
        names = self._names_or_none() if new_bs == self.batch_size else None
        try:
            out = self._transform(lambda t: t.view((*new_bs, *t.shape[bd:])), new_bs, names)
        except RuntimeError as err:
            raise BatchSizeError(
                f"Cannot call `view` with {sizes} on this tensordict of batch_size="
                f"{list(self.batch_size)}: a leaf's memory layout does not allow it ({err}). Use "
                "reshape() instead (it copies where needed)."
            ) from None
        old_bs = self.batch_size
        keep_storage_flags(self, out)  # (as upstream: a view stays shared / memory-mapped)
        # (reshape, not view: a view viewed back is its source itself, the block's entries lost)
        return _written_back(self, out, lambda o: o.reshape(old_bs))

    def permute(self, *dims: Any) -> Any:
        """Permute the batch dimensions (the identity order returns ``self``, as upstream).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3])
            >>> td.permute(1, 0)["a"].shape
            torch.Size([3, 2, 4])
        """
        order = _sizes(dims)
        bd = len(self.batch_size)
        if len(order) != bd:
            raise BatchSizeError(
                f"number of dims don't match in permute (got {len(order)}, expected {bd}): "
                f"{order} for batch_size={list(self.batch_size)}. Give an order of all {bd} "
                "batch dimensions."
            )
        order = [normalize_dim(d, bd, self.batch_size, "permute") for d in order]
        if sorted(order) != list(range(bd)):
            raise BatchSizeError(
                f"repeated dim in permute: {order} is not a permutation of range({bd}). "
                "Give each batch dimension once."
            )
        if order == list(range(bd)):
            return self
        if lazy_legacy():
            return _legacy_view(self, "permute", dims=order)
        names = self._names_or_none()
        new_names = [names[d] for d in order] if names else None
        out = self._transform(
            lambda t: t.permute(*order, *range(bd, t.ndim)),
            torch.Size([self.batch_size[d] for d in order]),
            new_names,
        )
        inverse = [order.index(d) for d in range(bd)]  # (entries set in `with` come back)
        keep_storage_flags(self, out)
        return _written_back(self, out, lambda o: o.permute(*inverse))

    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swap two batch dimensions."""
        bd = len(self.batch_size)
        if not (-bd <= dim0 < bd and -bd <= dim1 < bd):
            lead = (  # (upstream's wording differs in its legacy lazy mode)
                "The provided dimensions are incompatible with the tensordict batch-size"
                if lazy_legacy()
                else "dim0 and dim1 must be within the range of the number of dimensions"
            )
            raise BatchSizeError(
                f"{lead}: got "
                f"{dim0} and {dim1} for batch_size={list(self.batch_size)}, expected dims in "
                f"[{-bd}, {bd - 1}]. The provided dimensions are incompatible with the tensordict "
                "batch-size: shape operations act on batch dimensions only."
            )
        d0, d1 = dim0 % bd, dim1 % bd
        if lazy_legacy() and d0 != d1:
            return _legacy_view(self, "transpose", dim0=min(d0, d1), dim1=max(d0, d1))
        order = list(range(bd))
        order[d0], order[d1] = order[d1], order[d0]
        return self.permute(order)

    def squeeze(self, dim: int | None = None) -> Any:
        """Remove batch dimensions of size 1 (only ``dim`` when given)."""
        bs = self.batch_size
        bd = len(bs)
        if dim is None:
            dims = [i for i, s in enumerate(bs) if s == 1]
        else:
            d = normalize_dim(dim, bd, bs, "squeeze")
            dims = [d] if bs[d] == 1 else []
        if not dims:
            return self  # nothing to squeeze (as upstream)
        if lazy_legacy():
            return _legacy_view(self, "squeeze", dim=dims[0] if dim is not None else tuple(dims))
        new_bs = torch.Size([s for i, s in enumerate(bs) if i not in dims])
        names = self._names_or_none()
        new_names = [n for i, n in enumerate(names) if i not in dims] if names else None
        out = keep_storage_flags(
            self, self._transform(lambda t: t.squeeze(tuple(dims)), new_bs, new_names)
        )
        return _written_back(self, out, lambda o: _unsqueezed(o, dims))

    def unsqueeze(self, dim: int) -> Any:
        """Insert a batch dimension of size 1 at ``dim``."""
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "unsqueeze", extra=1)
        if lazy_legacy():
            return _legacy_view(self, "unsqueeze", dim=d)
        new_bs = torch.Size([*bs[:d], 1, *bs[d:]])
        names = self._names_or_none()
        new_names = [*names[:d], None, *names[d:]] if names else None
        out = keep_storage_flags(
            self, self._transform(_as_stack(lambda t: t.unsqueeze(d)), new_bs, new_names)
        )
        return _written_back(self, out, lambda o: o.squeeze(d))

    def expand(self, *shape: Any) -> Any:
        """Expand to a larger batch size (new leading dims, or size-1 dims broadcast)."""
        sizes = _sizes(shape)
        bs = self.batch_size
        if len(sizes) < len(bs):
            raise BatchSizeError(
                f"expand got {sizes}, shorter than batch_size={list(bs)}: give at least "
                f"{len(bs)} sizes."
            )
        try:
            new_bs = torch.empty(bs, device="meta").expand(sizes).shape
        except RuntimeError as err:
            raise BatchSizeError(f"cannot expand batch_size={list(bs)} to {sizes}: {err}") from None
        bd = len(bs)
        names = self._names_or_none()
        new_names = [*[None] * (len(new_bs) - bd), *names] if names else None
        return self._transform(
            _as_stack(lambda t: t.expand((*new_bs, *t.shape[bd:]))), new_bs, new_names
        )

    def expand_as(self, other: Any) -> Any:
        """Expand to ``other``'s batch shape; with a tensordict, every entry to the shape of
        ``other``'s entry of the same key (as upstream)."""
        if isinstance(other, TensorCollection):
            return self._apply_leaves(
                lambda x, y: x.expand_as(y), other, batch_size=other.batch_size
            )
        return self.expand(other.batch_size if hasattr(other, "batch_size") else other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        """Merge the batch dimensions ``start_dim..end_dim`` into one."""
        bs = self.batch_size
        bd = len(bs)
        if bd == 0:
            return self.unsqueeze(0)
        s = normalize_dim(start_dim, bd, bs, "flatten")
        e = normalize_dim(end_dim, bd, bs, "flatten")
        if e < s:
            raise BatchSizeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}.")
        new_bs = torch.Size([*bs[:s], bs[s : e + 1].numel(), *bs[e + 1 :]])
        names = self._names_or_none()
        new_names = [*names[:s], None, *names[e + 1 :]] if names else None
        out = self._transform(lambda t: t.flatten(s, e), new_bs, new_names)
        merged = list(bs[s : e + 1])
        return _written_back(self, out, lambda o: o.unflatten(s, merged))

    def unflatten(self, dim: int, unflattened_size: Sequence[int]) -> Any:
        """Split batch dimension ``dim`` into ``unflattened_size``."""
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "unflatten")
        sizes = list(unflattened_size)
        try:
            new_bs = torch.empty(bs, device="meta").unflatten(d, sizes).shape
        except RuntimeError as err:
            raise BatchSizeError(
                f"cannot unflatten dim {dim} of batch_size={list(bs)} into {sizes}: {err}"
            ) from None
        names = self._names_or_none()
        # (upstream keeps the dimension's name on the last of the new dims)
        new_names = [*names[:d], *[None] * (len(sizes) - 1), *names[d:]] if names else None
        out = self._transform(lambda t: t.unflatten(d, sizes), new_bs, new_names)
        return _written_back(self, out, lambda o: o.flatten(d, d + len(sizes) - 1))

    def gather(
        self, dim: int, index: torch.Tensor, out: Any = None, *, inplace: bool = False
    ) -> Any:
        """Gather along a batch dimension with an index of the new batch shape (like torch).

        ``out`` receives the result; ``inplace=True`` makes this tensordict hold it.
        """
        if out is not None and inplace:
            raise ValueError(
                "gather: out= and inplace=True are mutually exclusive: give one or the other."
            )
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "gather")
        n, bd = index.ndim, len(bs)
        if n > bd or d >= max(n, 1):
            raise BatchSizeError(
                f"gather: an index of {n} dims along dim {dim} does not fit batch_size={list(bs)}: "
                "give an index with at most one dim per batch dim, reaching dim, as torch.gather."
            )
        if out is not None:
            refuse_out_with_grad("gather", out, [self])
        if inplace and n != bd:
            raise NotImplementedError(
                f"gather(inplace=True) requires index.ndim == self.batch_dims so the result keeps "
                f"the same number of batch dims; got index.ndim={n} and batch_dims={bd}. Use "
                "inplace=False instead."
            )

        def leaf_fn(t: torch.Tensor) -> torch.Tensor:
            extra = t.shape[n:]  # (as upstream: the index spreads over the dims it lacks)
            idx = index.reshape((*index.shape, *([1] * len(extra)))).expand((*index.shape, *extra))
            return torch.gather(t, d, idx)

        names = self._names_or_none() if n == bd else None
        result = self._transform(leaf_fn, index.shape + bs[n:], names)
        if n < bd:
            result.batch_size = index.shape
        if result.is_locked:  # (gather gives an unlocked result, as upstream)
            result._set_locked(False)
        if out is not None:
            return out.update(result, inplace=True)
        return self._inplace_result(result, inplace, "gather")

    def repeat_interleave(
        self,
        repeats: int | torch.Tensor,
        dim: int | None = None,
        *,
        output_size: int | None = None,
        inplace: bool = False,
    ) -> Any:
        """Repeat each element along a batch dimension (the flattened batch when ``dim`` is None).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.arange(3), batch_size=[3])
            >>> td.repeat_interleave(2, dim=0)["a"]
            tensor([0, 0, 1, 1, 2, 2])
        """
        if inplace:  # (this tensordict takes the result's leaves)
            out = self.repeat_interleave(repeats, dim, output_size=output_size)
            return self._inplace_result(out, True, "repeat_interleave")
        if dim is None:
            return self.flatten(0, -1).repeat_interleave(repeats, 0, output_size=output_size)
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "repeat_interleave")
        if isinstance(repeats, torch.Tensor) and repeats.numel() > 1:
            length = int(repeats.sum())
        else:
            length = bs[d] * int(repeats)
        new_bs = torch.Size([*bs[:d], length, *bs[d + 1 :]])

        def leaf_fn(t: torch.Tensor) -> torch.Tensor:
            return torch.repeat_interleave(t, repeats, dim=d, output_size=output_size)

        return self._transform(leaf_fn, new_bs, self._names_or_none())

    def tensor_split(
        self, indices_or_sections: int | Sequence[int] | torch.Tensor, dim: int = 0
    ) -> tuple[Any, ...]:
        """Split along a batch dimension as ``torch.tensor_split`` does (views of this one).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.arange(6), batch_size=[6])
            >>> [part.batch_size[0] for part in td.tensor_split((1, 4))]
            [1, 3, 2]
        """
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "tensor_split")
        positions = torch.arange(bs[d])
        if isinstance(indices_or_sections, torch.Tensor) and indices_or_sections.ndim == 0:
            indices_or_sections = int(indices_or_sections)
        parts = torch.tensor_split(positions, indices_or_sections)  # type: ignore[arg-type]
        out = []
        start = 0
        for part in parts:
            end = start + part.numel()
            out.append(self[(slice(None),) * d + (slice(start, end),)])  # type: ignore[index]
            start = end
        return tuple(out)

    def flip(self, dims: int | Sequence[int]) -> Any:
        bs = self.batch_size
        dims_l = [dims] if isinstance(dims, int) else list(dims)
        dims_l = [normalize_dim(d, len(bs), bs, "flip") for d in dims_l]
        return self._transform(lambda t: t.flip(dims_l), bs, self._names_or_none())

    # -------------------------------------------------- torch's shape functions on batch dims
    def _dims(self, dims: Any, what: str) -> list[int]:
        bs = self.batch_size
        dims_l = [dims] if isinstance(dims, int) else list(dims)
        return [normalize_dim(d, len(bs), bs, what) for d in dims_l]

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
        """Move batch dims ``source`` to positions ``destination`` (as ``torch.movedim``; a
        move that changes nothing returns ``self``, as upstream).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3])
            >>> td.movedim(0, 1)["a"].shape
            torch.Size([3, 2, 4])
        """
        src, dst = self._dims(source, "movedim"), self._dims(destination, "movedim")
        if len(src) != len(dst):
            raise BatchSizeError(
                f"movedim: source and destination must have the same number of elements, got "
                f"{len(src)} and {len(dst)} (source={src}, destination={dst})."
            )
        for name, dims in (("source", src), ("destination", dst)):
            if len(set(dims)) != len(dims):
                raise BatchSizeError(
                    f"movedim: repeated dim in {name} {dims}: give each batch dim once."
                )
        order: list[int | None] = [None] * len(self.batch_size)
        for s_, d_ in zip(src, dst, strict=True):
            order[d_] = s_
        rest = iter(d for d in range(len(order)) if d not in src)
        return self.permute(*[next(rest) if d is None else d for d in order])

    moveaxis = movedim

    def swapdims(self, dim0: int, dim1: int) -> Any:
        """Swap two batch dims (as ``torch.swapdims``)."""
        return self.transpose(dim0, dim1)

    swapaxes = swapdims

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """The batch elements ``start:start + length`` along ``dim`` (a view, as
        ``torch.narrow``)."""
        d = self._dims(dim, "narrow")[0]
        return self[(slice(None),) * d + (slice(start, start + length),)]  # type: ignore[index]

    def roll(
        self,
        shifts: int | Sequence[int],
        dims: int | Sequence[int] | None = None,
        *,
        inplace: bool = False,
    ) -> Any:
        """Roll along batch dims (``dims=None``: over the flattened batch, as ``torch.roll``).

        Examples:
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.arange(3)}, [3]).roll(1)["a"]
            tensor([2, 0, 1])
        """
        if inplace:
            return self._inplace_result(self.roll(shifts, dims), True, "roll")
        bs = self.batch_size
        if dims is None:
            bd = len(bs)
            return self._transform(
                lambda t: t.reshape(-1, *t.shape[bd:]).roll(shifts, 0).reshape(t.shape),
                bs,
                self._names_or_none(),
            )
        dims_l = self._dims(dims, "roll")
        return self._transform(lambda t: t.roll(shifts, dims_l), bs, self._names_or_none())

    def _require_batch_dims(self, n: int, what: str) -> None:
        if len(self.batch_size) < n:
            raise BatchSizeError(
                f"{what} requires at least {n} batch dimension{'s' if n > 1 else ''}, got "
                f"batch_size={list(self.batch_size)}. Add dims first (e.g. unsqueeze)."
            )

    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> Any:
        """Rotate by 90 degrees ``k`` times in the plane of two batch dims.

        Examples:
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(2, 3)}, [2, 3]).rot90().batch_size
            torch.Size([3, 2])
        """
        self._require_batch_dims(2, "rot90")
        if len(dims) != 2:
            raise BatchSizeError(f"rot90 requires exactly 2 dims, got dims={list(dims)}.")
        dims_l = self._dims(dims, "rot90")
        return self._transform(lambda t: t.rot90(k, dims_l))

    def fliplr(self) -> Any:
        """Flip batch dim 1 (left/right)."""
        self._require_batch_dims(2, "fliplr")
        return self.flip(1)

    def flipud(self) -> Any:
        """Flip batch dim 0 (up/down)."""
        self._require_batch_dims(1, "flipud")
        return self.flip(0)

    def tile(self, dims: Sequence[int]) -> Any:
        """Repeat the batch ``dims`` times along each batch dim (as ``torch.tile``: a shorter
        ``dims`` is padded with ones on the left, a longer one adds leading batch dims)."""
        bd = len(self.batch_size)
        reps = [int(r) for r in ([dims] if isinstance(dims, int) else dims)]
        reps = [1] * (bd - len(reps)) + reps
        return self._transform(lambda t: t.tile([*reps, *([1] * (t.ndim - bd))]))

    def broadcast_to(self, shape: Sequence[int]) -> Any:
        """Broadcast the batch dims to ``shape`` (as ``torch.broadcast_to``)."""
        size = torch.Size(shape)
        bd = len(self.batch_size)
        return self._transform(lambda t: t.broadcast_to(*size, *t.shape[bd:]), size)

    def _atleast(self, n: int) -> Any:
        bs = self.batch_size
        if len(bs) >= n:
            return self
        new_bs = torch.Size([1] * (n - len(bs)) + list(bs))
        bd = len(bs)
        return self._transform(lambda t: t.reshape((*new_bs, *t.shape[bd:])), new_bs)

    def atleast_1d(self) -> Any:
        """At least one batch dim (leading ones added, as upstream)."""
        return self._atleast(1)

    def atleast_2d(self) -> Any:
        """At least two batch dims (leading ones added)."""
        return self._atleast(2)

    def atleast_3d(self) -> Any:
        """At least three batch dims (leading ones added)."""
        return self._atleast(3)

    def repeat(self, *repeats: int, inplace: bool = False) -> Any:
        """Repeat along the batch dims like ``torch.Tensor.repeat`` (``inplace``: in self)."""
        reps = _sizes(repeats)
        bd = len(self.batch_size)
        names = self._names_or_none() if len(reps) == bd else None
        result = self._transform(lambda t: t.repeat(*reps, *([1] * (t.ndim - bd))), None, names)
        return self._inplace_result(result, inplace, "repeat")
