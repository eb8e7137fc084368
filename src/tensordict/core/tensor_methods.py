"""Tensor-like methods of a tensordict that upstream code uses: masks, ``where``, scans, autograd
helpers, ``new_*`` constructors and introspection (``dtype``, ``bytes``, ...).

Each one is a thin layer over a primitive that already exists (the tree walk of ``ops``,
boolean-mask indexing and its validate-then-write assignment, ``empty``), so lazy stacks and
tensorclasses get them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import torch

from tensordict.core.collection import TensorCollection
from tensordict.errors import BatchSizeError

__all__ = ["TensorMethodsMixin"]

T = TypeVar("T", bound="TensorMethodsMixin")


def _right_expand(t: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    """``t`` (shaped like leading dims of ``leaf``) viewed with trailing singleton dims."""
    return t.reshape(tuple(t.shape) + (1,) * (leaf.ndim - t.ndim))


def _size_arg(size: tuple[Any, ...]) -> torch.Size:
    if len(size) == 1 and not isinstance(size[0], int):
        return torch.Size(size[0])
    return torch.Size(size)


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
        if mask.dtype is not torch.bool or tuple(mask.shape) != bs[: mask.ndim] or not mask.ndim:
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

    def where(self: T, condition: torch.Tensor, other: Any, *, out: Any = None) -> T:
        """``self`` where ``condition`` (shaped like leading batch dims) is True, else ``other``.

        ``other`` is a tensordict with the same keys, a tensor or a number.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3)}, [3])
            >>> td.where(torch.tensor([True, False, True]), 5.0)["a"]
            tensor([0., 5., 0.])
        """
        cond = torch.as_tensor(condition, dtype=torch.bool)
        if tuple(cond.shape) != tuple(self.batch_size)[: cond.ndim]:
            raise BatchSizeError(
                f"where: condition of shape {list(cond.shape)} must match the leading batch dims "
                f"{list(self.batch_size)}."
            )
        td: Any = self
        src = td.to_tensordict() if type(self).__name__ == "LazyStackedTensorDict" else td

        def pick(x: torch.Tensor, *y: Any) -> torch.Tensor:
            return torch.where(_right_expand(cond, x), x, y[0] if y else other)

        if isinstance(other, TensorCollection):
            result = src._apply_leaves(pick, other)
        else:
            result = src._apply_leaves(pick)
        if out is not None:
            return out.update_(result)  # type: ignore[no-any-return]
        return result  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ along a batch dim
    def _batch_dim(self, dim: int, what: str) -> int:
        bd = len(self.batch_size)
        if not -bd <= dim < bd:
            raise BatchSizeError(
                f"{what}: dim={dim} is out of range for batch_size={list(self.batch_size)}; it "
                f"works along a batch dimension, in [{-bd}, {bd - 1}]."
            )
        return dim % bd

    def cumsum(self: T, dim: int, dtype: torch.dtype | None = None) -> T:
        """Cumulative sum of every entry along batch dimension ``dim``."""
        d = self._batch_dim(dim, "cumsum")
        return self._apply_leaves(lambda x: torch.cumsum(x, d, dtype=dtype))  # type: ignore[no-any-return]

    def softmax(self: T, dim: int, dtype: torch.dtype | None = None) -> T:
        """Softmax of every entry along batch dimension ``dim``."""
        d = self._batch_dim(dim, "softmax")
        return self._apply_leaves(lambda x: torch.softmax(x, d, dtype=dtype))  # type: ignore[no-any-return]

    def clamp_min(self: T, min: Any) -> T:
        return self._apply_leaves(lambda x: x.clamp_min(min))  # type: ignore[no-any-return]

    def clamp_max(self: T, max: Any) -> T:
        return self._apply_leaves(lambda x: x.clamp_max(max))  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ autograd
    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        """Set ``requires_grad`` on every (floating point) entry, in place."""
        for t in self._leaves():
            t.requires_grad_(requires_grad)
        return self

    @property
    def requires_grad(self) -> bool:
        """Whether any entry requires grad."""
        return any(t.requires_grad for t in self._leaves())

    @property
    def data(self: T) -> T:
        """The entries' ``.data`` (detached, sharing storage)."""
        return self._apply_leaves(lambda x: x.data)  # type: ignore[no-any-return]

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
    def _new_filled(self, size: torch.Size, make: Any) -> Any:
        n = len(self.batch_size)
        return self._apply_leaves(lambda x: make(x, (*size, *x.shape[n:])), batch_size=size)

    def new_zeros(self, *size: Any, dtype: torch.dtype | None = None, device: Any = None) -> Any:
        """A tensordict of batch size ``size``, same keys and trailing shapes, filled with 0.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, 2)}, [3])
            >>> td.new_zeros(5)["a"].shape
            torch.Size([5, 2])
        """
        size = _size_arg(size)
        return self._new_filled(
            size, lambda x, s: x.new_zeros(s, dtype=dtype or x.dtype, device=device or x.device)
        )

    def new_ones(self, *size: Any, dtype: torch.dtype | None = None, device: Any = None) -> Any:
        size = _size_arg(size)
        return self._new_filled(
            size, lambda x, s: x.new_ones(s, dtype=dtype or x.dtype, device=device or x.device)
        )

    def new_empty(self, *size: Any, dtype: torch.dtype | None = None, device: Any = None) -> Any:
        size = _size_arg(size)
        return self._new_filled(
            size, lambda x, s: x.new_empty(s, dtype=dtype or x.dtype, device=device or x.device)
        )

    def new_full(
        self,
        size: Sequence[int],
        fill_value: Any,
        *,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> Any:
        return self._new_filled(
            torch.Size(size),
            lambda x, s: x.new_full(
                s, fill_value, dtype=dtype or x.dtype, device=device or x.device
            ),
        )

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
        """The bytes of all entries (shared tensors once unless asked)."""
        return sum(t.numel() * t.element_size() for t in self._unique_leaves(count_duplicates))

    def _unique_leaves(self, count_duplicates: bool) -> list[torch.Tensor]:
        leaves = self._leaves()
        if count_duplicates:
            return leaves
        seen: dict[int, torch.Tensor] = {}
        for t in leaves:
            seen.setdefault(id(t), t)
        return list(seen.values())
