"""Reductions over batch dimensions: sum, mean, prod, max/min, std/var, all/any.

With ``dim`` the reduction runs over batch dimensions of every leaf and the result is a tensordict
of the reduced batch size; without it each leaf is reduced entirely (``reduce=True``: to one
number over all leaves).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import torch

from tensordict.core.ops import OpsMixin
from tensordict.errors import BatchSizeError

__all__ = ["ReductionsMixin"]

_MISSING: Any = object()


class ReductionsMixin(OpsMixin):
    """Reductions over the batch dimensions (written on the tree walk of ``ops``)."""

    __slots__ = ()

    def _reduce_dims(self, dim: Any) -> tuple[int, ...]:
        bd = len(self.batch_size)
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        out = []
        for d in dims:
            if not -bd <= d < bd:
                raise BatchSizeError(
                    f"dim {d} is out of range for batch_size={list(self.batch_size)}: reductions "
                    f"run over batch dimensions, in [{-bd}, {bd - 1}]."
                )
            out.append(d % bd)
        return tuple(sorted(set(out)))

    def _reduce(
        self,
        name: str,
        fn: Callable[..., torch.Tensor],
        dim: Any,
        keepdim: bool,
        reduce: bool | None,
        **kw: Any,
    ) -> Any:
        if dim is None or dim is _MISSING:
            if reduce:
                leaves = [
                    fn(v.float() if name == "mean" else v, **kw).reshape(1)
                    for v in self._tensor_leaves()
                ]
                if not leaves:
                    raise ValueError(f"{name}() of a tensordict without tensors.")
                stacked = torch.cat(leaves)
                if name == "mean":
                    counts = torch.tensor([v.numel() for v in self._tensor_leaves()])
                    return (stacked * counts).sum() / counts.sum()
                combine: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
                    "sum": torch.sum,
                    "prod": torch.prod,
                    "max": torch.max,
                    "min": torch.min,
                }
                return combine.get(name, torch.sum)(stacked)
            return self._apply_leaves(lambda x: fn(x, **kw), batch_size=torch.Size([]))
        dims = self._reduce_dims(dim)
        bs = list(self.batch_size)
        new_bs = (
            [1 if i in dims else s for i, s in enumerate(bs)]
            if keepdim
            else [s for i, s in enumerate(bs) if i not in dims]
        )
        names = self._names_or_none()
        if names and not keepdim:
            names = [n for i, n in enumerate(names) if i not in dims]
        return self._apply_leaves(
            lambda x: fn(x, dim=dims, keepdim=keepdim, **kw),
            batch_size=torch.Size(new_bs),
            names=names if names and any(n is not None for n in names) else None,
            nested_extra=True,
        )

    def sum(
        self,
        dim: Any = None,
        keepdim: bool = False,
        *,
        dtype: Any = None,
        reduce: bool | None = None,
    ) -> Any:
        """Sum over batch dimensions (``dim=None``: each leaf summed entirely).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, 2)}, [3])
            >>> td.sum(dim=0)["a"]
            tensor([3., 3.])
        """
        kw = {"dtype": dtype} if dtype is not None else {}
        return self._reduce("sum", torch.sum, dim, keepdim, reduce, **kw)

    def nansum(self, dim: Any = None, keepdim: bool = False, *, reduce: bool | None = None) -> Any:
        return self._reduce("sum", torch.nansum, dim, keepdim, reduce)

    def mean(
        self,
        dim: Any = None,
        keepdim: bool = False,
        *,
        dtype: Any = None,
        reduce: bool | None = None,
    ) -> Any:
        """Mean over batch dimensions (``dim=None``: each leaf averaged entirely)."""
        kw = {"dtype": dtype} if dtype is not None else {}
        return self._reduce("mean", torch.mean, dim, keepdim, reduce, **kw)

    def nanmean(self, dim: Any = None, keepdim: bool = False, *, reduce: bool | None = None) -> Any:
        return self._reduce("mean", torch.nanmean, dim, keepdim, reduce)

    def prod(self, dim: Any = None, keepdim: bool = False, *, reduce: bool | None = None) -> Any:
        def prod(x: torch.Tensor, dim: Any = None, keepdim: bool = False) -> torch.Tensor:
            if dim is None:
                return torch.prod(x)
            for d in sorted(dim, reverse=True):
                x = torch.prod(x, dim=d, keepdim=keepdim)
            return x

        return self._reduce("prod", prod, dim, keepdim, reduce)

    def max(self, dim: Any = None, keepdim: bool = False, *, reduce: bool | None = None) -> Any:
        """Maximum over batch dimensions (values only)."""
        fn = torch.amax if dim is not None else torch.max
        return self._reduce("max", fn, dim, keepdim, reduce)

    def min(self, dim: Any = None, keepdim: bool = False, *, reduce: bool | None = None) -> Any:
        """Minimum over batch dimensions (values only)."""
        fn = torch.amin if dim is not None else torch.min
        return self._reduce("min", fn, dim, keepdim, reduce)

    def std(
        self,
        dim: Any = None,
        keepdim: bool = False,
        *,
        correction: int = 1,
        reduce: bool | None = None,
    ) -> Any:
        return self._reduce("std", torch.std, dim, keepdim, reduce, correction=correction)

    def var(
        self,
        dim: Any = None,
        keepdim: bool = False,
        *,
        correction: int = 1,
        reduce: bool | None = None,
    ) -> Any:
        return self._reduce("var", torch.var, dim, keepdim, reduce, correction=correction)

    def all(self, dim: Any = None) -> Any:
        """``True`` when every element of every tensor is true; with ``dim``, a tensordict.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2, 3)}, [2])
            >>> (td == 1).all()
            True
        """
        if dim is None:
            return builtins.all(bool(v.all()) for v in self._tensor_leaves())
        return self._reduce("all", torch.all, dim, False, None)

    def any(self, dim: Any = None) -> Any:
        """``True`` when some element of some tensor is true; with ``dim``, a tensordict."""
        if dim is None:
            return builtins.any(bool(v.any()) for v in self._tensor_leaves())
        return self._reduce("any", torch.any, dim, False, None)
