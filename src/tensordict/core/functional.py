"""Free functions of the top-level API that build, combine or split tensordicts.

``lazy_stack`` / ``maybe_dense_stack`` / ``dense_stack_tds`` choose how members are stacked;
``make_tensordict`` / ``from_dict`` / ``fromkeys`` build; ``merge_tensordicts`` merges;
``group_by`` splits by the value of an entry; ``is_floating`` and friends are dtype predicates
usable as filters (``fn(value)`` or ``fn(key, value)``), next to the numpy -> torch dtype table;
``make_cache_key`` keys memoised calls (upstream's ``tensordict.utils`` offers both). Padding
lives in ``core.behaviour.padding``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.base import is_tensor_collection
from tensordict.core.behaviour.combine import stack_or_lazy
from tensordict.core.collection import publish_as
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, leaf_or_non_tensor, unravel_key
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack

__all__ = [
    "NUMPY_TO_TORCH_DTYPE_DICT",
    "make_cache_key",
    "dense_stack_tds",
    "from_dict",
    "fromkeys",
    "group_by",
    "isin",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "lazy_stack",
    "make_tensordict",
    "maybe_dense_stack",
    "merge_tensordicts",
    "remove_duplicates",
    "zip_strict",
]


#: ``zip`` that raises ``ValueError`` when the iterables differ in length.
zip_strict = functools.partial(zip, strict=True)


def _members(input: Any) -> list[Any]:
    members = list(input)
    if not members:
        raise ValueError("expected a non-empty sequence of tensordicts, got an empty one.")
    return members


def lazy_stack(input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any) -> Any:
    """Stack tensordicts (or tensorclasses) lazily: the members are kept, nothing is copied.

    Tensors are stacked with :func:`torch.stack` (a lazy stack only makes sense for
    collections).

    Args:
        input: the tensordicts or tensorclass instances; members of different batch sizes
            (with as many dims) give a stack whose ``batch_size`` shows ``-1`` where they differ.
        dim: where the new batch dimension goes.
        out: an existing tensordict to write the stack into.
        **kwargs: the options of :meth:`LazyStackedTensorDict.lazy_stack
            <tensordict.LazyStackedTensorDict.lazy_stack>` (``strict_shape`` refuses members of
            different batch sizes, ``stack_dim_name`` names the new dim, ``as_list`` /
            ``as_padded_tensor`` / ``as_nested_tensor`` for tensors); others raise ``TypeError``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> a, b = TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3))
        >>> td = lazy_stack([a, b])
        >>> type(td).__name__, td.batch_size, td[1]["x"].shape
        ('LazyStackedTensorDict', torch.Size([2]), torch.Size([3]))
    """
    return LazyStackedTensorDict.lazy_stack(_members(input), dim, out=out, **kwargs)


def maybe_dense_stack(input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any) -> Any:
    """Stack densely when the members share keys and entry shapes, lazily otherwise.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> same = [TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))]
        >>> type(maybe_dense_stack(same)).__name__
        'TensorDict'
        >>> differ = [TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3))]
        >>> type(maybe_dense_stack(differ)).__name__
        'LazyStackedTensorDict'
    """
    members = _members(input)
    if all(isinstance(m, torch.Tensor) for m in members):
        return torch.stack(members, dim, out=out, **kwargs)
    return LazyStackedTensorDict.maybe_dense_stack(members, dim, out=out, **kwargs)


def dense_stack_tds(td_list: Sequence[Any] | LazyStackedTensorDict, dim: int | None = None) -> Any:
    """Stack the tensordicts of a list, or of a lazy stack, densely where they agree.

    Members that are lazy stacks themselves (or hold lazy stacks) are stacked member by member,
    which ``lazy_stack(...).to_tensordict()`` cannot do; where keys or shapes differ the result
    stays lazy at that level.

    Args:
        td_list: the tensordicts, or a :class:`~tensordict.LazyStackedTensorDict`.
        dim: the stack dimension; for a lazy stack, its own stack dimension by default.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(x=torch.zeros(2, 3), batch_size=[2])
        >>> out = dense_stack_tds([td, td], dim=1)
        >>> type(out).__name__, out.batch_size
        ('TensorDict', torch.Size([2, 2]))
    """
    if isinstance(td_list, LazyStackedTensorDict):
        if dim is None:
            dim = td_list.stack_dim
        td_list = td_list.tensordicts
    members = _members(td_list)
    dim = 0 if dim is None else dim
    first = members[0]
    if not isinstance(first, LazyStackedTensorDict):
        return stack_or_lazy(members, dim)
    # members are lazy stacks: stack their own members first, then stack the results densely
    inner = first.stack_dim
    if any(
        not isinstance(m, LazyStackedTensorDict)
        or m.stack_dim != inner
        or len(m.tensordicts) != len(first.tensordicts)
        for m in members
    ):
        return stack_or_lazy([m.to_tensordict() for m in members], dim)
    new_dim = dim if dim >= 0 else dim + first.batch_dims + 1
    inner_dim = inner + 1 if new_dim <= inner else inner
    inner_stack_dim = new_dim if new_dim <= inner else new_dim - 1
    columns = [
        dense_stack_tds([m.tensordicts[i] for m in members], inner_stack_dim)
        for i in range(len(first.tensordicts))
    ]
    return stack_or_lazy(columns, inner_dim)


def make_tensordict(
    input_dict: Mapping[str, Any] | None = None,
    batch_size: Sequence[int] | torch.Size | int | None = None,
    device: Any = None,
    auto_batch_size: bool | None = None,
    **kwargs: Any,
) -> TensorDict:
    """A tensordict from a dict and/or keyword arguments (``input_dict`` wins on a shared key).

    Args:
        input_dict: the entries (nested dicts become nested tensordicts).
        batch_size: the batch size; ``[]`` unless ``auto_batch_size`` is true.
        device: moves every leaf to this device.
        auto_batch_size: infer the largest batch size all entries share.
        **kwargs: more entries.

    Examples:
        >>> make_tensordict(a=torch.zeros(3, 4), b=torch.zeros(3)).batch_size
        torch.Size([])
        >>> make_tensordict({"a": torch.zeros(3, 4)}, auto_batch_size=True).batch_size
        torch.Size([3, 4])
    """
    source: dict[str, Any] = dict(kwargs)
    if input_dict is not None:
        source.update(input_dict.items())
    return from_dict(source, batch_size=batch_size, device=device, auto_batch_size=auto_batch_size)


def from_dict(
    d: Mapping[str, Any],
    *,
    auto_batch_size: bool | None = None,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | int | None = None,
    names: Sequence[str] | None = None,
) -> Any:
    """A tensordict from a nested dict (the function form of ``TensorDict.from_dict``).

    Examples:
        >>> from_dict({"a": torch.zeros(3, 4)}, batch_dims=1).batch_size
        torch.Size([3])
    """
    if isinstance(batch_size, int):
        batch_size = [batch_size]
    return TensorDict.from_dict(
        d,
        batch_size=batch_size,
        device=device,
        batch_dims=batch_dims,
        auto_batch_size=auto_batch_size,
        names=names,
    )


def fromkeys(keys: Iterable[NestedKey], value: Any = 0) -> TensorDict:
    """A tensordict with every key (nested keys included) set to ``value``.

    Examples:
        >>> td = fromkeys(["a", ("b", "c")], 1)
        >>> td["b", "c"]
        tensor(1)
    """
    return TensorDict.fromkeys(list(keys), value)


def merge_tensordicts(
    *tensordicts: Any,
    callback_exist: Callable[..., Any] | Mapping[NestedKey, Callable[..., Any]] | None = None,
) -> Any:
    """Merge tensordicts into a new one; for a key present in several, the first one wins.

    Args:
        *tensordicts: at least two tensordicts with one batch size.
        callback_exist: for a key present in EVERY tensordict, called with all its values
            (``callback(v0, v1, ...)``, as upstream) and its result stored; a mapping from key
            to callback gives one per key (keys without one keep the first value).

    Raises:
        ValueError: fewer than two tensordicts.

    Examples:
        >>> from tensordict import TensorDict
        >>> m = merge_tensordicts(TensorDict(a=1, b=2), TensorDict(b=3, c=4))
        >>> m["b"], sorted(m.keys())
        (tensor(2), ['a', 'b', 'c'])
        >>> merge_tensordicts(TensorDict(b=2), TensorDict(b=3), callback_exist=max)["b"]
        tensor(3)
    """
    if len(tensordicts) < 2:
        raise ValueError(
            f"merge_tensordicts needs at least 2 tensordicts, got {len(tensordicts)}. "
            "Use .clone() to copy a single one."
        )
    out = tensordicts[0].clone()
    seen: dict[NestedKey, list[Any]] = {
        unravel_key(k): [v]
        for k, v in out.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
    }
    for td in tensordicts[1:]:
        for key, value in td.items(
            include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
        ):
            values = seen.setdefault(unravel_key(key), [])
            if not values:
                out.set(key, value)
            values.append(value)
    if callback_exist is None:
        return out
    callbacks = (
        {unravel_key(k): v for k, v in callback_exist.items()}
        if isinstance(callback_exist, Mapping)
        else None
    )
    for key, values in seen.items():
        callback = callbacks.get(key) if callbacks is not None else callback_exist
        if len(values) == len(tensordicts) and callback is not None:
            out.set(key, callback(*values))  # type: ignore[operator]
    return out


# ------------------------------------------------------------------------ dtype predicates
def _dtype_of(args: tuple[Any, ...]) -> torch.dtype:
    if not args:
        raise TypeError("expected a value (or a key and a value), got no argument.")
    value = args[-1]
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"expected a tensor (or tensordict) with a dtype as last argument, got "
            f"{type(value).__name__}."
        )
    return dtype


def is_floating(*args: Any) -> bool:
    """Whether the last argument has a floating-point dtype (usable as ``fn(key, value)``).

    Examples:
        >>> is_floating(torch.zeros(3)), is_floating("key", torch.zeros(3, dtype=torch.long))
        (True, False)
    """
    return _dtype_of(args).is_floating_point


def is_integer(*args: Any) -> bool:
    """Whether the last argument has an integer dtype (``bool`` is not an integer).

    Examples:
        >>> is_integer(torch.zeros(1, dtype=torch.uint8)), is_integer(torch.zeros(1).bool())
        (True, False)
    """
    dtype = _dtype_of(args)
    return not (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool)


def is_inexact(*args: Any) -> bool:
    """Whether the last argument has a floating-point or complex dtype.

    Examples:
        >>> is_inexact(torch.zeros(1, dtype=torch.complex64)), is_inexact(torch.zeros(1).long())
        (True, False)
    """
    dtype = _dtype_of(args)
    return dtype.is_floating_point or dtype.is_complex


def is_bool(*args: Any) -> bool:
    """Whether the last argument has the ``bool`` dtype.

    Examples:
        >>> is_bool(torch.ones(2).bool()), is_bool(torch.ones(2))
        (True, False)
    """
    return _dtype_of(args) is torch.bool


# ------------------------------------------------------------------------------ group_by
def group_by(tensordict: Any, key: NestedKey) -> tuple[Any, tuple[Any, ...]]:
    """Split the rows (first batch dimension) into groups sharing the value of an entry.

    Args:
        tensordict: a tensordict (or tensorclass instance) with at least one batch dimension.
        key: a tensor entry, or a non-tensor entry of hashable, sortable values.

    Returns:
        ``(values, groups)``: the sorted unique values (a tensor, or a list for non-tensor
        data) and a tuple of tensordicts, one per value, rows in their original order.

    Raises:
        ValueError: no batch dimension.
        KeyError: no entry ``key``.
        TypeError: the entry is a tensordict, or its values cannot be hashed or sorted.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(uid=torch.tensor([2, 0, 2]), r=torch.arange(3.0), batch_size=[3])
        >>> values, groups = group_by(td, "uid")
        >>> values, [g["r"] for g in groups]
        (tensor([0, 2]), [tensor([1.]), tensor([0., 2.])])
    """
    if not tensordict.batch_size:
        raise ValueError("group_by needs a tensordict with at least one batch dimension.")
    raw = tensordict.get(key, None)
    if raw is None:
        raise KeyError(f"group_by: no entry {key!r} in the tensordict.")
    if isinstance(raw, (NonTensorData, NonTensorStack)) or not isinstance(raw, torch.Tensor):
        if is_tensor_collection(raw) and not isinstance(raw, (NonTensorData, NonTensorStack)):
            raise TypeError(f"group_by: the entry {key!r} is a tensordict; give a leaf entry.")
        return _group_objects(tensordict, key, raw)
    column = raw.reshape(raw.shape[0], -1) if raw.ndim > 1 else raw
    values, inverse = torch.unique(column, dim=0, return_inverse=True)
    order = torch.sort(inverse, stable=True).indices
    counts = torch.bincount(inverse, minlength=values.shape[0]).tolist()
    gathered = tensordict[order]
    groups = tuple(gathered.split(counts, 0))
    if raw.ndim > 1:
        values = values.reshape(values.shape[0], *raw.shape[1:])
    return values, groups


def _group_objects(tensordict: Any, key: NestedKey, raw: Any) -> tuple[Any, tuple[Any, ...]]:
    n = tensordict.batch_size[0]
    if isinstance(raw, NonTensorStack):
        rows = raw.tolist()
    else:
        rows = [raw.data if isinstance(raw, NonTensorData) else raw] * n
    rows = [_hashable(r) for r in rows]
    try:
        values = sorted(set(rows))
    except TypeError as err:
        raise TypeError(
            f"group_by: the values of {key!r} must be hashable and sortable ({err})."
        ) from err
    groups = tuple(
        tensordict[torch.tensor([i for i, r in enumerate(rows) if r == v])] for v in values
    )
    return values, groups


def _hashable(row: Any) -> Any:
    return tuple(_hashable(r) for r in row) if isinstance(row, list) else row


# --------------------------------------------------------------------- membership, dedup
def _batch_dim(td: Any, dim: int, message: str) -> int:
    d = dim if dim >= 0 else dim + td.batch_dims  # a batch dimension, not the leaf's
    if not 0 <= d < td.batch_dims:
        raise ValueError(
            f"{message.format(dim=dim, bs=td.batch_size)} Give a dim in "
            f"[{-td.batch_dims}, {td.batch_dims - 1}]."
        )
    return d


def _rows(value: torch.Tensor, d: int) -> torch.Tensor:
    """The slices of ``value`` along dimension ``d``, one flattened row each."""
    return value.movedim(d, 0).reshape(value.shape[d], -1)


def isin(input: Any, reference: Any, key: NestedKey, dim: int = 0) -> torch.Tensor:
    """Which elements of ``input`` along ``dim`` have a ``key`` slice equal to one of
    ``reference``'s.

    Raises:
        KeyError: ``key`` is missing or not a tensor in either tensordict.
        ValueError: different numbers of batch dimensions, or ``dim`` not a batch dimension.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(x=torch.tensor([1, 2, 3, 4]), batch_size=[4])
        >>> isin(td, TensorDict(x=torch.tensor([2, 4]), batch_size=[2]), "x")
        tensor([False,  True, False,  True])
    """
    a, b = input.get(key, None), reference.get(key, None)
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise KeyError(
            f"Key '{key}' not found in input or not a tensor. isin compares a tensor entry "
            "that both tensordicts hold."
        )
    if input.batch_dims != reference.batch_dims:
        raise ValueError(
            "The number of dimensions in the batch size of the input and reference must be the "
            f"same. Got {list(input.batch_size)} and {list(reference.batch_size)}."
        )
    message = (
        "The specified dimension '{dim}' is invalid for an input TensorDict with batch size {bs}."
    )
    d = _batch_dim(input, dim, message)
    a, b = _rows(a, d), _rows(b, d)
    if a.shape[1:] != b.shape[1:]:
        raise ValueError(f"isin: the entries {key!r} differ in shape outside dim={dim}.")
    return (a.unsqueeze(1) == b.unsqueeze(0)).all(-1).any(-1)


def remove_duplicates(
    input: Any, key: NestedKey, dim: int = 0, *, return_indices: bool = False
) -> Any:
    """Keep the first element of each group of equal ``key`` slices along ``dim``.

    The result is sorted by the value of ``key``.

    Returns:
        The deduplicated tensordict, and with ``return_indices=True`` also, for each element of
        ``input``, the index of its value in the result.

    Raises:
        KeyError: ``key`` is missing or not a tensor.
        ValueError: ``dim`` is not a batch dimension.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(x=torch.tensor([7, 1, 7, 3]), y=torch.arange(4), batch_size=[4])
        >>> out, idx = remove_duplicates(td, "x", return_indices=True)
        >>> out["x"], out["y"], idx
        (tensor([1, 3, 7]), tensor([1, 3, 0]), tensor([2, 0, 2, 1]))
    """
    value = input.get(key, None)
    if value is None:
        raise KeyError(f"The key '{key}' does not exist in the TensorDict.")
    if not isinstance(value, torch.Tensor):
        raise KeyError(
            f"The key '{key}' does not point to a tensor in the TensorDict (got "
            f"{type(value).__name__}). Give the key of a tensor entry."
        )
    message = "The specified dimension '{dim}' is invalid for a TensorDict with batch size {bs}."
    d = _batch_dim(input, dim, message)
    flat = _rows(value, d)
    _, inverse = torch.unique(flat, dim=0, return_inverse=True)
    n = int(inverse.max()) + 1 if inverse.numel() else 0
    positions = torch.arange(inverse.shape[0])
    first = torch.full((n,), inverse.shape[0], dtype=torch.long)
    first = first.scatter_reduce(0, inverse, positions, reduce="amin")
    out = input[(slice(None),) * d + (first,)]
    return (out, inverse) if return_indices else out


#: numpy dtype -> torch dtype, for every dtype both libraries have
NUMPY_TO_TORCH_DTYPE_DICT: dict[np.dtype, torch.dtype] = {
    np.dtype(name): getattr(torch, name)
    for name in (
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
    if hasattr(torch, name)
}


def _key_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return id(value)
    if isinstance(value, tuple):
        return tuple(_key_of(v) for v in value)
    if isinstance(value, list):
        return tuple(_key_of(v) for v in value)
    return value


def make_cache_key(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, Any]:
    """A hashable key for a call: ``(args, sorted keyword items)``, tensors replaced by their id.

    Examples:
        >>> make_cache_key((1, (2, 3)), {"b": "c", "a": 0})
        ((1, (2, 3)), (('a', 0), ('b', 'c')))
    """
    return (
        tuple(_key_of(a) for a in args),
        tuple((k, _key_of(kwargs[k])) for k in sorted(kwargs)),
    )


publish_as("tensordict._td", fromkeys, lazy_stack, maybe_dense_stack)  # upstream's path
