"""Moving a tensordict between devices and dtypes: ``to``, ``cpu``, ``cuda``, ``clear_device_``."""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

import torch

from tensordict.core.collection import TensorCollection
from tensordict.core.consolidate import move_consolidated
from tensordict.core.ops import keep_lock_of

__all__ = ["DeviceMixin"]

T = TypeVar("T", bound="DeviceMixin")


class DeviceMixin(TensorCollection):
    """``to`` and the device shortcuts, written on the tree walk of ``ops``."""

    __slots__ = ()

    def to(self: T, *args: Any, **kwargs: Any) -> T:
        """Move to a device and/or cast the leaves to a dtype (like ``Tensor.to``).

        Keyword arguments: ``device``, ``dtype``, ``non_blocking``, ``batch_size`` (of the
        result) and ``inplace`` (this tensordict holds the moved leaves and is returned).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.to(torch.float64)["a"].dtype
            torch.float64
            >>> td.to("cpu").device
            device(type='cpu')
            >>> td.to(torch.float16, inplace=True) is td, td["a"].dtype
            (True, torch.float16)
        """
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        non_blocking = kwargs.pop("non_blocking", False)
        batch_size = kwargs.pop("batch_size", None)
        inplace = kwargs.pop("inplace", False)
        other = kwargs.pop("other", None)
        if other is not None:  # (upstream: the device, and a tensor's dtype, of `other`)
            args = (*args, other)
        for ignored in ("non_blocking_pin", "num_threads"):  # upstream's transfer tuning
            kwargs.pop(ignored, None)
        for arg in args:
            if arg is None:  # td.to(None) keeps the device (TorchRL calls it; as upstream)
                continue
            if isinstance(arg, torch.dtype):
                dtype = arg
            elif isinstance(arg, (str, torch.device, int)):
                device = torch.device(arg)
            elif isinstance(arg, torch.Tensor):
                device, dtype = arg.device, arg.dtype
            elif isinstance(arg, TensorCollection):  # its device, and its dtype if it has one
                device = arg.device
                dtype = getattr(arg, "dtype", None) or dtype
            else:
                raise TypeError(f"to() got an unsupported argument {arg!r}")
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        out: Any = self
        plain_move = device is not None and dtype is None and batch_size is None and not inplace
        if plain_move and self.device == torch.device(device):  # already there: itself (upstream)
            return self
        if plain_move and getattr(self, "_consolidated", None) is not None:  # one storage copy
            return move_consolidated(self, torch.device(device), non_blocking)  # type: ignore[no-any-return]
        if dtype is not None:
            out = out._apply_leaves(lambda t: t.to(dtype))
        if device is not None:
            device = torch.device(device)
            out = out._apply_leaves(
                lambda t: t.to(device, non_blocking=non_blocking), device=device
            )
        if batch_size is not None:
            td: Any = self
            out = td.clone(recurse=False) if out is self else out
            out.batch_size = batch_size
        if out is self:
            return self
        if inplace:  # (the shape mixin's helper: this tensordict takes the moved leaves)
            td_: Any = self
            return td_._inplace_result(out, True, "to")  # type: ignore[no-any-return]
        moved: Any = keep_lock_of(self, out)
        source: Any = self

        def write_back() -> None:
            # ``with td.to(device) as moved:`` entries written in the block reach ``td`` on
            # exit: existing ones copied back in place, new ones added as they are (as upstream)
            if not source.is_locked:
                source.update(moved, inplace=True)

        with contextlib.suppress(AttributeError):
            moved._last_op = ("restore", write_back)
        return moved  # type: ignore[no-any-return]

    def cpu(self: T) -> T:
        return self.to("cpu")

    def cuda(self: T, device: int | None = None) -> T:
        return self.to(torch.device("cuda" if device is None else f"cuda:{device}"))

    def clear_device_(self: T) -> T:
        """Forget the device (leaves stay where they are)."""
        self._set_device(None)
        return self

    def _set_device(self, device: torch.device | None) -> None:
        raise NotImplementedError
