"""Python structures to tensordicts and back: ``from_namedtuple``, ``from_tuple``, ``from_any``,
``from_list``, ``from_pytree``, ``to_namedtuple``, ``to_pytree``.

Containers become (nested) tensordicts: a namedtuple's fields, a tuple's positions (keys
``"0"``, ``"1"``, ...), a dict's keys, a dataclass's fields, a structured numpy array's fields.
Leaves are stored as a :class:`~tensordict.TensorDict` stores them (numbers become tensors,
other objects non-tensor data). A format's own object met on the way (a pandas DataFrame, an
open ``h5py.File``) is read by its format (:func:`from_format_object`).
"""

from __future__ import annotations

import collections
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core import factory
from tensordict.core.behaviour.base import is_tensor_collection
from tensordict.core.behaviour.combine import stack_or_lazy
from tensordict.core.collection import publish_as
from tensordict.core.dense import TensorDict
from tensordict.core.nontensor.data import NonTensorStack, is_non_tensor

__all__ = [
    "from_any",
    "from_format_object",
    "from_list",
    "from_namedtuple",
    "from_pytree",
    "from_tuple",
    "to_namedtuple",
    "to_pytree",
]

#: the entry that records the container type of a pytree node
PYTREE_TYPE = "_pytree_type"
#: prefix of the entries that hold a dict key which is not a string (with its value)
PYTREE_KEY = "_pytree_key_"


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _finish(
    td: TensorDict,
    auto_batch_size: bool,
    batch_dims: int | None,
    device: Any,
    batch_size: Sequence[int] | torch.Size | None,
) -> TensorDict:
    if batch_size is not None and auto_batch_size:
        raise ValueError("give batch_size or auto_batch_size=True, not both.")
    if batch_size is not None:
        td.batch_size = torch.Size(batch_size)
    elif auto_batch_size:
        td.auto_batch_size_(batch_dims)
    return td.to(device) if device is not None else td


