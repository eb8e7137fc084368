"""``UnbatchedTensor``: a tensor stored in a tensordict without the batch dimensions.

An ``UnbatchedTensor`` entry keeps its own shape whatever the batch size of the tensordict that
holds it: indexing, shape operations (reshape, permute, unsqueeze, ...), ``unbind``/``split``,
``stack`` and ``cat`` of the tensordict leave the tensor as it is (the same storage) and only
update its :attr:`UnbatchedTensor.batch_size`, which always equals the batch size of the holder.
Element-wise operations (``td + 1``, ``td.apply(fn)``, dtype and device casts) do reach it.

Core code handles it through the few functions at the bottom of this module (``is_unbatched``,
``rebatch``, ``stack_unbatched``), next to the tensor and non-tensor cases.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

import numpy as np
import torch

from tensordict.core.collection import publish_as

__all__ = ["UnbatchedTensor", "is_unbatched", "rebatch", "stack_unbatched"]


def _as_size(batch_size: Any) -> torch.Size:
    if batch_size is None:
        return torch.Size([])
    if isinstance(batch_size, int):
        return torch.Size([batch_size])
    return torch.Size(batch_size)


class UnbatchedTensor(torch.Tensor):
    """A tensor entry exempt from the batch size of the tensordict holding it.

    Wrapping shares the storage of ``data`` (no copy). In a tensordict the entry keeps its shape
    through indexing, reshaping, stacking and concatenation; its ``batch_size`` attribute tells
    the batch size of the tensordict it was read from.

    Args:
        data: the tensor (or anything ``torch.as_tensor`` accepts).
        batch_size: the batch size to record (default: none; a tensordict sets its own).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, UnbatchedTensor
        >>> td = TensorDict(obs=torch.zeros(4, 3), table=UnbatchedTensor(torch.ones(7)),
        ...                 batch_size=[4])
        >>> td[1:3]["table"].shape, td[1:3]["table"].batch_size
        (torch.Size([7]), torch.Size([2]))
        >>> torch.stack([td, td])["table"].shape
        torch.Size([7])
    """

    #: read by code that lets this entry through batch-size checks (upstream's flag)
    _pass_through = True
    _batch_size: torch.Size

    @staticmethod
    def __new__(
        cls, data: Any, batch_size: Sequence[int] | torch.Size | int | None = None
    ) -> UnbatchedTensor:
        tensor = data if isinstance(data, torch.Tensor) else torch.as_tensor(data)
        if isinstance(tensor, UnbatchedTensor):
            tensor = tensor._plain()
        out = tensor.as_subclass(cls)
        out._batch_size = _as_size(batch_size)
        return out  # type: ignore[no-any-return]

    def __init__(self, data: Any, batch_size: Any = None) -> None:
        pass  # everything happens in __new__

    @property
    def batch_size(self) -> torch.Size:
        """The batch size of the tensordict holding this entry (``torch.Size([])`` if none)."""
        return self.__dict__.get("_batch_size", torch.Size([]))

    @batch_size.setter
    def batch_size(self, value: Sequence[int] | torch.Size | int | None) -> None:
        self._batch_size = _as_size(value)

    def _plain(self) -> torch.Tensor:
        """The same data as a plain ``torch.Tensor`` (no copy)."""
        return self.as_subclass(torch.Tensor)

    def _with_batch_size(self, batch_size: torch.Size) -> UnbatchedTensor:
        """This entry, recorded under another batch size (an alias when the size changes)."""
        if self.batch_size == batch_size:
            return self
        out = self._plain().as_subclass(type(self))
        out._batch_size = batch_size
        return out  # type: ignore[no-any-return]

    def copy(self) -> UnbatchedTensor:
        """A shallow alias with the same batch size (upstream's ``copy``)."""
        out = self._plain().as_subclass(type(self))
        out._batch_size = self.batch_size
        return out  # type: ignore[no-any-return]

    def clone(self, *args: Any, **kwargs: Any) -> UnbatchedTensor:  # type: ignore[override]
        """A copy of the data with the same batch size (``to_tensordict`` and ``copy.copy``
        paths clone the entry on its own: the batch size must survive)."""
        out = self._plain().clone(*args, **kwargs).as_subclass(type(self))
        out._batch_size = self.batch_size
        return out  # type: ignore[no-any-return]

    # python conversions answer as the plain tensor would (never an UnbatchedTensor)
    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        return f"{type(self).__name__}({self._plain()!r})"

    def __str__(self) -> str:
        return str(self._plain())

    def __format__(self, format_spec: str) -> str:
        return self._plain().__format__(format_spec)

    def __bool__(self) -> bool:
        return bool(self._plain())

    def __int__(self) -> int:
        return int(self._plain())

    def __float__(self) -> float:
        return float(self._plain())

    def __complex__(self) -> complex:
        return complex(self._plain())

    def __index__(self) -> int:
        return self._plain().__index__()

    def __round__(self, ndigits: int | None = None) -> Any:
        plain: Any = self._plain()
        return round(plain) if ndigits is None else round(plain, ndigits)

    def __trunc__(self) -> Any:
        plain: Any = self._plain()
        return math.trunc(plain)

    def __floor__(self) -> Any:
        return math.floor(self._plain())

    def __ceil__(self) -> Any:
        return math.ceil(self._plain())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self._plain().numpy(force=True)
        return array if dtype is None else array.astype(dtype, copy=False)

    def item(self) -> Any:
        """The value of a one-element tensor, as a Python number."""
        return self._plain().item()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The tensor as a numpy array (``force=True`` copies where a view is impossible)."""
        return self._plain().numpy(force=force)

    def tolist(self) -> Any:
        """The tensor as (nested) Python lists of numbers."""
        return self._plain().tolist()

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # (rebuilt by the class, which pickles name by upstream's path ``tensordict._unbatched``)
        return (UnbatchedTensor, (self._plain(), tuple(self.batch_size)))


__test__ = publish_as("tensordict._unbatched", UnbatchedTensor)  # methods' examples: doctest


def _rebuild_unbatched(data: torch.Tensor, batch_size: tuple[int, ...]) -> UnbatchedTensor:
    """Rebuild an :class:`UnbatchedTensor` from a pickle written before the class was published
    under ``tensordict._unbatched`` (those pickles name this function)."""
    return UnbatchedTensor(data, batch_size)


def is_unbatched(value: Any) -> TypeGuard[UnbatchedTensor]:
    """Whether ``value`` is an entry exempt from the batch size (an :class:`UnbatchedTensor`)."""
    return isinstance(value, UnbatchedTensor)


def rebatch(value: Any, batch_size: torch.Size) -> UnbatchedTensor:
    """The unbatched entry ``value`` as held by a tensordict of ``batch_size`` (same storage)."""
    return value._with_batch_size(torch.Size(batch_size))  # type: ignore[no-any-return]


def rebatch_fn(
    leaf_fn: Callable[[torch.Tensor], torch.Tensor], batch_size: torch.Size
) -> Callable[[Any], Any]:
    """``leaf_fn`` for ordinary tensors; unbatched entries only take the new batch size."""

    def fn(value: Any) -> Any:
        if isinstance(value, UnbatchedTensor):
            return value._with_batch_size(batch_size)
        return leaf_fn(value)

    return fn


def stack_unbatched(values: Sequence[Any], batch_size: torch.Size) -> UnbatchedTensor:
    """Stack or concatenate unbatched entries: the first one, under the new batch size.

    The members should hold the same data: a warning says so when their storages differ (the
    other members' data is not kept).
    """
    first = values[0]
    ptr = first.data_ptr()
    if any(
        not isinstance(v, UnbatchedTensor) or v.data_ptr() != ptr or v.shape != first.shape
        for v in values[1:]
    ):
        warnings.warn(
            "stacking or concatenating UnbatchedTensor entries with different data storage: the "
            "result keeps the first member's tensor. Store the same tensor in every member (or "
            "a batched tensor) to keep them all.",
            UserWarning,
            stacklevel=3,
        )
    return first._with_batch_size(torch.Size(batch_size))
