"""Python objects stored in a tensordict: :class:`NonTensorData` and :class:`NonTensorStack`.

``NonTensorData`` holds one object broadcast over a batch (``td["label"] = "cat"``).
``NonTensorStack`` holds one object per batch element, in a numpy object array of the batch shape,
so that every index and shape operation that works on tensors works on it too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.indexing import plan_index, to_numpy_index
from tensordict.errors import BatchSizeError, MetaDataTypeError

__all__ = ["MetaData", "NonTensorData", "NonTensorStack", "is_non_tensor", "same_value"]


def same_value(a: Any, b: Any) -> bool:
    """Whether two stored python objects are equal, without failing on array-like values."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        eq = a == b
    except Exception:
        return False
    if isinstance(eq, bool):
        return eq
    try:
        return bool(np.all(np.asarray(eq)))
    except Exception:
        return False


def _object_array(values: Any, shape: Sequence[int] | None = None) -> np.ndarray:
    """Build an object array without numpy descending into list-valued elements."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    if shape is None:
        shape = _nested_shape(values)
    out = np.empty(tuple(shape), dtype=object)
    if out.ndim == 0:
        out[()] = values
        return out
    for idx in np.ndindex(*out.shape):
        v = values
        for i in idx:
            v = v[i]
        out[idx] = v
    return out


def _nested_shape(values: Any) -> list[int]:
    shape: list[int] = []
    v = values
    while isinstance(v, (list, tuple)):
        shape.append(len(v))
        if not v:
            break
        v = v[0]
    return shape


def _normalise_size(batch_size: Any) -> torch.Size:
    if batch_size is None:
        return torch.Size([])
    if isinstance(batch_size, int):
        return torch.Size([batch_size])
    return torch.Size(batch_size)


class NonTensorData:
    """A python object broadcast over the batch dimensions of a tensordict.

    ``td["key"]`` returns the object itself; ``td.get("key")`` returns this wrapper.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"label": "cat"}, batch_size=[3])
        >>> td["label"]
        'cat'
        >>> td.get("label")
        NonTensorData(data=cat, batch_size=torch.Size([3]), device=None)
        >>> td[0]["label"]
        'cat'
    """

    __slots__ = ("_batch_size", "_device", "data")
    data: Any

    def __init__(
        self,
        data: Any,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        if isinstance(data, NonTensorData):
            data = data.data
        self.data = data
        self._batch_size = _normalise_size(batch_size)
        self._device = torch.device(device) if device is not None else None

    @classmethod
    def _new(cls, data: Any, batch_size: torch.Size, device: torch.device | None) -> NonTensorData:
        self = object.__new__(cls)
        self.data = data
        self._batch_size = batch_size
        self._device = device
        return self

    # -- shape ---------------------------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        self._batch_size = _normalise_size(value)

    shape = batch_size

    @property
    def batch_dims(self) -> int:
        return len(self._batch_size)

    ndim = batch_dims

    @property
    def device(self) -> torch.device | None:
        return self._device

    def numel(self) -> int:
        return self._batch_size.numel()

    def __len__(self) -> int:
        return self._batch_size[0] if self._batch_size else 0

    def _with_batch_size(self, batch_size: torch.Size) -> NonTensorData:
        return type(self)._new(self.data, batch_size, self._device)

    def _transform(self, leaf_fn: Callable[[torch.Tensor], torch.Tensor]) -> NonTensorData:
        shape = leaf_fn(torch.empty(self._batch_size, device="meta")).shape
        return self._with_batch_size(shape)

    def __getitem__(self, index: Any) -> NonTensorData:
        return self._with_batch_size(plan_index(index, self._batch_size).batch_size)

    def _index_planned(self, batch_size: torch.Size, leaf_index: Any) -> NonTensorData:
        return self._with_batch_size(batch_size)

    # -- conversion ----------------------------------------------------------------------------
    def tolist(self) -> Any:
        """The object repeated over the batch as nested lists (the object itself for no batch)."""
        return _object_array_full(self.data, self._batch_size).tolist()

    def to_array(self) -> np.ndarray:
        """An object array of the batch shape filled with the object."""
        return _object_array_full(self.data, self._batch_size)

    def clone(self, recurse: bool = True) -> NonTensorData:
        return self._with_batch_size(self._batch_size)

    def to(self, *args: Any, **kwargs: Any) -> NonTensorData:
        device = kwargs.get("device")
        for a in args:
            if isinstance(a, (str, torch.device)):
                device = a
        if device is None:
            return self
        return type(self)._new(self.data, self._batch_size, torch.device(device))

    def cpu(self) -> NonTensorData:
        return self.to("cpu")

    def __eq__(self, other: object) -> Any:
        if isinstance(other, NonTensorData):
            return torch.full(self._batch_size, same_value(self.data, other.data))
        if isinstance(other, NonTensorStack):
            return other == self
        return NotImplemented

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        text = str(self.data)
        if len(text) > 200:
            text = text[:20] + "  ...  " + text[-20:]
        return (
            f"{type(self).__name__}(data={text}, batch_size={self._batch_size}, "
            f"device={self._device})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self)._new, (self.data, self._batch_size, self._device))


class MetaData(NonTensorData):
    """One python object describing a whole batch (a configuration, a dataset name).

    It behaves as :class:`NonTensorData`, except that indexing, reshaping and stacking keep it
    one object: a stack of members holding *the same object* (``is``) is one ``MetaData`` with
    the stacked batch size; ``clone()`` copies the object, so a clone and its source are then
    stacked as a :class:`NonTensorStack`. ``MetaData[cls]`` is a subclass that only accepts
    instances of ``cls``.

    Examples:
        >>> import torch
        >>> from tensordict import MetaData, TensorDict
        >>> config = {"lr": 0.1}
        >>> td = TensorDict(a=torch.zeros(3), config=MetaData(config), batch_size=[3])
        >>> stacked = torch.stack([td, td])
        >>> type(stacked.get("config")).__name__, stacked["config"] is config
        ('MetaData', True)
        >>> MetaData[str]("imagenet").data
        'imagenet'
    """

    __slots__ = ()
    #: the class ``MetaData[cls]`` accepts (None: anything)
    _expected_type: Any = None
    _typed_classes: dict[Any, type[MetaData]] = {}

    def __init__(
        self,
        data: Any,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(data, batch_size, device, names)
        expected = type(self)._expected_type
        if expected is not None and not isinstance(self.data, expected):
            raise MetaDataTypeError(
                f"Expected data of type {getattr(expected, '__name__', expected)}, got "
                f"{type(self.data).__name__}: {type(self).__name__} only holds instances of "
                f"{getattr(expected, '__name__', expected)}. Convert the value or use MetaData."
            )

    def __class_getitem__(cls, item: Any) -> type[MetaData]:
        if cls is not MetaData:
            raise TypeError(f"Cannot specify type for {cls.__name__}: subscript MetaData itself.")
        found = MetaData._typed_classes.get(item)
        if found is None:
            name = f"MetaData[{getattr(item, '__name__', str(item))}]"
            found = type(name, (MetaData,), {"__slots__": (), "_expected_type": item})
            found.__qualname__ = name
            found.__module__ = __name__
            MetaData._typed_classes[item] = found
        return found

    def clone(self, recurse: bool = True) -> MetaData:
        """A copy holding a copy of the object (``copy.deepcopy``)."""
        out = type(self)._new(copy.deepcopy(self.data), self._batch_size, self._device)
        return out  # type: ignore[return-value]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_metadata, (self._expected_type, self.data, self._batch_size, self._device))


def _rebuild_metadata(
    expected: Any, data: Any, batch_size: torch.Size, device: torch.device | None
) -> MetaData:
    cls = MetaData if expected is None else MetaData[expected]  # type: ignore[misc]
    return cls._new(data, batch_size, device)  # type: ignore[return-value]


def _object_array_full(value: Any, batch_size: torch.Size) -> np.ndarray:
    out = np.empty(tuple(batch_size), dtype=object)
    if out.ndim == 0:
        out[()] = value
    else:
        out.fill(value)
    return out


class NonTensorStack:
    """One python object per batch element.

    Made when different objects are written into parts of a batch, or when tensordicts holding
    different objects under a key are stacked. ``td["key"]`` returns the objects as nested lists.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"s": "a"}, batch_size=[4])
        >>> td[1::2] = TensorDict({"s": "b"}, batch_size=[2])
        >>> td["s"]
        ['a', 'b', 'a', 'b']
        >>> td[1]["s"]
        'b'
    """

    __slots__ = ("_device", "values")

    def __init__(self, values: Any, device: torch.device | str | None = None) -> None:
        self.values = _object_array(values)
        self._device = torch.device(device) if device is not None else None

    @classmethod
    def from_array(cls, values: np.ndarray, device: torch.device | None = None) -> NonTensorStack:
        self = object.__new__(cls)
        self.values = values
        self._device = device
        return self

    @property
    def batch_size(self) -> torch.Size:
        return torch.Size(self.values.shape)

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        size = _normalise_size(value)
        if size != self.batch_size:
            raise BatchSizeError(
                f"cannot set batch_size={list(size)} on a NonTensorStack of shape "
                f"{list(self.batch_size)}: it holds one object per element. Reshape it instead."
            )

    shape = batch_size

    @property
    def batch_dims(self) -> int:
        return self.values.ndim

    ndim = batch_dims

    @property
    def device(self) -> torch.device | None:
        return self._device

    def numel(self) -> int:
        return int(self.values.size)

    def __len__(self) -> int:
        return self.values.shape[0] if self.values.ndim else 0

    @property
    def data(self) -> Any:
        return self.tolist()

    def tolist(self) -> Any:
        """The objects as nested lists of the batch shape."""
        return self.values.tolist()

    def to_array(self) -> np.ndarray:
        return self.values

    def _wrap(self, values: np.ndarray) -> NonTensorData | NonTensorStack:
        if values.ndim == 0:
            return NonTensorData._new(values[()], torch.Size([]), self._device)
        return NonTensorStack.from_array(values, self._device)

    def __getitem__(self, index: Any) -> NonTensorData | NonTensorStack:
        plan = plan_index(index, self.batch_size)
        return self._index_planned(plan.batch_size, plan.leaf_index)

    def _index_planned(
        self, batch_size: torch.Size, leaf_index: Any
    ) -> NonTensorData | NonTensorStack:
        values = self.values[to_numpy_index(leaf_index)]
        if not isinstance(values, np.ndarray):
            out = np.empty((), dtype=object)
            out[()] = values
            values = out
        return self._wrap(values)

    def _setitem(self, leaf_index: Any, value: Any) -> None:
        idx = to_numpy_index(leaf_index)
        if isinstance(value, NonTensorStack):
            target_shape = np.empty(self.values.shape, dtype=np.uint8)[idx].shape
            self.values[idx] = np.broadcast_to(value.values, target_shape)
        elif isinstance(value, NonTensorData):
            self._fill(idx, value.data)
        else:
            self._fill(idx, value)

    def _fill(self, idx: Any, value: Any) -> None:
        sub = self.values[idx]
        if isinstance(sub, np.ndarray):
            flat = np.empty(sub.shape, dtype=object)
            flat.fill(value)
            self.values[idx] = flat
        else:
            self.values[idx] = value

    def _transform(self, leaf_fn: Callable[[torch.Tensor], torch.Tensor]) -> NonTensorStack:
        positions = leaf_fn(torch.arange(self.values.size).reshape(self.values.shape))
        return NonTensorStack.from_array(self.values.reshape(-1)[positions.numpy()], self._device)

    def maybe_collapse(self) -> NonTensorData | NonTensorStack:
        """A :class:`NonTensorData` when every element holds the same object, else self."""
        flat = self.values.reshape(-1)
        if flat.size and all(same_value(flat[0], v) for v in flat[1:]):
            return NonTensorData._new(flat[0], self.batch_size, self._device)
        return self

    def clone(self, recurse: bool = True) -> NonTensorStack:
        return NonTensorStack.from_array(self.values.copy(), self._device)

    def to(self, *args: Any, **kwargs: Any) -> NonTensorStack:
        device = kwargs.get("device")
        for a in args:
            if isinstance(a, (str, torch.device)):
                device = a
        if device is None:
            return self
        return NonTensorStack.from_array(self.values, torch.device(device))

    def cpu(self) -> NonTensorStack:
        return self.to("cpu")

    def __eq__(self, other: object) -> Any:
        if isinstance(other, (NonTensorData, NonTensorStack)):
            theirs = np.broadcast_to(other.to_array(), self.values.shape)
            flags = [same_value(a, b) for a, b in zip(self.values.reshape(-1), theirs.reshape(-1))]
            return torch.tensor(flags, dtype=torch.bool).reshape(self.values.shape)
        return NotImplemented

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        text = str(self.tolist())
        if len(text) > 50:
            text = text[:50] + "..."
        return (
            f"NonTensorStack(\n    {text},\n    batch_size={self.batch_size},\n"
            f"    device={self._device})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (NonTensorStack.from_array, (self.values, self._device))


def is_non_tensor(value: Any) -> bool:
    """Whether ``value`` is stored python data (``NonTensorData`` or ``NonTensorStack``)."""
    return isinstance(value, (NonTensorData, NonTensorStack))


def _all_same_data(items: Sequence[NonTensorData | NonTensorStack]) -> bool:
    """Whether every item is a NonTensorData holding the same object."""
    first = items[0]
    return isinstance(first, NonTensorData) and all(
        isinstance(i, NonTensorData) and same_value(first.data, i.data) for i in items[1:]
    )


def stack_non_tensor(
    items: Sequence[NonTensorData | NonTensorStack], dim: int
) -> NonTensorData | NonTensorStack:
    """Stack non-tensor entries: equal objects give back a :class:`NonTensorData`."""
    first = items[0]
    if isinstance(first, MetaData) and all(
        isinstance(i, MetaData) and i.data is first.data for i in items[1:]
    ):
        bs = first.batch_size
        return first._with_batch_size(torch.Size((*bs[:dim], len(items), *bs[dim:])))
    if _all_same_data(items):
        bs = first.batch_size
        new_bs = torch.Size((*bs[:dim], len(items), *bs[dim:]))
        return NonTensorData._new(first.data, new_bs, first.device)
    return NonTensorStack.from_array(
        np.stack([i.to_array() for i in items], axis=dim), first.device
    ).maybe_collapse()


def cat_non_tensor(
    items: Sequence[NonTensorData | NonTensorStack], dim: int
) -> NonTensorData | NonTensorStack:
    """Concatenate non-tensor entries along a batch dimension."""
    first = items[0]
    if _all_same_data(items):
        bs = list(first.batch_size)
        bs[dim] = sum(i.batch_size[dim] for i in items)
        return NonTensorData._new(first.data, torch.Size(bs), first.device)
    return NonTensorStack.from_array(
        np.concatenate([i.to_array() for i in items], axis=dim), first.device
    )