def from_format_object(
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
) -> Any:
    """``obj`` as a tensordict if it is a pandas DataFrame or an open ``h5py.File``, else None.

    The part of :func:`from_any` that reads a format's own object. A library that was never
    imported cannot have made ``obj``, so nothing is imported here.

    Examples:
        >>> import pandas as pd
        >>> from_format_object(pd.DataFrame({"a": [1, 2]}))["a"]
        tensor([1, 2])
        >>> from_format_object([1, 2]) is None
        True
    """
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, pd.DataFrame):
        return factory.from_pandas(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
    h5py = sys.modules.get("h5py")
    if h5py is not None and isinstance(obj, h5py.File):
        if auto_batch_size or batch_size is None:
            out = factory.PersistentTensorDict(group=obj)
            return out.auto_batch_size_(batch_dims=batch_dims) if auto_batch_size else out
        return factory.PersistentTensorDict(group=obj, batch_size=batch_size)
    return None


def _convert(obj: Any) -> Any:
    """A value as stored in a tensordict: containers converted, leaves as they are."""
    if isinstance(obj, torch.Tensor) or is_tensor_collection(obj):
        return obj
    if _is_namedtuple(obj):
        return TensorDict({f: _convert(v) for f, v in zip(obj._fields, obj)})
    if isinstance(obj, tuple):
        return TensorDict({str(i): _convert(v) for i, v in enumerate(obj)})
    if type(obj) is not dict:  # a format's own object (an h5py.File is a Mapping too)
        formatted = from_format_object(obj)
        if formatted is not None:
            return formatted
    if isinstance(obj, Mapping):
        return TensorDict({k: _convert(v) for k, v in obj.items()})
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return TensorDict({f.name: _convert(getattr(obj, f.name)) for f in dataclasses.fields(obj)})
    if isinstance(obj, np.ndarray) and obj.dtype.names is not None:
        return TensorDict.from_struct_array(obj, auto_batch_size=True)
    return obj


def from_namedtuple(
    named_tuple: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
) -> TensorDict:
    """A tensordict with one entry per field of a namedtuple (nested namedtuples nest).

    Args:
        named_tuple: the namedtuple.
        auto_batch_size: infer the largest batch size the entries share (at most ``batch_dims``
            dimensions).
        batch_dims: see ``auto_batch_size``.
        device: move every leaf to this device.
        batch_size: the batch size (exclusive with ``auto_batch_size``).

    Raises:
        TypeError: ``named_tuple`` is not a namedtuple.

    Examples:
        >>> from collections import namedtuple
        >>> Pair = namedtuple("Pair", "a b")
        >>> td = from_namedtuple(Pair(a=torch.zeros(3, 4), b=Pair(a=torch.ones(3), b=1)))
        >>> td["b", "a"].shape, td.batch_size
        (torch.Size([3]), torch.Size([]))
        >>> from_namedtuple(Pair(torch.zeros(3, 4), torch.ones(3)), auto_batch_size=True).shape
        torch.Size([3])
    """
    if not _is_namedtuple(named_tuple):
        raise TypeError(f"expected a namedtuple, got {type(named_tuple).__name__}.")
    return _finish(_convert(named_tuple), auto_batch_size, batch_dims, device, batch_size)


def from_list(
    cls: Any,
    input: Sequence[Any],
    *,
    auto_batch_size: bool | None = None,
    batch_size: Sequence[int] | None = None,
    device: Any = None,
    batch_dims: int | None = None,
    names: Sequence[str | None] | None = None,
    lazy: bool | None = None,
) -> Any:
    """``cls.from_list``: the elements (dicts built with ``cls.from_dict``, or tensor
    collections) stacked along a new first dimension, lazily with ``lazy=True``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from_list(TensorDict, [{"a": 1}, {"a": 2}], lazy=True)["a"]
        tensor([1, 2])
    """
    element_bs = None if batch_size is None else list(batch_size)[1:]
    items = [
        x
        if is_tensor_collection(x)
        else cls.from_dict(
            x,
            batch_size=element_bs,
            device=device,
            batch_dims=batch_dims,
            auto_batch_size=auto_batch_size,
        )
        for x in input
    ]
    out = cls.lazy_stack(items, 0) if lazy else stack_or_lazy(items, 0)
    if names is not None:
        out.names = names
    return out


def from_tuple(
    obj: tuple[Any, ...],
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
) -> TensorDict:
    """A tensordict with keys ``"0"``, ``"1"``, ... for the items of a tuple (nested tuples
    nest).

    Raises:
        TypeError: ``obj`` is not a tuple.

    Examples:
        >>> td = from_tuple((torch.zeros(3), (torch.ones(3, 2), torch.ones(3))))
        >>> sorted(td.keys(True, True), key=str)
        [('1', '0'), ('1', '1'), '0']
    """
    if not isinstance(obj, tuple):
        raise TypeError(f"expected a tuple, got {type(obj).__name__}.")
    td = TensorDict({str(i): _convert(v) for i, v in enumerate(obj)})
    return _finish(td, auto_batch_size, batch_dims, device, batch_size)


def from_any(
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
) -> Any:
    """Convert a dict, tuple, dataclass, structured array, DataFrame or h5py.File, recursively.

    A list becomes a tensor when torch can make one of it, else a :class:`NonTensorStack`. A
    tensor or a tensor collection is returned as it is, and so is any other object.

    Examples:
        >>> td = from_any({"obs": torch.zeros(3, 4), "pair": (torch.zeros(3), 1)})
        >>> sorted(td.keys(include_nested=True, leaves_only=True), key=str)
        [('pair', '0'), ('pair', '1'), 'obs']
        >>> from_any({"obs": torch.zeros(3, 4)}, auto_batch_size=True).batch_size
        torch.Size([3, 4])
    """
    if isinstance(obj, np.ndarray) and obj.dtype.names is not None:
        return TensorDict.from_struct_array(
            obj,
            auto_batch_size=auto_batch_size or batch_size is None,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
    formatted = from_format_object(
        obj,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
    )
    if formatted is not None:  # a pandas DataFrame or an h5py.File
        return formatted
    if isinstance(obj, list):
        return _from_list(obj)
    if isinstance(obj, Mapping) and not is_tensor_collection(obj) and batch_size is not None:
        auto_batch_size = False  # as upstream: a dict's batch_size wins
    converted = _convert(obj)
    if converted is obj or not isinstance(converted, TensorDict):
        return obj
    return _finish(converted, auto_batch_size, batch_dims, device, batch_size)


def _from_list(obj: list[Any]) -> Any:
    """A list as upstream's ``from_any`` reads it: a tensor when torch can make one (nested
    lists of numbers of one shape), else a :class:`NonTensorStack` of its items."""
    try:
        return torch.tensor(obj)
    except (TypeError, ValueError, RuntimeError):
        return NonTensorStack.from_list(obj)


def _pytree_node(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor) or is_tensor_collection(obj):
        return obj
    if isinstance(obj, (int, float, bool, complex)):
        return torch.as_tensor(obj)
    if isinstance(obj, Mapping):
        items = list(obj.items())
    elif _is_namedtuple(obj):
        items = list(zip(type(obj)._fields, obj))
    elif isinstance(obj, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(obj)]
    else:
        raise NotImplementedError(
            f"from_pytree: cannot store a {type(obj).__name__} ({obj!r}); a pytree holds "
            "tensors, numbers, dicts, lists and tuples."
        )
    td = TensorDict()
    for i, (key, value) in enumerate(items):
        if isinstance(key, str):
            td.set(key, _pytree_node(value))
        else:  # a dict key that is no string: stored with its value under a generated name
            entry = TensorDict(value=_pytree_node(value))
            entry.set_non_tensor("key", key)
            td.set(f"{PYTREE_KEY}{i}", entry)
    td.set_non_tensor(PYTREE_TYPE, type(obj))
    return td


def from_pytree(
    pytree: Any,
    *,
    batch_size: Sequence[int] | torch.Size | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
) -> Any:
    """A pytree (nested dicts, lists, tuples, namedtuples of tensors) as a tensordict.

    Each container becomes a tensordict holding its container type under ``"_pytree_type"``,
    so that ``td.to_pytree()`` rebuilds the same structure. A dict key that
    is not a string is kept, with its value, under a ``"_pytree_key_<n>"`` entry. A tensor is
    returned as it is.

    Raises:
        NotImplementedError: a leaf that is neither a tensor nor a number.

    Examples:
        >>> import torch
        >>> from tensordict.core.serial.convert import to_pytree
        >>> tree = {"a": [torch.zeros(2), (torch.ones(2),)], "b": torch.zeros(2)}
        >>> td = from_pytree(tree)
        >>> td["a", "1", "0"]
        tensor([1., 1.])
        >>> to_pytree(td)
        {'a': [tensor([0., 0.]), (tensor([1., 1.]),)], 'b': tensor([0., 0.])}
    """
    node = _pytree_node(pytree)
    if not isinstance(node, TensorDict):
        return node
    return _finish(node, auto_batch_size, batch_dims, None, batch_size)


def to_pytree(td: Any) -> Any:
    """Rebuild the pytree a tensordict made by :func:`from_pytree` stands for.

    A tensordict without a recorded container type is returned as it is.

    Examples:
        >>> from collections import namedtuple
        >>> P = namedtuple("P", "x y")
        >>> to_pytree(from_pytree(P(torch.zeros(1), [torch.ones(1)])))
        P(x=tensor([0.]), y=[tensor([1.])])
    """
    if not isinstance(td, TensorDict):
        return td
    kind = td.get(PYTREE_TYPE, None)
    if kind is None:
        return td
    cls = kind.data
    values: dict[Any, Any] = {}
    for k in td._own_keys():
        if k == PYTREE_TYPE:
            continue
        if k.startswith(PYTREE_KEY):
            entry = td.get(k)
            values[entry.get("key").data] = to_pytree(entry.get("value"))
        else:
            values[k] = to_pytree(td.get(k))
    if issubclass(cls, Mapping):
        return cls(values)
    fields = getattr(cls, "_fields", None)
    if fields is not None:  # a namedtuple
        return cls(*(values[f] for f in fields))
    return cls(values[str(i)] for i in range(len(values)))


def to_namedtuple(td: Any, dest_cls: Any = None) -> Any:
    """The entries of ``td`` as a namedtuple (``GenericDict``), nested tensordicts as nested
    namedtuples and non-tensor data as its python value.

    Examples:
        >>> td = TensorDict(a=torch.zeros(1), n={"b": torch.ones(1)})
        >>> to_namedtuple(td)
        GenericDict(a=tensor([0.]), n=GenericDict(b=tensor([1.])))
    """
    values: dict[str, Any] = {}
    for key, value in td._own_items():
        if is_non_tensor(value):
            values[key] = value.tolist() if isinstance(value, NonTensorStack) else value.data
        elif isinstance(value, torch.Tensor):
            values[key] = value
        else:
            inner = value._tensordict if getattr(type(value), "_is_tensorclass", False) else value
            values[key] = to_namedtuple(inner)
    cls = dest_cls if dest_cls is not None else collections.namedtuple("GenericDict", list(values))
    return cls(**values)


publish_as("tensordict._td", from_pytree)  # upstream's path
