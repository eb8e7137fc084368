"""Ragged data: entries whose shape differs from one element of the batch to the next.

A lazy stack holds them naturally (each member its own shape); ``get(key, as_list=True)``,
``as_padded_tensor=True`` and ``as_nested_tensor=True`` read such an entry without stacking it,
``densify()`` turns a lazy stack into a :class:`~tensordict.TensorDict` of nested tensors and
``to_padded_tensor()`` pads nested tensors back into regular ones.

On a tensordict without lazy stacks these options return the entry as it is (as upstream).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from tensordict.core import factory
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.errors import ShapeMismatchError

__all__ = ["LazyRaggedMixin", "RaggedMixin", "pad_and_stack"]

_MISSING: Any = object()
_READ_OPTIONS = ("as_list", "as_padded_tensor", "as_nested_tensor")


def pad_and_stack(
    tensors: Sequence[torch.Tensor], dim: int, value: float = 0.0, side: str = "right"
) -> torch.Tensor:
    """Pad tensors of the same number of dims to their largest shape and stack them along dim.

    Examples:
        >>> pad_and_stack([torch.ones(1), torch.ones(2)], 0).tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        >>> pad_and_stack([torch.ones(1), torch.ones(2)], 0, side="left").tolist()
        [[0.0, 1.0], [1.0, 1.0]]
    """
    if side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {side!r}.")
    ndims = {t.ndim for t in tensors}
    if len(ndims) > 1:
        raise ShapeMismatchError(
            f"cannot pad tensors with different numbers of dims {sorted(ndims)} to one shape."
        )
    top = [max(sizes) for sizes in zip(*(t.shape for t in tensors))]
    padded = []
    for t in tensors:
        pads: list[int] = []
        for size, target in zip(reversed(t.shape), reversed(top)):
            missing = target - size
            pads += [missing, 0] if side == "left" else [0, missing]
        padded.append(F.pad(t, pads, value=value) if any(pads) else t)
    return torch.stack(padded, dim)


class RaggedMixin(TensorCollection):
    """``get`` options for ragged entries, ``densify`` and ``to_padded_tensor``."""

    __slots__ = ()

    def _get_leaf_as(self, key: str, default: Any, **options: Any) -> Any:
        """The entry ``key`` read with ``get``'s ragged options (a plain tensordict ignores
        them, as upstream)."""
        return self._get_str(key, default)

    def densify(self, layout: torch.layout = torch.strided) -> Any:
        """A tensordict where every lazy stack became dense; ragged entries become nested
        tensors of ``layout`` (``torch.strided`` or ``torch.jagged``).

        Examples:
            >>> from tensordict import TensorDict, LazyStackedTensorDict
            >>> a, b = TensorDict(a=torch.zeros(1)), TensorDict(a=torch.ones(2))
            >>> td = LazyStackedTensorDict(a, b)
            >>> out = td.densify(layout=torch.jagged)
            >>> out["a"].is_nested, [t.tolist() for t in out["a"].unbind()]
            (True, [[0.0], [1.0, 1.0]])
        """
        td: Any = self
        source: dict[str, Any] = {}
        for key, value in td._own_items():
            source[key] = value.densify(layout=layout) if isinstance(value, RaggedMixin) else value
        return td._new_dense(source, td.batch_size, td._names_or_none())

    def to_padded_tensor(self, padding: float = 0.0, mask_key: Any = None) -> Any:
        """A copy where every nested tensor is padded with ``padding`` into a regular tensor.

        A batch dim of ``-1`` (where nested tensors are ragged, as upstream) gets the size of
        the longest component; ``mask_key`` then stores a boolean mask of the valid elements.

        Raises:
            ShapeMismatchError: ``mask_key`` was given but the batch size has no ragged dim
                whose padding a mask would describe.

        Examples:
            >>> from tensordict import TensorDict, LazyStackedTensorDict
            >>> a, b = TensorDict(a=torch.zeros(1)), TensorDict(a=torch.ones(2))
            >>> td = LazyStackedTensorDict(a, b)
            >>> td.densify(layout=torch.jagged).to_padded_tensor(padding=-1)["a"].tolist()
            [[0.0, -1.0], [1.0, 1.0]]
        """
        td: Any = self
        ragged = -1 in td.batch_size
        if mask_key is not None and not ragged:
            raise ShapeMismatchError(
                "mask_key should only be provided if the heterogenous dimension is part of the "
                "batch-size; here every batch dim is regular. Drop mask_key, or compare the "
                "padded entry with the padding value."
            )

        def pad(t: torch.Tensor) -> torch.Tensor:
            return torch.nested.to_padded_tensor(t, padding) if t.is_nested else t

        if not ragged:
            return td._apply_leaves(pad)
        sizes = _component_sizes(td)  # a batch dim of -1: its size is the longest component's
        bs = td.batch_size
        new_bs = [len(sizes), *(max(s[d - 1] for s in sizes) for d in range(1, len(bs)))]
        out = td._apply_leaves(pad, batch_size=new_bs)
        if mask_key is not None:
            mask = torch.zeros(new_bs, dtype=torch.bool, device=td.device)
            for i, s in enumerate(sizes):
                mask[(i,) + tuple(slice(0, n) for n in s[: len(bs) - 1])] = True
            out.set(mask_key, mask)
        return out


def _component_sizes(td: Any) -> list[list[int]]:
    """The component shapes of the first nested tensor leaf of ``td`` (whose batch size has a
    ragged dim, ``-1``)."""
    for leaf in td.values(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
        if isinstance(leaf, torch.Tensor) and leaf.is_nested:
            return [list(c.shape) for c in leaf.unbind()]
    raise ShapeMismatchError(
        f"batch_size={list(td.batch_size)} has a ragged dim (-1) but no entry is a nested "
        "tensor whose padding would size it."
    )


class LazyRaggedMixin(RaggedMixin):
    """The ragged options of a lazy stack, whose members may hold an entry with other shapes."""

    __slots__ = ()
    tensordicts: list[Any]
    stack_dim: int

    def _get_leaf_as(  # type: ignore[override]
        self,
        key: str,
        default: Any,
        *,
        as_list: bool = False,
        as_padded_tensor: bool = False,
        as_nested_tensor: bool = False,
        padding_side: str = "right",
        padding_value: float = 0.0,
        layout: torch.layout | None = None,
    ) -> Any:
        options = {
            "as_list": as_list,
            "as_padded_tensor": as_padded_tensor,
            "as_nested_tensor": as_nested_tensor,
            "padding_side": padding_side,
            "padding_value": padding_value,
            "layout": layout,
        }
        if as_nested_tensor and not (as_list or as_padded_tensor):
            # a member's entry is read stacked when it can be (a nested tensor of nested
            # tensors cannot be built)
            values = [_plain_or_ragged(m, key, options) for m in self.tensordicts]
        else:
            values = [m._get_leaf_as(key, _MISSING, **options) for m in self.tensordicts]
        if not values or any(v is _MISSING for v in values):
            return default
        if not all(isinstance(v, (torch.Tensor, list)) for v in values):
            return self._get_str(key, default)  # nested tensordicts, non-tensor data
        if as_list:
            return values
        if as_padded_tensor:
            return pad_and_stack(values, self.stack_dim, padding_value, padding_side)
        if as_nested_tensor:
            return self._nested(values, layout or torch.jagged)
        return self._get_str(key, default)

    def _nested(self, values: list[Any], layout: torch.layout) -> torch.Tensor:
        if any(v.is_nested for v in values):
            raise ShapeMismatchError(
                "Cannot build a nested tensor from entries that are nested tensors themselves "
                "(the inner stacks of a lazy stack of lazy stacks): use as_padded_tensor=True "
                "or as_list=True."
            )
        if self.stack_dim != 0:
            raise ShapeMismatchError(
                "LazyStackedTensorDict.get_nestedtensor can only be called when the stack_dim "
                f"is 0: a nested tensor stacks along its first dim, this lazy stack along dim "
                f"{self.stack_dim}. Use as_padded_tensor=True or as_list=True, or transpose the "
                "stack first."
            )
        return torch.nested.nested_tensor(values, layout=layout)

    def get_nestedtensor(self, key: Any, default: Any = _MISSING, *, layout: Any = None) -> Any:
        """Deprecated (as upstream): ``get(key, as_nested_tensor=True)``."""
        warnings.warn(
            "LazyStackedTensorDict.get_nestedtensor() is deprecated: use "
            "get(key, as_nested_tensor=True) instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        td: Any = self
        out = td.get(key, _MISSING, as_nested_tensor=True, layout=layout or torch.strided)
        if out is _MISSING:
            if default is not _MISSING:
                return default
            raise td._missing_key(key)
        return out

    def densify(self, layout: torch.layout = torch.strided) -> Any:
        """A TensorDict of the members' entries: equal shapes are stacked, ragged ones become
        nested tensors of ``layout``; a key some members lack is read as empty there.

        Raises:
            ShapeMismatchError: the stack dim is not 0, or a key some members lack has scalar
                values (there is no empty stand-in for them).
        """
        if self.stack_dim != 0:
            raise ShapeMismatchError(
                f"densify stacks members into nested tensors along dim 0, but this lazy stack "
                f"stacks along dim {self.stack_dim}: transpose it to stack_dim 0 first."
            )
        td: Any = self
        members = [m.densify(layout=layout) for m in self.tensordicts]
        keys: dict[str, None] = {}
        for m in members:
            keys.update(dict.fromkeys(m._own_keys()))
        source: dict[str, Any] = {}
        for key in keys:
            values = [m._get_str(key, None) for m in members]
            source[key] = _densify_entry(key, values, layout, td)
        return td._new_dense(source, td.batch_size)


def _plain_or_ragged(member: Any, key: str, options: dict[str, Any]) -> Any:
    try:
        return member._get_str(key, _MISSING)
    except ShapeMismatchError:  # a ragged lazy stack: its own nested tensor
        return member._get_leaf_as(key, _MISSING, **options)


def _densify_entry(key: str, values: list[Any], layout: torch.layout, td: Any) -> Any:
    present = [v for v in values if v is not None]
    first = present[0]
    if isinstance(first, TensorCollection):
        if len(present) < len(values):
            raise ShapeMismatchError(
                f"cannot densify {key!r}: a nested tensordict some members lack."
            )
        return factory.LazyStackedTensorDict(*values, stack_dim=0).densify(layout=layout)
    if not isinstance(first, torch.Tensor):
        return td._get_str(key, None) if len(present) == len(values) else first
    if len(present) < len(values):
        if first.ndim == 0:
            raise ShapeMismatchError(
                "Cannot densify a tensordict with values with empty shape and exclusive keys: "
                f"{key!r} is a scalar that some members lack."
            )
        empty = first.new_empty((0, *first.shape[1:]))
        values = [empty if v is None else v for v in values]
    if len({tuple(v.shape) for v in values}) == 1 and len(present) == len(values):
        return torch.stack(values, 0)
    return torch.nested.nested_tensor(values, layout=layout)
