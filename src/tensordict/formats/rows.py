"""Which part of an on-disk array an index reads, and how to finish the job in memory.

HDF5 and Zarr read rectangular selections (ints and slices with a positive step) and, at most,
one sorted list of positions along one dimension. A tensordict index may be anything torch
accepts (masks, unsorted or repeated positions, several index tensors, ``None``). An index is
therefore split once into a :class:`Selection`:

* ``region``: what the library reads from the file (never more than the rows asked for, except
  for masks over several dimensions and several index tensors, where the bounding box is read);
* ``chain``: indices applied with torch to what was read, in order (empty when the region is
  the answer). Indexing a view again appends to the chain.

Writes go straight to the region when the chain is empty, else read, modify and write back the
region (so a write through any index changes exactly the elements that index selects).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

__all__ = ["Selection", "fit_value", "read_selection", "select", "write_selection"]

#: a list of positions is read as such when it covers less than this share of its span;
#: denser lists read the span (one contiguous read beats many small ones)
LIST_DENSITY = 0.25


class Selection(NamedTuple):
    """A region read by the file's library, then torch indices applied in memory."""

    region: tuple[Any, ...]
    chain: tuple[Any, ...] = ()

    def then(self, leaf_index: Any) -> Selection:
        """This selection indexed again by ``leaf_index`` (applied in memory)."""
        return Selection(self.region, self.chain + (leaf_index,))

    @property
    def is_full(self) -> bool:
        return not self.region and not self.chain


FULL = Selection(())


def _items(leaf_index: Any) -> tuple[Any, ...]:
    if leaf_index is Ellipsis:
        return ()
    return leaf_index if isinstance(leaf_index, tuple) else (leaf_index,)


def _norm_slice(s: slice, n: int) -> slice:
    start, stop, step = s.indices(n)
    stop = max(stop, start)
    return slice(start, stop, step if step != 1 else None)


def select(leaf_index: Any, batch_size: torch.Size) -> Selection:
    """Split a planned leaf index (see ``core.indexing.plan_index``) into region and chain.

    Examples:
        >>> select(slice(2, 5), torch.Size([10])).region
        (slice(2, 5, None),)
        >>> sel = select(torch.tensor([7, 1, 7]), torch.Size([10]))
        >>> sel.region, sel.chain
        ((slice(1, 8, None),), ((tensor([6, 0, 6]),),))
    """
    items = _items(leaf_index)
    advanced = [i for i in items if isinstance(i, torch.Tensor)]
    if not advanced and all(i is not None for i in items):
        return _basic(items, batch_size)
    single_list = len(advanced) == 1 and advanced[0].ndim == 1
    region: list[Any] = []
    local: list[Any] = []
    dim = 0
    for item in items:
        if item is None:
            local.append(None)
        elif isinstance(item, int):
            i = item % batch_size[dim]
            region.append(slice(i, i + 1))
            local.append(0)
            dim += 1
        elif isinstance(item, slice):
            region.append(_norm_slice(item, batch_size[dim]))
            local.append(slice(None))
            dim += 1
        elif item.dtype == torch.bool and item.ndim != 1:
            region.extend([slice(None)] * item.ndim)
            local.append(item)
            dim += item.ndim
        else:
            r, loc = _positions(item, batch_size[dim], single_list)
            region.append(r)
            local.append(loc)
            dim += 1
    return Selection(tuple(region), (tuple(local),))


def _basic(items: tuple[Any, ...], batch_size: torch.Size) -> Selection:
    region: list[Any] = []
    for dim, item in enumerate(items):
        if isinstance(item, int):
            region.append(item % batch_size[dim])
        else:
            region.append(_norm_slice(item, batch_size[dim]))
    return Selection(tuple(region))


def _positions(item: torch.Tensor, n: int, single_list: bool) -> tuple[Any, torch.Tensor]:
    """(what to read along this dim, the index of the wanted rows in what is read)."""
    pos = item.nonzero().squeeze(-1) if item.dtype == torch.bool else item.long() % n
    if pos.numel() == 0:
        return slice(0, 0), pos
    lo, hi = int(pos.min()), int(pos.max())
    if single_list:
        unique, inverse = torch.unique(pos, sorted=True, return_inverse=True)
        if unique.numel() < LIST_DENSITY * (hi - lo + 1):
            return unique.numpy(), inverse
    return slice(lo, hi + 1), pos - lo


def fit_value(value: torch.Tensor, expected: torch.Size) -> torch.Tensor | None:
    """``value`` ready to write into a part of shape ``expected``, or None if it cannot be.

    As torch's ``t[index] = value``: the value broadcasts, and extra leading size-1 dimensions
    are dropped (``t[0] = torch.tensor([1.0])`` writes a scalar row).

    Examples:
        >>> fit_value(torch.ones(1, 1, 3), torch.Size([2, 3])).shape
        torch.Size([1, 3])
        >>> fit_value(torch.ones(2, 3), torch.Size([3])) is None
        True
    """
    from tensordict.core.behaviour.shape import broadcasts_to

    while value.dim() > len(expected) and value.shape[0] == 1:
        value = value[0]
    return value if broadcasts_to(value.shape, expected) else None


def region_dims(region: tuple[Any, ...], batch_dims: int) -> int:
    """How many batch dimensions remain after reading ``region`` (ints remove theirs)."""
    return batch_dims - sum(1 for r in region if isinstance(r, (int, np.integer)))


def apply_chain(data: torch.Tensor, chain: tuple[Any, ...]) -> torch.Tensor:
    for index in chain:
        data = data[index]
    return data


def read_selection(
    read: Callable[[tuple[Any, ...]], torch.Tensor], selection: Selection
) -> torch.Tensor:
    """Read ``selection`` with ``read(region)`` (the library's read) and apply the chain."""
    return apply_chain(read(selection.region), selection.chain)


def write_selection(
    read: Callable[[tuple[Any, ...]], torch.Tensor],
    write: Callable[[tuple[Any, ...], torch.Tensor], None],
    selection: Selection,
    value: torch.Tensor,
    leaf_shape: tuple[int, ...],
    batch_dims: int,
) -> None:
    """Write ``value`` to the elements ``selection`` selects, and only those.

    ``value`` must broadcast to the selected shape; nothing is written if it does not.
    """
    region, chain = selection.region, selection.chain
    if not chain:
        shape = _region_shape(region, leaf_shape)
        write(region, value.expand(shape) if tuple(value.shape) != shape else value)
        return
    data = read(region)
    nb = region_dims(region, batch_dims)
    positions = torch.arange(math.prod(data.shape[:nb])).view(data.shape[:nb])
    positions = apply_chain(positions, chain)
    flat = data.reshape(-1, *data.shape[nb:])
    target = tuple(positions.shape) + tuple(data.shape[nb:])
    flat[positions] = value.expand(target) if tuple(value.shape) != target else value
    write(region, flat.view(data.shape))


def _region_shape(region: tuple[Any, ...], leaf_shape: tuple[int, ...]) -> tuple[int, ...]:
    shape: list[int] = []
    for r, n in zip(region, leaf_shape):
        if isinstance(r, slice):
            shape.append(len(range(*r.indices(n))))
        elif isinstance(r, np.ndarray):
            shape.append(len(r))
    return tuple(shape) + tuple(leaf_shape[len(region) :])
