"""numpy structured arrays: one field per entry, nested structured dtypes as nested tensordicts.

A structured array of shape ``S`` gives a tensordict of batch size ``S``; a field of sub-array
dtype (``("x", "f4", (3,))``) a tensor with trailing dimensions; string and object fields
non-tensor stacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.dense import TensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import FormatValueError

__all__ = ["from_struct_array", "to_struct_array"]


def from_struct_array(
    struct_array: np.ndarray,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
) -> TensorDict:
    """A numpy structured array as a tensordict (nested dtypes nested). Numeric fields share
    the array's memory where torch can view them (as upstream), else are copied.

    Examples:
        >>> arr = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i8"), ("b", "f4")])
        >>> td = from_struct_array(arr)
        >>> td.batch_size, td["a"]
        (torch.Size([2]), tensor([1, 3]))
    """
    if not isinstance(struct_array, np.ndarray) or struct_array.dtype.names is None:
        raise FormatValueError(
            f"from_struct_array expects a numpy structured array (a dtype with named fields), "
            f"got {type(struct_array).__name__} of dtype "
            f"{getattr(struct_array, 'dtype', None)}."
        )
    td = TensorDict(_fields(struct_array), batch_size=struct_array.shape, device=device)
    if batch_size is not None:
        td.batch_size = batch_size
    elif batch_dims is not None:
        td.batch_size = td.batch_size[:batch_dims]
    elif auto_batch_size:
        td.auto_batch_size_()
    return td


def _fields(array: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in array.dtype.names or ():
        field = array[name]
        if field.dtype.names is not None:
            out[name] = TensorDict(_fields(field), batch_size=field.shape)
        elif field.dtype.kind in "OSUV":
            values = np.array(field.astype(object) if field.dtype.kind != "O" else field)
            if values.ndim == 0:  # one record: its value, not a stack of none
                out[name] = NonTensorData._new(values[()], torch.Size([]), None)
            else:
                out[name] = NonTensorStack.from_array(values)
        else:
            out[name] = _shared_tensor(field)
    return out


def _shared_tensor(field: np.ndarray) -> torch.Tensor:
    """A tensor viewing the field's memory (as upstream: writes to the array show), or a copy
    when torch cannot view it (strides that are not a multiple of the item size)."""
    try:
        return torch.from_numpy(field)
    except (ValueError, RuntimeError, TypeError):
        return torch.from_numpy(np.ascontiguousarray(field).copy())


def _text_dtype(values: np.ndarray) -> np.dtype:
    """numpy's string dtype for an object array of ``str`` (or ``bytes``), else ``object``."""
    flat = values.reshape(-1).tolist()
    for kind in (str, bytes):
        if flat and all(isinstance(v, kind) for v in flat):
            return np.array(flat).dtype
    return np.dtype(object)


def to_struct_array(td: Any) -> np.ndarray:
    """A tensordict as a numpy structured array of shape ``td.batch_size`` (values copied).

    Non-tensor entries become string fields when they hold only ``str`` (or ``bytes``), object
    fields otherwise; tensorclasses become nested fields.

    Raises:
        FormatValueError: a dtype numpy has no counterpart for (bfloat16).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(2), "b": {"c": torch.zeros(2, 3)}}, [2])
        >>> arr = to_struct_array(td)
        >>> arr.dtype.names, arr["b"]["c"].shape
        (('a', 'b'), (2, 3))
    """
    if getattr(type(td), "_is_tensorclass", False):
        td = td._tensordict
    bs = tuple(td.batch_size)
    dtype = _dtype(td, bs)
    out = np.empty(bs, dtype=dtype)
    _fill(out, td, bs)
    return out


def _dtype(td: Any, bs: tuple[int, ...]) -> np.dtype:
    from tensordict.core.behaviour.base import TensorDictBase
    from tensordict.formats.node import to_numpy

    fields: list[Any] = []
    for key, value in td._own_items():
        if getattr(type(value), "_is_tensorclass", False):
            value = value._tensordict
        if isinstance(value, TensorDictBase):
            fields.append((key, _dtype(value, bs)))
        elif isinstance(value, (NonTensorData, NonTensorStack)):
            fields.append((key, _text_dtype(np.asarray(value.to_array()))))
        else:
            sample = to_numpy(key, value[(0,) * len(bs)] if bs else value, "numpy")
            fields.append((key, sample.dtype, value.shape[len(bs) :]))
    return np.dtype(fields)


def _fill(out: np.ndarray, td: Any, bs: tuple[int, ...]) -> None:
    from tensordict.core.behaviour.base import TensorDictBase

    for key, value in td._own_items():
        if getattr(type(value), "_is_tensorclass", False):
            value = value._tensordict
        if isinstance(value, TensorDictBase):
            _fill(out[key], value, bs)
        elif isinstance(value, NonTensorData):
            out[key] = value.data
        elif isinstance(value, NonTensorStack):
            out[key] = value.to_array()
        else:
            out[key] = value.detach().cpu().numpy()
