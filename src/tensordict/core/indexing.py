"""Indices over batch dimensions: normalise once, then apply to every leaf.

An index given by the user (int, slice, ``...``, ``None``, bool mask, long tensor, list, or a
tuple of these) is turned once into an :class:`IndexPlan`:

* ``leaf_index``: what to apply to each leaf. ``...`` is expanded over the *batch* dimensions
  only, so that the leaves' feature dimensions are never touched;
* ``batch_size``: the batch size of the result;
* ``is_view``: whether leaves of the result share memory with the source (int/slice/None/``...``).

The common cases (an int, a slice, a tuple of ints and slices) are planned with plain arithmetic;
advanced indices are planned by indexing a zero-stride dummy of the batch shape.

An index saved in memory-mapped metadata (a sub-tensordict's ``index``) is decoded by
:func:`_str_to_index`: upstream writes tagged lists (``["tuple", [["slice", {...}], 1]]``),
older versions untagged tuples.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from tensordict.errors import IndexingError, IndexTypeError, MultipleEllipsisError

__all__ = ["_str_to_index", "index_jagged", "IndexPlan", "plan_index", "to_numpy_index"]


class IndexPlan(NamedTuple):
    """A normalised index over the batch dimensions."""

    leaf_index: Any
    batch_size: torch.Size
    is_view: bool
    #: for each dimension of the result, the source batch dimension it comes from (None if new or
    #: produced by advanced indexing); used to carry dimension names.
    dim_map: tuple[int | None, ...] | None = None
    #: ``(dim, index)`` when the index is full slices then one 1-d non-negative integer tensor:
    #: leaves are gathered with ``torch.index_select`` (3x faster than advanced indexing)
    select: tuple[int, torch.Tensor] | None = None


def _check_int(i: int, dim: int, batch_size: torch.Size) -> int:
    n = batch_size[dim]
    if i < -n or i >= n:
        raise IndexingError(
            f"index {i} is out of range for dimension {dim} of size {n} "
            f"(batch_size={list(batch_size)}). Use an index in [{-n}, {n - 1}]."
        )
    return i


def _slice_len(s: slice, n: int) -> int:
    step = s.step
    if step is not None and step <= 0:
        raise IndexingError(
            f"slice step must be positive, got {step}. Use flip() or a reversed index tensor."
        )
    if not torch.compiler.is_compiling():
        return len(range(*s.indices(n)))
    # While tracing, n may be symbolic (a batch dim made dynamic after a recompile), and
    # slice.indices would fix it to its current value: the same clipping, written with
    # arithmetic, min and max, which keep it symbolic.
    step = 1 if step is None else step
    start = 0 if s.start is None else s.start + n if s.start < 0 else s.start
    stop = n if s.stop is None else s.stop + n if s.stop < 0 else s.stop
    start, stop = min(max(start, 0), n), min(max(stop, 0), n)
    return (max(stop - start, 0) + step - 1) // step


def plan_index(index: Any, batch_size: torch.Size) -> IndexPlan:
    """Normalise ``index`` against ``batch_size``.

    Raises:
        IndexingError: out-of-range ints, too many indices, masks of the wrong shape.

    Examples:
        >>> plan_index(slice(2, 5), torch.Size([10, 3])).batch_size
        torch.Size([3, 3])
        >>> plan_index((..., 0), torch.Size([10, 3])).leaf_index
        (slice(None, None, None), 0)
    """
    cls = type(index)
    bd = len(batch_size)
    if cls is int:
        if bd == 0:
            raise IndexingError(
                f"cannot index a tensordict with batch_size={list(batch_size)} by {index}: it has "
                "no batch dimension. Give it a batch size, or use a key to read an entry."
            )
        _check_int(index, 0, batch_size)
        return IndexPlan(index, batch_size[1:], True, tuple(range(1, bd)))
    if cls is slice:
        if bd == 0:
            raise IndexingError(
                f"cannot slice a tensordict with batch_size={list(batch_size)}: it has no batch "
                "dimension. Give it a batch size first."
            )
        n = _slice_len(index, batch_size[0])
        return IndexPlan(index, torch.Size((n, *batch_size[1:])), True, tuple(range(bd)))
    if index is Ellipsis:
        return IndexPlan(index, batch_size, True, tuple(range(bd)))
    if index is None:
        return IndexPlan(index, torch.Size((1, *batch_size)), True, (None, *range(bd)))
    if cls is not tuple:
        index = (index,)
    return _plan_tuple(index, batch_size)


def _as_index_item(item: Any) -> Any:
    """Turn lists and arrays into tensors; keep ints, slices, None and Ellipsis."""
    if item is None or item is Ellipsis or type(item) in (int, slice):
        return item
    if isinstance(item, torch.Tensor):
        if item.dtype == torch.bool or not item.is_floating_point():
            return int(item) if item.ndim == 0 and item.dtype != torch.bool else item
        raise IndexingError(
            f"tensors used as indices must be long, int or bool tensors, got {item.dtype}."
        )
    if isinstance(item, bool):
        return torch.tensor(item)
    if is_first_class_dim(item):
        return item
    if isinstance(item, (int, np.integer)):
        return int(item)
    if isinstance(item, (list, np.ndarray, range)):
        try:
            t = torch.as_tensor(np.asarray(item))
        except (TypeError, ValueError) as err:
            raise IndexingError(f"cannot use {item!r} as an index: {err}") from None
        if t.numel() == 0 and isinstance(item, (list, range)):
            t = t.long()
        if t.is_floating_point():
            raise IndexingError(f"index lists must hold ints or bools, got {item!r}.")
        return t
    raise IndexTypeError(
        f"Invalid index {item!r} of type {type(item).__name__}. Use ints, slices, None, "
        "Ellipsis, bool masks, integer tensors or lists, or a string key."
    )


def _plan_tuple(index: tuple[Any, ...], batch_size: torch.Size) -> IndexPlan:
    bd = len(batch_size)
    items = [_as_index_item(i) for i in index]
    consumed = 0
    ellipsis_seen = False
    basic = True
    for item in items:
        if item is None:
            continue
        if item is Ellipsis:
            if ellipsis_seen:
                raise MultipleEllipsisError(
                    "An index can only have one ellipsis at most: keep a single '...'."
                )
            ellipsis_seen = True
            continue
        if isinstance(item, torch.Tensor):
            basic = False
            consumed += item.ndim if item.dtype == torch.bool else 1
        else:
            consumed += 1
    if consumed > bd:
        raise IndexingError(
            f"too many indices for a tensordict with batch_size={list(batch_size)}: {consumed} "
            f"batch dimensions indexed by {index!r}, but there are {bd}. Index leaves' feature "
            "dimensions on the tensors themselves (td['key'][...])."
        )
    leaf_index: list[Any] = []
    dim_map: list[int | None] = []
    new_shape: list[int] = []
    dim = 0
    all_nonneg = True
    for item in items:
        if item is None:
            leaf_index.append(None)
            new_shape.append(1)
            dim_map.append(None)
        elif item is Ellipsis:
            for _ in range(bd - consumed):
                leaf_index.append(slice(None))
                new_shape.append(batch_size[dim])
                dim_map.append(dim)
                dim += 1
        elif type(item) is int:
            leaf_index.append(_check_int(item, dim, batch_size))
            dim += 1
        elif is_first_class_dim(item):
            leaf_index.append(item)  # binds the dimension: it leaves the batch size
            dim += 1
        elif type(item) is slice:
            leaf_index.append(item)
            new_shape.append(_slice_len(item, batch_size[dim]))
            dim_map.append(dim)
            dim += 1
        else:
            start = dim
            dim, nonneg = _check_tensor_item(item, dim, batch_size)
            all_nonneg = all_nonneg and nonneg
            leaf_index.append(item)
            dim_map.extend(_advanced_dims(item, start, dim))
    dim_map.extend(range(dim, bd))
    if basic:
        new_shape.extend(batch_size[dim:])
        return IndexPlan(tuple(leaf_index), torch.Size(new_shape), True, tuple(dim_map))
    # one advanced index keeps its place (and names); several move to the front: names dropped
    names_map = tuple(dim_map) if len(leaf_index) - basic_count(leaf_index) == 1 else None
    select = _as_select(leaf_index) if all_nonneg else None
    if select is not None:
        d, idx = select
        shape = torch.Size((*batch_size[:d], idx.shape[0], *batch_size[d + 1 :]))
        return IndexPlan(tuple(leaf_index), shape, False, names_map, select)
    dummy = torch.empty((), dtype=torch.uint8).expand(batch_size)
    new_batch = dummy[tuple(leaf_index)].shape
    if names_map is not None and len(names_map) != len(new_batch):
        names_map = None
    return IndexPlan(tuple(leaf_index), new_batch, False, names_map)


def is_first_class_dim(item: Any) -> bool:
    """Whether ``item`` is a first-class dimension (``functorch.dim.dims()``), which indexes a
    batch dimension away into the leaves' dims (never imported here: an optional feature)."""
    cls = type(item)
    return cls.__name__ == "Dim" and cls.__module__.startswith("functorch.dim")


