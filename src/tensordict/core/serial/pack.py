"""Packing a tensordict's leaves into one tensor of features, and the layout that undoes it.

``td.pack(dim)`` flattens each leaf after the batch dims and concatenates the leaves (sorted by
key) along ``dim`` of the result; :class:`PackLayout` records the columns of each leaf and the
nested tensordicts / tensorclasses, so that :meth:`PackLayout.unpack` rebuilds the tensordict
with views of the packed tensor.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from tensordict.core.dense import TensorDict
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack

__all__ = ["PackLayout", "pack"]


@dataclasses.dataclass(frozen=True)
class PackLayout:
    """Where each leaf of a packed tensordict lies in the packed tensor (see ``td.pack``).

    Frozen, hashable and compared by value. Only tensorclasses come back as their class; any
    other tensordict class comes back as a :class:`~tensordict.TensorDict`.

    Attributes:
        keys: the leaf keys, in column order.
        shapes: each leaf's feature shape (its shape after the batch dims).
        dim: the packed dimension of the packed tensor, counted from the end (negative).
        nested: one ``(key, batch_shape, cls)`` per nested tensordict, parents first:
            its batch shape after the root's batch dims, its tensorclass or None.
        device: the device of the packed tensordict (None: no device).
        cls: the tensorclass of the packed tensordict, or None.
        offsets: the first column of each leaf (derived).
        numel: the number of columns (derived).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), batch_size=[5])
        >>> flat, layout = td.pack()
        >>> layout.keys, layout.offsets, layout.numel
        (('p', 'v'), (0, 1), 4)
        >>> layout.unpack(flat[:2])["v"].shape
        torch.Size([2, 3])
    """

    keys: tuple[Any, ...]
    shapes: tuple[torch.Size, ...]
    dim: int = -1
    nested: tuple[tuple[Any, torch.Size, type | None], ...] = ()
    device: torch.device | None = None
    cls: type | None = None
    offsets: tuple[int, ...] = dataclasses.field(init=False)
    numel: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        shapes = tuple(torch.Size(s) for s in self.shapes)
        nested = tuple((k, torch.Size(b), c) for k, b, c in self.nested)
        sizes = [math.prod(s) for s in shapes]
        offsets = tuple(sum(sizes[:i]) for i in range(len(sizes)))
        object.__setattr__(self, "shapes", shapes)
        object.__setattr__(self, "nested", nested)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "numel", sum(sizes))

    def unpack(self, flat: torch.Tensor) -> Any:
        """Rebuild the tensordict from ``flat``; its leaves are views of ``flat``.

        The batch size is the shape of ``flat`` without the packed dim, so ``flat`` may have
        other batch dims than the packed tensordict (e.g. after indexing rows).

        Raises:
            IndexError: :attr:`dim` is not a dim of ``flat``.
            ValueError: ``flat`` does not have :attr:`numel` entries along :attr:`dim`.
        """
        ndim = flat.ndim
        dim = self.dim + ndim if self.dim < 0 else self.dim
        if not 0 <= dim < ndim:
            raise IndexError(f"dim {self.dim} is out of range for a tensor with {ndim} dims.")
        if flat.shape[dim] != self.numel:
            raise ValueError(
                f"expected {self.numel} entries along dim {self.dim} of the packed tensor, got "
                f"{flat.shape[dim]}: it was not packed with this layout."
            )
        flat = flat.movedim(dim, -1)
        batch = flat.shape[:-1]
        device = flat.device if self.device is not None else None
        out = TensorDict(batch_size=batch, device=device)
        for key, batch_shape, _ in self.nested:
            out.set(key, TensorDict(batch_size=batch + batch_shape, device=device))
        for key, shape, offset in zip(self.keys, self.shapes, self.offsets, strict=True):
            value = flat.narrow(-1, offset, math.prod(shape))
            out.set(key, value.unflatten(-1, shape) if shape else value.squeeze(-1))
        for key, _, cls in reversed(self.nested):  # children before their parents
            if cls is not None:
                out.set(key, cls._from_tensordict(out.get(key)))  # type: ignore[attr-defined]
        return out if self.cls is None else self.cls._from_tensordict(out)  # type: ignore[attr-defined]


def _is_tensorclass(obj: Any) -> bool:
    return bool(getattr(type(obj), "_is_tensorclass", False))


def _has_exclusive_keys(value: Any) -> bool:
    members = getattr(value, "tensordicts", None)
    if _is_tensorclass(value):
        members = getattr(value._tensordict, "tensordicts", None)
    if not members:
        return False
    first = set(members[0].keys(True, True, is_leaf=leaf_or_non_tensor))
    return any(set(m.keys(True, True, is_leaf=leaf_or_non_tensor)) != first for m in members[1:])


def _collect(td: Any, batch_dims: int) -> tuple[dict[Any, torch.Tensor], list[Any]]:
    """The leaves (sorted by key) and the nested collections of ``td``; refuse what cannot pack."""
    if _has_exclusive_keys(td):
        raise RuntimeError("cannot pack a lazy stack whose members have different keys.")
    leaves: dict[Any, torch.Tensor] = {}
    nested: list[Any] = []
    for key, value in td.items(True, False, sort=True):
        if isinstance(value, (NonTensorData, NonTensorStack)):
            raise TypeError(
                f"cannot pack the non-tensor entry {key!r}. Drop the non-tensor entries with "
                "filter_non_tensor_data() first."
            )
        if isinstance(value, torch.Tensor):
            leaves[key] = value
            continue
        if _has_exclusive_keys(value):
            raise RuntimeError(f"cannot pack the lazy stack at {key!r}: its members differ.")
        cls = type(value) if _is_tensorclass(value) else None
        nested.append((key, value.batch_size[batch_dims:], cls))
    return leaves, nested


def _order(leaves: dict[Any, torch.Tensor], layout: PackLayout | None, pos: int, bd: int) -> Any:
    if layout is None:
        return leaves
    layout_pos = layout.dim + bd + 1 if layout.dim < 0 else layout.dim
    if layout_pos != pos:
        raise ValueError(f"cannot pack along dim {pos} with a layout packed along {layout.dim}.")
    if set(leaves) != set(layout.keys):
        raise KeyError(
            f"the leaves of the tensordict differ from the keys of the layout: "
            f"{sorted(map(str, leaves))} vs {sorted(map(str, layout.keys))}."
        )
    return {key: leaves[key] for key in layout.keys}


def _columns(leaves: dict[Any, torch.Tensor], pos: int, bd: int) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    first: torch.Tensor | None = None
    for key, value in leaves.items():
        if first is None:
            first = value
        elif value.dtype != first.dtype:
            raise TypeError(
                f"cannot pack leaves of different dtypes: {first.dtype} and {value.dtype} at "
                f"{key!r}. Cast the tensordict first, e.g. with td.float()."
            )
        elif value.device != first.device:
            raise RuntimeError(
                f"cannot pack leaves on different devices: {first.device} and {value.device} "
                f"at {key!r}. Move the tensordict to one device first."
            )
        value = value.flatten(bd) if value.ndim > bd else value.unsqueeze(-1)
        out.append(value if pos == bd else value.movedim(-1, pos))
    return out


def pack(td: Any, dim: int = -1, *, layout: PackLayout | None = None) -> tuple[Any, PackLayout]:
    """Pack every leaf of ``td`` into one contiguous tensor of features (``td.pack()``); return
    it and its layout.

    Each leaf is flattened after the batch dims and the leaves (sorted by key, or in the order of
    ``layout``) are concatenated along ``dim`` (in ``[-(batch_dims+1), batch_dims]``). All leaves
    share one dtype and device; non-tensor data cannot be packed.
    :meth:`PackLayout.unpack <tensordict.PackLayout.unpack>` inverts it.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(b=torch.ones(2, 2), a=torch.zeros(2), batch_size=[2])
        >>> flat, layout = pack(td)
        >>> flat.tolist(), layout.keys
        ([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]], ('a', 'b'))
        >>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), batch_size=[5])
        >>> flat, layout = td.pack()
        >>> flat.shape, (layout.unpack(flat) == td).all()
        (torch.Size([5, 4]), True)
    """
    batch = td.batch_size
    bd = len(batch)
    if not -bd - 1 <= dim <= bd:
        raise IndexError(f"dim {dim} is out of range to pack a tensordict of {bd} batch dims.")
    pos = dim + bd + 1 if dim < 0 else dim
    leaves, nested = _collect(td, bd)
    leaves = _order(leaves, layout, pos, bd)
    shapes = tuple(v.shape[bd:] for v in leaves.values())
    if layout is not None and shapes != layout.shapes:
        raise ValueError(
            f"the feature shapes of the leaves differ from the layout's: {shapes} vs "
            f"{layout.shapes}."
        )
    columns = _columns(leaves, pos, bd)
    if columns:
        flat = torch.cat(columns, pos).contiguous()
    else:
        flat = torch.empty((*batch[:pos], 0, *batch[pos:]), device=td.device)
    new = PackLayout(
        keys=tuple(leaves),
        shapes=shapes,
        dim=pos - bd - 1,
        nested=tuple(nested),
        device=td.device,
        cls=type(td) if _is_tensorclass(td) else None,
    )
    return flat, new
