"""Reductions over batch dimensions: sum, mean, prod, max/min, std/var, all/any.

With ``dim`` the reduction runs over batch dimensions of every leaf and the result is a tensordict
of the reduced batch size; without it each leaf is reduced entirely (``reduce=True``: to one
number over all leaves).
"""

from __future__ import annotations

import builtins
import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tensordict.core.behaviour.ops import OpsMixin, refuse_object_stacks
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.unbatched import is_unbatched
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
        if not reduce and not isinstance(dim, str):
            refuse_object_stacks(self, name)
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
                    "amax": torch.max,
                    "amin": torch.min,
                }
                return combine.get(name, torch.sum)(stacked)
            return self._apply_leaves(
                lambda x: x if is_unbatched(x) else fn(x, **kw), batch_size=torch.Size([])
            )
        if isinstance(dim, str):
            return self._reduce_features(name, fn, dim, keepdim, bool(reduce), **kw)
        dims = self._reduce_dims(dim)
        if reduce:  # (as upstream: the leaves joined along the first reduced dim, then reduced)
            joined = torch.cat(self._tensor_leaves(), dims[0])
            return fn(joined, dim=dims, keepdim=keepdim, **kw)
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
            lambda x: x if is_unbatched(x) else fn(x, dim=dims, keepdim=keepdim, **kw),
            batch_size=torch.Size(new_bs),
            names=names if names and any(n is not None for n in names) else None,
            nested_extra=True,
        )

    def _reduce_features(
        self,
        name: str,
        fn: Callable[..., torch.Tensor],
        dim: str,
        keepdim: bool,
        reduce: bool,
        **kw: Any,
    ) -> Any:
        """``dim="feature"``: every leaf reduced over the dims past its tensordict's batch dims
        (a leaf without any keeps its values: reduced over one element). ``reduce``: one tensor
        of the batch shape, over the features of every leaf together."""
        if dim != "feature":
            raise ValueError(
                f"{name}(): dim must be an int, a tuple of ints or 'feature', got {dim!r}."
            )
        if keepdim:
            raise TypeError("dim='feature' is incompatible with keepdim=True.")
        if name in ("max", "min"):
            raise RuntimeError(
                f"reduction {name} must be called with call_on_nested=True when dim='feature'. "
                f"Use td.apply(lambda x: x.flatten({len(self.batch_size)}).{name}(-1).values)."
            )
        if reduce:
            bd = len(self.batch_size)
            leaves = [x.reshape(*x.shape[:bd], -1) for x in self._tensor_leaves()]
            dtype = functools.reduce(torch.promote_types, (x.dtype for x in leaves))
            return fn(torch.cat([x.to(dtype) for x in leaves], -1), dim=-1, **kw)
        return self._feature_walk(lambda x, bd: fn(x.reshape(*x.shape[:bd], -1), dim=-1, **kw))

    def _feature_walk(self, leaf: Callable[[torch.Tensor, int], torch.Tensor]) -> Any:
        bd = len(self.batch_size)
        out: dict[str, Any] = {}
        for key, value in self._own_items():
            if isinstance(value, torch.Tensor):
                out[key] = leaf(value, bd)
            elif getattr(type(value), "_is_tensorclass", False):
                out[key] = value._tensordict._feature_walk(leaf)
            elif isinstance(value, ReductionsMixin):
                out[key] = value._feature_walk(leaf)
            else:
                out[key] = value  # non-tensor data: carried over
        return self._new_dense(out, self.batch_size, self._names_or_none())

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

    def prod(
        self,
        dim: Any = None,
        keepdim: bool = False,
        *,
        dtype: Any = None,
        reduce: bool | None = None,
    ) -> Any:
        """Product over a batch dimension (``dim=None``: each leaf's product)."""

        def prod(
            x: torch.Tensor, dim: Any = None, keepdim: bool = False, **kw: Any
        ) -> torch.Tensor:
            if dim is None:
                return torch.prod(x, **kw)
            if isinstance(dim, int):
                return torch.prod(x, dim=dim, keepdim=keepdim, **kw)
            return torch.prod(x, dim=dim[0], keepdim=keepdim, **kw)

        if isinstance(dim, tuple):  # (as upstream: the first dim only, with a warning)
            _warn_first_dim_only("prod")
            dim = dim[0]
        kw = {"dtype": dtype} if dtype is not None else {}
        return self._reduce("prod", prod, dim, keepdim, reduce, **kw)

    def max(
        self,
        dim: Any = None,
        keepdim: bool = False,
        *,
        reduce: bool | None = None,
        return_indices: bool = True,
    ) -> Any:
        """Maximum over a batch dimension: ``(values, indices)`` as ``torch.max`` gives them
        (tensordicts), or the values only with ``return_indices=False``. Without ``dim``, each
        leaf's maximum.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 5.0], [3.0, 2.0]])}, [2])
            >>> values, indices = td.max(dim=0)
            >>> values["a"], indices["a"]
            (tensor([3., 5.]), tensor([1, 0]))
            >>> td.max(dim=0, return_indices=False)["a"]
            tensor([3., 5.])
        """
        return self._max_min("max", dim, keepdim, reduce, return_indices)

    def min(
        self,
        dim: Any = None,
        keepdim: bool = False,
        *,
        reduce: bool | None = None,
        return_indices: bool = True,
    ) -> Any:
        """Minimum over a batch dimension, as :meth:`max`."""
        return self._max_min("min", dim, keepdim, reduce, return_indices)

    def _max_min(
        self, name: str, dim: Any, keepdim: bool, reduce: bool | None, return_indices: bool
    ) -> Any:
        if dim is None or isinstance(dim, str):
            return self._reduce(name, getattr(torch, name), dim, keepdim, reduce)
        if isinstance(dim, tuple):  # (upstream reduces the first dim only, and warns)
            _warn_first_dim_only(name)
            dim = dim[0]
        amax = torch.amax if name == "max" else torch.amin
        values = self._reduce(name, amax, dim, keepdim, reduce)
        if not return_indices:
            return values
        arg = torch.argmax if name == "max" else torch.argmin
        values = values if reduce else values.exclude(*self._unbatched_keys())
        indices = self._reduce(
            name, lambda x, dim, keepdim: arg(x, dim[0], keepdim), dim, keepdim, reduce
        )
        indices = indices if reduce else indices.exclude(*self._unbatched_keys())
        result_type = torch.return_types.max if name == "max" else torch.return_types.min
        return result_type((values, indices))

    def _unbatched_keys(self) -> list[Any]:
        td: Any = self
        return [k for k, v in td.items(True, True, is_leaf=leaf_or_non_tensor) if is_unbatched(v)]

    def amax(self, dim: Any = None, keepdim: bool = False, *, reduce: bool | None = None) -> Any:
        """Maximum values over a batch dimension (``max(..., return_indices=False)``); without
        ``dim``, each leaf's maximum.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 5.0], [3.0, 2.0]])}, [2])
            >>> td.amax(dim=0)["a"]
            tensor([3., 5.])
        """
        if dim is None or dim is _MISSING:
            return self._reduce("amax", torch.amax, None, keepdim, reduce)
        return self._max_min("max", dim, keepdim, reduce, False)

    def amin(self, dim: Any = None, keepdim: bool = False, *, reduce: bool | None = None) -> Any:
        """Minimum values over a batch dimension, as :meth:`amax`."""
        if dim is None or dim is _MISSING:
            return self._reduce("amin", torch.amin, None, keepdim, reduce)
        return self._max_min("min", dim, keepdim, reduce, False)

    def cummax(self, dim: int, *, reduce: bool | None = None, return_indices: bool = True) -> Any:
        """Cumulative maximum along a batch dimension: ``(values, indices)`` as
        ``torch.cummax`` gives them (tensordicts of the same batch size), or the values only
        with ``return_indices=False``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1.0, 3.0, 2.0])}, [3])
            >>> values, indices = td.cummax(0)
            >>> values["a"], indices["a"]
            (tensor([1., 3., 3.]), tensor([0, 1, 1]))
        """
        return self._cumulative("cummax", dim, reduce, return_indices)

    def cummin(self, dim: int, *, reduce: bool | None = None, return_indices: bool = True) -> Any:
        """Cumulative minimum along a batch dimension, as :meth:`cummax`."""
        return self._cumulative("cummin", dim, reduce, return_indices)

    def _cumulative(self, name: str, dim: int, reduce: bool | None, return_indices: bool) -> Any:
        bd = len(self.batch_size)
        if not isinstance(dim, int) or not -bd <= dim < bd:
            raise IndexError(
                f"{name}(): dim must be a batch dimension in [{-bd}, {bd - 1}] of a tensordict "
                f"with batch_size={list(self.batch_size)}, got {dim!r}."
            )
        dim = dim % bd
        fn = getattr(torch, name)
        result_type = getattr(torch.return_types, name)
        if reduce:  # (as upstream: the leaves joined along dim, then one cumulative op)
            result = fn(torch.cat(self._tensor_leaves(), dim), dim)
            return result if return_indices else result.values
        values = self._apply_leaves(lambda x: x if is_unbatched(x) else fn(x, dim).values)
        if not return_indices:
            return values
        unbatched = self._unbatched_keys()  # (as upstream: no indices, so not in the result)
        values = values.exclude(*unbatched)
        indices = self._apply_leaves(lambda x: None if is_unbatched(x) else fn(x, dim).indices)
        return result_type((values, indices))

    def logsumexp(self, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
        """Log of the summed exponentials over batch dimensions (``dim=None``: all of them);
        nested tensordicts keep their extra batch dims. With ``out``, the results are written
        into that tensordict (its existing tensors in place) and it is returned.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2])
            >>> td.logsumexp(0)["a"]
            tensor([0.6931, 0.6931, 0.6931])
        """
        bd = len(self.batch_size)
        if dim is None or dim is _MISSING:
            dim = tuple(range(bd))
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        for d in dims:
            if not isinstance(d, int) or not -bd <= d < bd:
                raise ValueError(
                    f"The dimension {d} is incompatible with a tensordict with batch_size "
                    f"{self.batch_size}: logsumexp runs over batch dimensions."
                )
        dims = tuple(d % bd for d in dims)
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"logsumexp(): dim {dims} names a dimension more than once.")
        result = self._reduce("logsumexp", torch.logsumexp, dims, keepdim, None)
        if out is None:
            return result
        return _write_into(out, result)

    def quantile(
        self,
        q: float | torch.Tensor,
        dim: Any = None,
        keepdim: bool = False,
        *,
        interpolation: str = "linear",
        reduce: bool | None = None,
    ) -> Any:
        """The ``q``-th quantiles over a batch dimension (``torch.quantile``); without ``dim``,
        of each leaf; ``reduce=True``: of all leaves together; ``dim="feature"``: over the
        non-batch dims of each leaf.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(5.0)}, [5])
            >>> td.quantile(0.5, dim=0)["a"]
            tensor(2.)
        """

        def fn(x: torch.Tensor, dim: Any = None, keepdim: bool = False) -> torch.Tensor:
            if isinstance(dim, tuple):
                dim = dim[0]
            x = x if x.is_floating_point() else x.float()
            return torch.quantile(x, q, dim=dim, keepdim=keepdim, interpolation=interpolation)

        if dim is None and reduce:  # (over every element of every leaf)
            leaves = [x.reshape(-1) for x in self._tensor_leaves()]
            dtype = functools.reduce(torch.promote_types, (x.dtype for x in leaves))
            return fn(torch.cat([x.to(dtype) for x in leaves]))
        if dim is None or isinstance(dim, str):
            return self._reduce("quantile", fn, dim, keepdim, reduce)
        if reduce:
            return self._reduce("quantile", fn, dim, keepdim, reduce)
        refuse_object_stacks(self, "quantile")
        d = self._reduce_dims(dim)[0]
        bs = list(self.batch_size)
        bs[d : d + 1] = [1] if keepdim else []
        if isinstance(q, torch.Tensor) and q.ndim:
            bs = [q.numel(), *bs]
        return self._apply_leaves(
            lambda x: x if is_unbatched(x) else fn(x, d, keepdim),
            batch_size=torch.Size(bs),
            names=None,
            nested_extra=True,
        )

    def norm(self, *args: Any, **kwargs: Any) -> Any:
        """The norm of every leaf (``torch.norm`` arguments), as a tensordict without batch dims.

        Examples:
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.tensor([3.0, 4.0])}, [2]).norm()["a"]
            tensor(5.)
        """
        return self._apply_leaves(
            lambda x: torch.norm(x, *args, **kwargs), batch_size=torch.Size([]), names=None
        )

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


def _warn_first_dim_only(name: str) -> None:
    warnings.warn(
        f"Passing a tuple as the dim of {name}(), which reduces only its first dim, is deprecated "
        f"and will be removed in TensorDict 0.17. Use an int dim, as torch.{name} takes.",
        DeprecationWarning,
        stacklevel=4,
    )


def _write_into(out: Any, result: Any) -> Any:
    """Copy ``result``'s leaves into ``out`` (existing tensors in place) and return ``out``."""
    for key, value in result.items(True, True, is_leaf=leaf_or_non_tensor):
        current = out.get(key, None)
        if isinstance(current, torch.Tensor) and current.shape == value.shape:
            current.copy_(value)
        else:
            out.set(key, value)
    return out
