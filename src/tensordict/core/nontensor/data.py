"""Python objects stored in a tensordict: :class:`NonTensorData`, :class:`MetaData` and
:class:`NonTensorStack`.

``NonTensorData`` holds one object for every element of a batch (``td["label"] = "cat"``);
``MetaData`` is a ``NonTensorData`` that stays one object through stacking and reshaping.
``NonTensorStack`` holds one object per batch element, in a numpy object array of the batch
shape, so that every index and shape operation that works on tensors works on it too.

Core code treats them as leaves through a small protocol (``_with_batch_size``, ``_transform``,
``_index_planned``, ``to_array``); every other tensordict method comes from
:mod:`tensordict.core.nontensor.api`, which runs the TensorDict implementation on a *shell*
holding the batch size. As upstream, the value lives in ``_non_tensordict["data"]`` and the shell
is ``_tensordict``, which carries the lock and the shared / memory-mapped flags.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.collection import publish_as
from tensordict.core.factory import forward
from tensordict.core.indexing import plan_index, to_numpy_index
from tensordict.core.nontensor.api import (
    _MISSING,
    LinkedList,
    _device_of,
    _full,
    _NonTensorBase,
    _normalise_size,
    _object_array,
    make_shell,
    same_value,
)
from tensordict.errors import BatchSizeError, LockedError, MetaDataTypeError

__all__ = [
    "LinkedList",
    "MetaData",
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "is_non_tensor",
    "list_to_stack",
    "same_value",
]

_PICKLES = "tensordict.core.serial.upstream_pickle"  # (pickles in upstream's layout)


class NonTensorData(_NonTensorBase):
    """A python object broadcast over the batch dimensions of a tensordict.

    ``td["key"]`` returns the object itself; ``td.get("key")`` returns this wrapper, which
    answers the tensordict API over its batch dimensions (``reshape``, ``to``, ``apply``, ...).

    Args:
        data: the object (a ``NonTensorData`` is unwrapped).
        batch_size: the batch size (default: none).
        device: the device of the holder (the object itself is not moved).
        names: names of the batch dimensions.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"label": "cat"}, batch_size=[3])
        >>> td["label"]
        'cat'
        >>> td.get("label")
        NonTensorData(data=cat, batch_size=torch.Size([3]), device=None)
        >>> td.get("label").reshape(3, 1).batch_size
        torch.Size([3, 1])
    """

    __slots__ = ("_batch_size", "_device", "_non_tensordict")

    def __init__(
        self,
        data: Any = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(data, NonTensorData):
            data = data.data
        self._non_tensordict = {"data": data, "_metadata": None, "_is_non_tensor": True}
        self._batch_size = _normalise_size(batch_size)
        self._device = torch.device(device) if device is not None else None
        self._shell = None
        if names is not None:
            self.names = names

    @classmethod
    def _new(cls, data: Any, batch_size: torch.Size, device: torch.device | None) -> Any:
        self = object.__new__(cls)
        self._non_tensordict = {"data": data, "_metadata": None, "_is_non_tensor": True}
        self._batch_size = batch_size
        self._device = device
        self._shell = None
        return self

    def _make_shell(self) -> Any:
        return make_shell(self._batch_size, self._device)

    def _from_shell(self, td: Any) -> Any:
        out = type(self)._new(self.data, td.batch_size, td.device)
        names = td._names_or_none() if hasattr(td, "_names_or_none") else None
        if names is not None:
            out.names = names
        return out

    # -- value and shape -----------------------------------------------------------------------
    @property
    def data(self) -> Any:
        """The stored object."""
        return self._non_tensordict["data"]

    @data.setter
    def data(self, value: Any) -> None:
        self._non_tensordict["data"] = value
        self._refresh_saved()

    @property
    def batch_size(self) -> torch.Size:
        shell = self._shell
        return self._batch_size if shell is None else shell.batch_size  # type: ignore[no-any-return]

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        size = _normalise_size(value)
        self._batch_size = size
        if self._shell is not None:
            self._shell.batch_size = size

    @property
    def device(self) -> torch.device | None:
        shell = self._shell
        return self._device if shell is None else shell.device  # type: ignore[no-any-return]

    def _with_batch_size(self, batch_size: torch.Size) -> NonTensorData:
        return type(self)._new(self.data, batch_size, self.device)  # type: ignore[no-any-return]

    def _transform(self, leaf_fn: Callable[[torch.Tensor], torch.Tensor]) -> NonTensorData:
        shape = leaf_fn(torch.empty(self.batch_size, device="meta")).shape
        return self._with_batch_size(shape)

    def get(self, key: Any, default: Any = None) -> Any:
        if key in ("data", ("data",)):
            return self.data
        return default

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str) or (isinstance(index, tuple) and index and index[0] == "data"):
            if index in ("data", ("data",)):
                return self.data
            raise KeyError(index)
        return self._with_batch_size(plan_index(index, self.batch_size).batch_size)

    def _index_planned(self, batch_size: torch.Size, leaf_index: Any) -> NonTensorData:
        return self._with_batch_size(batch_size)

    def __setitem__(self, index: Any, value: Any) -> None:
        """Write one value (the same for every element); an element read out of a
        :class:`NonTensorStack` writes it back there.

        Raises:
            ValueError: ``value`` holds different values for different elements.
        """
        plan_index(index, self.batch_size)  # (checks the index)
        if isinstance(value, NonTensorStack):
            value = value.maybe_collapse()
            if isinstance(value, NonTensorStack):
                raise ValueError(
                    "A NonTensorData holds one value for all its elements, so it cannot take "
                    "another value at an index. Call maybe_to_stack() to get a NonTensorStack, "
                    "which holds a value per element."
                )
        data = value.data if isinstance(value, NonTensorData) else value
        self._check_updatable()
        self.data = data
        slot = self.__dict__.get("_stack_slot")
        if slot is not None:
            stack, leaf_index = slot
            stack._fill(to_numpy_index(leaf_index), data)
            stack._refresh_saved()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the stored object (a stored function is callable through its wrapper)."""
        return self.data(*args, **kwargs)

    __torch_function__ = forward(
        "tensordict.core.nontensor.combine", "torch_function", "classmethod"
    )

    # -- shape operations that give one value per element --------------------------------------
    def expand(self, *shape: Any) -> Any:
        """Expand the batch dimensions: a :class:`NonTensorStack` of the value (one per element)."""
        size = self._tensordict.expand(*shape).batch_size
        return NonTensorStack.from_array(_full(self.data, size), self.device)

    def unsqueeze(self, dim: int) -> Any:
        """Add a batch dimension: a :class:`NonTensorStack` of the value, as upstream."""
        size = self._tensordict.unsqueeze(dim).batch_size
        return NonTensorStack.from_array(_full(self.data, size), self.device)

    def maybe_to_stack(self) -> NonTensorStack:
        """This value as a :class:`NonTensorStack` (one element per batch element)."""
        return NonTensorStack.from_array(_full(self.data, self.batch_size), self.device)

    # -- conversion ----------------------------------------------------------------------------
    def tolist(self, *args: Any, **kwargs: Any) -> Any:
        """The object repeated over the batch as nested lists (the object itself for no batch)."""
        return _full(self.data, self.batch_size).tolist()

    def to_array(self) -> np.ndarray:
        """An object array of the batch shape filled with the object."""
        return _full(self.data, self.batch_size)

    def to_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self.data

    def clone(self, recurse: bool = True, **kwargs: Any) -> NonTensorData:
        """A copy (the object itself is deep-copied when ``recurse``)."""
        data = copy.deepcopy(self.data) if recurse else self.data
        out = type(self)._new(data, self.batch_size, self.device)
        if self._maybe_names() is not None:
            out.names = self.names
        return out  # type: ignore[no-any-return]

    def copy(self) -> NonTensorData:
        return self.clone(recurse=False)

    def to(self, *args: Any, **kwargs: Any) -> NonTensorData:
        device = _device_of(args, kwargs)
        if device is _MISSING or device is None:
            return self
        return type(self)._new(self.data, self.batch_size, torch.device(device))  # type: ignore[no-any-return]

    def apply(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> NonTensorData:
        """No tensor to apply ``fn`` to: a copy with the requested batch size / device."""
        bs = kwargs.get("batch_size")
        out = self._with_batch_size(self.batch_size if bs is None else _normalise_size(bs))
        return out

    # -- in-place updates ----------------------------------------------------------------------
    def update(
        self, input_dict_or_td: Any, *args: Any, inplace: bool = False, **kwargs: Any
    ) -> Any:
        """Take the value of another non-tensor entry.

        Raises:
            LockedError: the entry is locked and ``inplace`` is False.
            ValueError: ``input_dict_or_td`` is a :class:`NonTensorStack` (call
                ``maybe_to_stack()`` first).
        """
        self._check_updatable()
        if isinstance(input_dict_or_td, NonTensorStack):
            raise ValueError(
                "Cannot update a NonTensorDataBase object with a NonTensorStack. Call "
                "`non_tensor_data.maybe_to_stack()` before calling update()."
            )
        if self.is_locked and not inplace:
            raise LockedError(
                "Cannot modify locked TensorDict. For in-place modification, consider using the "
                "`set_()` method and make sure the key is present (or update_ / inplace=True)."
            )
        value = input_dict_or_td
        if isinstance(value, NonTensorData):
            value = value.data
        elif isinstance(value, dict) and "data" in value:
            value = value["data"]
        self.data = value
        return self

    def update_(self, input_dict_or_td: Any, *args: Any, **kwargs: Any) -> Any:
        """``update`` in place (allowed on locked, shared and memory-mapped entries)."""
        return self.update(input_dict_or_td, inplace=True)

    def update_at_(self, input_dict_or_td: Any, index: Any, **kwargs: Any) -> Any:
        return self.update(input_dict_or_td, inplace=True)

    # -- comparison, printing, pickling --------------------------------------------------------
    def __eq__(self, other: object) -> Any:
        if isinstance(other, NonTensorData):
            return torch.full(self.batch_size, same_value(self.data, other.data))
        if isinstance(other, NonTensorStack):
            return other == self
        return False

    def __bool__(self) -> bool:
        return bool(self.data)

    def __repr__(self) -> str:
        text = str(self.data)
        if len(text) > 200:
            text = text[:20] + "  ...  " + text[-20:]
        return (
            f"{type(self).__name__}(data={text}, batch_size={self.batch_size}, "
            f"device={self.device})"
        )

    __reduce__ = forward(_PICKLES, "reduce_non_tensor_data")  # upstream's layout
    __setstate__ = forward(_PICKLES, "setstate_non_tensor_data")


#: upstream's common base of NonTensorData and MetaData
NonTensorDataBase = NonTensorData


class MetaData(NonTensorData):
    """One python object describing a whole batch (a configuration, a dataset name).

    It behaves as :class:`NonTensorData`, except that indexing, reshaping, ``expand``,
    ``unsqueeze`` and stacking keep it one object: a stack of members holding *the same object*
    (``is``) is one ``MetaData`` with the stacked batch size; ``clone()`` copies the object, so a
    clone and its source are then stacked as a :class:`NonTensorStack`. ``MetaData[cls]`` is a
    subclass that only accepts instances of ``cls``.

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
        data: Any = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data, batch_size, device, names)
        expected = type(self)._expected_type
        if expected is not None and not isinstance(self.data, expected):
            name = getattr(expected, "__name__", str(expected))
            raise MetaDataTypeError(
                f"Expected data of type {name}, got {type(self.data).__name__}: "
                f"{type(self).__name__} only holds instances of {name}. Convert the value or use "
                "MetaData."
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

    def expand(self, *shape: Any) -> Any:
        return self._from_shell(self._tensordict.expand(*shape))

    def unsqueeze(self, dim: int) -> Any:
        return self._from_shell(self._tensordict.unsqueeze(dim))

    def __reduce__(self) -> tuple[Any, ...]:
        # (``MetaData._rebuild`` pickles as the class's attribute: named by upstream's path)
        return (MetaData._rebuild, (self._expected_type, self.data, self.batch_size, self.device))

    @classmethod
    def _rebuild(
        cls, expected: Any, data: Any, batch_size: torch.Size, device: torch.device | None
    ) -> MetaData:
        typed = MetaData if expected is None else MetaData[expected]  # type: ignore[misc]
        return typed._new(data, batch_size, device)  # type: ignore[no-any-return]


def _as_member_array(item: Any) -> np.ndarray:
    if isinstance(item, (NonTensorData, NonTensorStack)):
        return item.to_array()
    return _full(item, ())


class NonTensorStack(_NonTensorBase):
    """One python object per batch element.

    ``NonTensorStack(*items, stack_dim=0)`` stacks non-tensor entries (or plain objects, each
    one element) along a new dimension, as ``torch.stack`` does. ``td["key"]`` returns the
    objects as nested lists (a :class:`~tensordict.utils.LinkedList` that writes back).

    Examples:
        >>> from tensordict import NonTensorStack, TensorDict
        >>> s = NonTensorStack("a", "b", "c")
        >>> s.batch_size, s[1].data, s.reshape(3, 1).tolist()
        (torch.Size([3]), 'b', [['a'], ['b'], ['c']])
        >>> td = TensorDict({"s": "a"}, batch_size=[4])
        >>> td[1::2] = TensorDict({"s": "b"}, batch_size=[2])
        >>> td["s"]
        LinkedList(['a', 'b', 'a', 'b'])
    """

    # _data_rows: per member along dim 0, whether it was a NonTensorData with batch dims (one
    # value for its elements): reading that member back gives a NonTensorData, as upstream
    __slots__ = ("_data_rows", "_device", "_values")

    def __init__(
        self,
        *items: Any,
        stack_dim: int = 0,
        batch_size: Sequence[int] | None = None,
        device: torch.device | str | int | None = None,
        **kwargs: Any,
    ) -> None:
        self._shell = None
        self._device = torch.device(device) if device is not None else None
        if not items:
            self._values = np.empty((0,), dtype=object)
            return
        arrays = [_as_member_array(i) for i in items]
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise BatchSizeError(
                f"cannot stack non-tensor entries of different batch sizes {sorted(shapes)}; "
                "give every item the same batch size."
            )
        dim = stack_dim if stack_dim >= 0 else stack_dim + arrays[0].ndim + 1
        self._values = np.stack(arrays, axis=dim)
        if dim == 0 and arrays[0].ndim:
            self._data_rows = tuple(isinstance(i, NonTensorData) for i in items)
        if self._device is None:
            first = items[0]
            if isinstance(first, (NonTensorData, NonTensorStack)):
                self._device = first.device
        if batch_size is not None and torch.Size(batch_size) != self.batch_size:
            raise BatchSizeError(
                f"NonTensorStack: the items stack to batch_size={list(self.batch_size)}, not "
                f"the batch_size={list(batch_size)} given."
            )

    @classmethod
    def from_array(cls, values: np.ndarray, device: torch.device | None = None) -> NonTensorStack:
        """A stack around an object array (no copy)."""
        self = object.__new__(cls)
        self._values = values
        self._device = device
        self._shell = None
        return self

    @classmethod
    def from_list(cls, non_tensors: list[Any], device: Any = None) -> NonTensorStack:
        """A stack shaped like the nested list ``non_tensors`` (non-tensor items are unwrapped).

        Examples:
            >>> from tensordict import NonTensorStack
            >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]]).batch_size
            torch.Size([2, 2])
        """
        values = _object_array(non_tensors)
        for idx in np.ndindex(*values.shape):
            if isinstance(values[idx], NonTensorData):
                values[idx] = values[idx].data
        return cls.from_array(values, torch.device(device) if device is not None else None)

    @classmethod
    def from_nontensordata(cls, non_tensor: NonTensorData) -> NonTensorStack:
        """The value of ``non_tensor`` once per element of its batch size."""
        return non_tensor.maybe_to_stack()

    def _make_shell(self) -> Any:
        pos = torch.arange(self._values.size).reshape(self._values.shape)
        return make_shell(self.batch_size, self._device, None, {"_pos": pos})

    def _from_shell(self, td: Any) -> Any:
        pos = td._get_str("_pos", None) if hasattr(td, "_get_str") else None
        if pos is None:  # the shell lost its positions: nothing per element to keep
            raise BatchSizeError(
                "this operation does not keep the elements of a NonTensorStack apart; "
                "convert it with tolist() first."
            )
        values = self._values.reshape(-1)[pos.reshape(-1).numpy()].reshape(tuple(td.batch_size))
        if not values.ndim:  # one element (unbind, ...): the data, as indexing gives it
            return NonTensorData._new(values[()], torch.Size([]), td.device)
        return NonTensorStack.from_array(values, td.device)

    # -- shape and values ----------------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return torch.Size(self._values.shape)

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        size = _normalise_size(value)
        if size != self.batch_size:
            raise BatchSizeError(
                f"cannot set batch_size={list(size)} on a NonTensorStack of shape "
                f"{list(self.batch_size)}: it holds one object per element. Reshape it instead."
            )

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def stack_dim(self) -> int:
        return 0

    @property
    def tensordicts(self) -> list[Any]:
        """The members along the first dimension."""
        out = []
        for i in range(len(self)):
            row = self._data_row(i)
            out.append(self._wrap(self._values[i]) if row is None else row)
        return out

    def _data_row(self, i: Any) -> NonTensorData | None:
        """Member ``i`` as the :class:`NonTensorData` it was stacked as, while its elements still
        hold that one value (else None)."""
        rows = getattr(self, "_data_rows", None)
        if rows is None or not isinstance(i, int) or len(rows) != len(self._values):
            return None
        if not -len(rows) <= i < len(rows) or not rows[i]:
            return None
        values = self._values[i]
        first = values.flat[0]
        if not all(v is first for v in values.flat):
            return None
        return NonTensorData._new(first, torch.Size(values.shape), self._device)  # type: ignore[no-any-return]

    @property
    def data(self) -> Any:
        """The value, when every element holds the same one.

        Raises:
            AttributeError: the elements hold different values (use ``tolist()``).
        """
        collapsed = self.maybe_collapse()
        if isinstance(collapsed, NonTensorData):
            return collapsed.data
        raise AttributeError(
            "Cannot get the non-unique data of a NonTensorStack. Use .tolist() instead."
        )

    def tolist(self, *args: Any, **kwargs: Any) -> Any:
        """The objects as nested lists of the batch shape."""
        return self._values.tolist()

    def _as_linked_list(self) -> LinkedList:
        """``td[key]``: nested lists that write back into this stack."""
        if self._values.ndim == 1:
            return LinkedList(self._values.tolist(), self)
        rows = [NonTensorStack.from_array(self._values[i], self._device) for i in range(len(self))]
        out = LinkedList([r._as_linked_list() for r in rows], self)
        for row, inner in zip(rows, out):
            inner._ref = lambda r=row: r  # views of this stack's array: writes go through
        return out

    def _write_positions(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            for i, v in zip(range(*index.indices(len(self))), value):
                self._values[i] = v
        else:
            self._values[index] = value
        self._refresh_saved()

    def to_array(self) -> np.ndarray:
        return self._values

    def to_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self.tolist()

    def _wrap(self, values: Any) -> NonTensorData | NonTensorStack:
        if not isinstance(values, np.ndarray):
            return NonTensorData._new(values, torch.Size([]), self._device)
        if values.ndim == 0:
            return NonTensorData._new(values[()], torch.Size([]), self._device)
        return NonTensorStack.from_array(values, self._device)

    def __getitem__(self, index: Any) -> NonTensorData | NonTensorStack:
        plan = plan_index(index, self.batch_size)
        return self._index_planned(plan.batch_size, plan.leaf_index)

    def _index_planned(
        self, batch_size: torch.Size, leaf_index: Any
    ) -> NonTensorData | NonTensorStack:
        member = leaf_index[0] if type(leaf_index) is tuple and len(leaf_index) == 1 else leaf_index
        entry: NonTensorData | NonTensorStack | None = self._data_row(member)  # (stacked as one)
        if entry is None:
            entry = self._wrap(self._values_at(leaf_index, batch_size))
        if self._is_memmap:
            entry.__dict__["_memmap_parent"] = True
        if isinstance(entry, NonTensorData):  # one value: writes to it reach this stack
            entry.__dict__["_stack_slot"] = (self, leaf_index)
        return entry

    def _values_at(self, leaf_index: Any, batch_size: torch.Size) -> np.ndarray:
        values = self._values[to_numpy_index(leaf_index)]
        if not isinstance(values, np.ndarray):
            out = np.empty((), dtype=object)
            out[()] = values
            values = out
        n = len(batch_size)
        trailing = values.ndim > n and tuple(values.shape[:n]) == tuple(batch_size)
        if tuple(values.shape) != tuple(batch_size) and not trailing:  # (dims of its own stay)
            values = values.reshape(tuple(batch_size))
        return values

    def __setitem__(self, index: Any, value: Any) -> None:
        plan = plan_index(index, self.batch_size)
        self._setitem(plan.leaf_index, value)
        self._refresh_saved()

    def _setitem(self, leaf_index: Any, value: Any) -> None:
        idx = to_numpy_index(leaf_index)
        target_shape = np.empty(self._values.shape, dtype=np.uint8)[idx].shape
        if isinstance(value, NonTensorStack):
            theirs = value._values
            if theirs.shape != target_shape and theirs.size == int(np.prod(target_shape)):
                theirs = theirs.reshape(target_shape)
            self._values[idx] = np.broadcast_to(theirs, target_shape)
        elif isinstance(value, NonTensorData):
            self._fill(idx, value.data)
        else:
            self._fill(idx, value)

    def _fill(self, idx: Any, value: Any) -> None:
        sub = self._values[idx]
        if isinstance(sub, np.ndarray):
            self._values[idx] = _full(value, sub.shape)
        else:
            self._values[idx] = value

    def _transform(
        self, leaf_fn: Callable[[torch.Tensor], torch.Tensor]
    ) -> NonTensorData | NonTensorStack:
        positions = leaf_fn(torch.arange(self._values.size).reshape(self._values.shape))
        if positions.ndim == 0:  # no batch dimension left: the one element
            data = self._values.reshape(-1)[int(positions)]
            return NonTensorData._new(data, torch.Size([]), self._device)  # type: ignore[no-any-return]
        return NonTensorStack.from_array(self._values.reshape(-1)[positions.numpy()], self._device)

    def maybe_collapse(self) -> NonTensorData | NonTensorStack:
        """A :class:`NonTensorData` when every element holds the same object, else self."""
        flat = self._values.reshape(-1)
        if flat.size and all(same_value(flat[0], v) for v in flat[1:]):
            return NonTensorData._new(flat[0], self.batch_size, self._device)
        return self

    def maybe_to_stack(self) -> NonTensorStack:
        return self

    def where(
        self, condition: torch.Tensor, other: Any, *, out: Any = None, pad: Any = None
    ) -> NonTensorStack:
        """Elements of this stack where ``condition`` holds, of ``other`` elsewhere."""
        mask = np.broadcast_to(condition.cpu().numpy().astype(bool), self._values.shape)
        theirs = other.to_array() if is_non_tensor(other) else _full(other, ())
        values = np.where(mask, self._values, np.broadcast_to(theirs, self._values.shape))
        result = NonTensorStack.from_array(values.astype(object), self._device)
        if out is not None:
            out.update_(result)
            return out  # type: ignore[no-any-return]
        return result

    __torch_function__ = forward(
        "tensordict.core.nontensor.combine", "torch_function", "classmethod"
    )

    # -- growing (as a lazy stack) -------------------------------------------------------------
    def append(self, item: Any) -> None:
        """Add one element at the end of the first dimension (in place)."""
        self.insert(len(self), item)

    def insert(self, index: int, item: Any) -> None:
        """Insert one element before ``index`` along the first dimension (in place)."""
        member = _as_member_array(item)
        if member.shape != tuple(self.batch_size[1:]) and self._values.size:
            raise BatchSizeError(
                f"cannot insert an element of batch_size={list(member.shape)} into a "
                f"NonTensorStack of batch_size={list(self.batch_size)}."
            )
        if not self._values.size and self._values.ndim == 1:
            self._values = np.empty((0, *member.shape), dtype=object)
        self._values = np.insert(self._values, index, member[None], axis=0)
        self._shell = None

    def extend(self, items: Any) -> None:
        """Add elements at the end of the first dimension (in place)."""
        for item in items if not isinstance(items, NonTensorStack) else items.tensordicts:
            self.append(item)

    # -- copies and conversions ----------------------------------------------------------------
    def clone(self, recurse: bool = True, **kwargs: Any) -> NonTensorStack:
        values = copy.deepcopy(self._values) if recurse else self._values.copy()
        return NonTensorStack.from_array(values, self._device)

    def copy(self) -> NonTensorStack:
        return self.clone(recurse=False)

    def to(self, *args: Any, **kwargs: Any) -> NonTensorStack:
        device = _device_of(args, kwargs)
        if device is _MISSING or device is None:
            return self
        return NonTensorStack.from_array(self._values, torch.device(device))

    def apply(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> NonTensorStack:
        """No tensor to apply ``fn`` to: the stack itself (a new wrapper)."""
        return NonTensorStack.from_array(self._values, self._device)

    def update(
        self, input_dict_or_td: Any, *args: Any, inplace: bool = False, **kwargs: Any
    ) -> Any:
        """Take the values of another non-tensor entry (broadcast to this batch size).

        Raises:
            LockedError: the stack is locked and ``inplace`` is False.
        """
        self._check_updatable()
        if self.is_locked and not inplace:
            raise LockedError(
                "Cannot modify locked TensorDict (this NonTensorStack is locked). Use update_ or "
                "inplace=True to write the values in place."
            )
        self._setitem(slice(None), input_dict_or_td)
        self._refresh_saved()
        return self

    def update_(self, input_dict_or_td: Any, *args: Any, **kwargs: Any) -> Any:
        return self.update(input_dict_or_td, inplace=True)

    def update_at_(self, input_dict_or_td: Any, index: Any, **kwargs: Any) -> Any:
        self[index] = input_dict_or_td
        return self

    def __eq__(self, other: object) -> Any:
        if isinstance(other, (NonTensorData, NonTensorStack)):
            theirs = np.broadcast_to(other.to_array(), self._values.shape)
            flags = [same_value(a, b) for a, b in zip(self._values.reshape(-1), theirs.reshape(-1))]
            return torch.tensor(flags, dtype=torch.bool).reshape(self._values.shape)
        return False

    def __iter__(self) -> Any:
        return iter(self.tensordicts)

    def __repr__(self) -> str:
        text = str(self.tolist())
        if len(text) > 50:
            text = text[:50] + "..."
        return (
            f"NonTensorStack(\n    {text},\n    batch_size={self.batch_size},\n"
            f"    device={self._device})"
        )

    __reduce__ = forward(_PICKLES, "reduce_non_tensor_stack")  # upstream's layout
    __setstate__ = forward(_PICKLES, "setstate_non_tensor_stack")


# pickles and ``repr(type)`` name the classes by upstream's path (which re-exports them)
__test__ = publish_as(
    "tensordict.tensorclass", NonTensorData, MetaData, NonTensorStack
)  # (doctest)


def list_to_stack(values: list[Any], device: torch.device | None) -> Any:
    """A list stored under ``list_to_stack()`` (upstream's default): tensors are stacked,
    numbers make a tensor, anything else a :class:`NonTensorStack` shaped like the list."""
    if values and all(isinstance(v, torch.Tensor) for v in values):
        try:
            out = torch.stack(values)
        except RuntimeError:
            return NonTensorStack.from_list(values, device)
        return out if device is None else out.to(device)
    try:
        return torch.tensor(values, device=device)
    except (TypeError, ValueError, RuntimeError):
        return NonTensorStack.from_list(values, device)


def is_non_tensor(value: Any) -> bool:
    """Whether ``value`` is stored python data (``NonTensorData`` or ``NonTensorStack``)."""
    return isinstance(value, (NonTensorData, NonTensorStack))