def basic_count(leaf_index: list[Any]) -> int:
    """How many items of a planned index are not tensors."""
    return sum(1 for i in leaf_index if not isinstance(i, torch.Tensor))


def _advanced_dims(item: torch.Tensor, start: int, end: int) -> list[int | None]:
    """The source dims of the result dims an index tensor makes (for names, as upstream): an
    index over one dimension keeps its name on the last dim it makes."""
    made = 1 if item.dtype == torch.bool else item.ndim
    if end - start == 1:
        return [*[None] * (made - 1), start]
    return [None] * made


_FULL = slice(None)


def _as_select(leaf_index: list[Any]) -> tuple[int, torch.Tensor] | None:
    """``(dim, index)`` if the index is full slices around one 1-d int tensor (the caller has
    checked that it holds no negative index)."""
    found = None
    for pos, item in enumerate(leaf_index):
        if isinstance(item, torch.Tensor):
            if found is not None or item.ndim != 1 or item.dtype not in (torch.int64, torch.int32):
                return None
            found = (pos, item)
        elif item != _FULL:
            return None
    return found


def _check_tensor_item(item: torch.Tensor, dim: int, batch_size: torch.Size) -> tuple[int, bool]:
    """The next batch dimension, and whether the item holds no negative index."""
    if item.dtype == torch.bool:
        expected = batch_size[dim : dim + item.ndim]
        if item.shape != expected:
            raise IndexingError(
                f"a boolean mask of shape {list(item.shape)} was used on batch dimensions "
                f"{dim}..{dim + item.ndim - 1} of size {list(expected)} "
                f"(batch_size={list(batch_size)}). The mask must match those dimensions exactly."
            )
        return dim + item.ndim, True
    if torch.compiler.is_compiling():
        # the values are not known while tracing: the leaves' indexing checks the range
        return dim + 1, False
    n = batch_size[dim]
    lo = 0
    if item.numel():
        lo_t, hi_t = torch.aminmax(item)
        lo, hi = int(lo_t), int(hi_t)
        if lo < -n or hi >= n:
            bad = hi if hi >= n else lo
            raise IndexingError(
                f"index {bad} is out of range for dimension {dim} of size {n} "
                f"(batch_size={list(batch_size)}). Use indices in [{-n}, {n - 1}]."
            )
    return dim + 1, lo >= 0


def to_numpy_index(leaf_index: Any) -> Any:
    """Translate a planned leaf index for numpy object arrays (used by non-tensor stacks)."""
    if isinstance(leaf_index, tuple):
        return tuple(to_numpy_index(i) for i in leaf_index)
    if isinstance(leaf_index, torch.Tensor):
        return leaf_index.cpu().numpy()
    return leaf_index


def index_jagged(value: torch.Tensor, index: Any) -> torch.Tensor:
    """``value[index]`` for a nested (jagged) tensor, whose first dim torch cannot slice: the
    rows picked by a slice, an integer list/tensor or a boolean mask on dim 0, re-nested (a
    copy). Indices past dim 0 are applied to the result.

    Raises:
        IndexingError: an index on dim 0 of another kind.

    Examples:
        >>> nt = torch.nested.as_nested_tensor(
        ...     [torch.zeros(2), torch.ones(3), torch.zeros(1)], layout=torch.jagged
        ... )
        >>> [row.shape[0] for row in index_jagged(nt, slice(1, None)).unbind()]
        [3, 1]
    """
    first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
    rows = value.unbind(0)
    if isinstance(first, slice):
        picked = list(rows[first])
    elif isinstance(first, (torch.Tensor, list, range)):
        positions = torch.as_tensor(first)
        if positions.dtype is torch.bool:
            positions = positions.nonzero().flatten()
        picked = [rows[i] for i in positions.reshape(-1).tolist()]
    else:
        raise IndexingError(
            f"cannot index dim 0 of a nested (jagged) tensor with {first!r}: use an int, a "
            "slice, an integer list/tensor or a boolean mask."
        )
    out = torch.nested.as_nested_tensor(picked, layout=value.layout)
    if any(not (isinstance(r, slice) and r == slice(None)) for r in rest):
        return out[(slice(None),) + tuple(rest)]
    return out


def _str_to_index(index: Any) -> Any:
    """Decode an index saved in memmap metadata (tagged lists) back to a python index.

    Examples:
        >>> _str_to_index(["tuple", [["slice", {"start": 0, "stop": 2, "step": None}], 1]])
        (slice(0, 2, None), 1)
    """
    if not isinstance(index, (tuple, list)):
        return index
    if not index:
        return ()
    tag = index[0]
    if tag == "tuple":
        return tuple(_str_to_index(item) for item in index[1])
    if tag == "list":
        return [_str_to_index(item) for item in index[1]]
    if tag in ("slice", "range"):
        spec = index[1]
        make = slice if tag == "slice" else range
        return make(spec["start"], spec["stop"], spec["step"])
    if tag == "tensor":
        return torch.tensor(index[1], device=index[2] if len(index) > 2 else None)
    if tag == "ellipsis":
        return Ellipsis
    return tuple(_str_to_index(item) for item in index)  # older, untagged tuples
