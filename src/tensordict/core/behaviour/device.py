"""Moving a tensordict between devices and dtypes: ``to``, ``cpu``, ``cuda``, ``clear_device_``."""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, TypeVar

import torch

from tensordict.core import factory
from tensordict.core.behaviour.consolidate import move_consolidated
from tensordict.core.behaviour.entries import locked_message
from tensordict.core.behaviour.ops import keep_lock_of
from tensordict.core.collection import TensorCollection
from tensordict.errors import LockedError, ViewArgumentError

__all__ = ["DeviceMixin", "DeviceTransferRecorder", "device_recorder"]

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
        if args and _is_attrs_spec(args[0]):  # td.to(td.attrs()): per-entry dtype/device
            return _to_attrs(self, args[0], args[1:], kwargs)
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
        if batch_size is not None and hasattr(self, "stack_dim"):
            raise ViewArgumentError(
                f"Cannot pass batch-size to a {type(self).__name__}: its batch size follows its "
                "members. Call to() without batch_size, or on td.to_tensordict()."
            )
        out: Any = self
        plain_move = device is not None and dtype is None and batch_size is None and not inplace
        same_device = device is not None and self.device == torch.device(device)
        if same_device and dtype is None and batch_size is None:  # already there: itself, even
            if inplace and getattr(self, "_no_inplace_to", None):  # (a view refuses, as upstream)
                raise ViewArgumentError(self._no_inplace_to)  # type: ignore[attr-defined]
            return self  # in place on a locked tensordict (nothing moves), as upstream
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
            if td_.is_locked:  # (as upstream: its leaves would be replaced)
                raise LockedError(locked_message("cast or move it in place (to(inplace=True))"))
            return td_._inplace_result(out, True, "to")  # type: ignore[no-any-return]
        moved: Any = keep_lock_of(self, out)
        source_ref = weakref.ref(self)  # (the result must not keep its source alive)

        def write_back() -> None:
            # ``with td.to(device) as moved:`` entries written in the block reach ``td`` on
            # exit: existing ones copied back in place, new ones added as they are (as upstream)
            source: Any = source_ref()
            if source is not None and not source.is_locked:
                source.update(moved, inplace=True)

        with contextlib.suppress(AttributeError):
            moved._last_op = ("restore", write_back)
        return moved  # type: ignore[no-any-return]

    def attrs(self, *, fields: Any = ("device", "dtype", "shape")) -> Any:
        """A tensordict (no batch dims) of the :class:`~tensordict.TensorAttrs` of every tensor
        (device, dtype and shape, or the ``fields`` asked for); ``td.to(attrs)`` casts and moves
        each entry to its recorded dtype and device.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, dtype=torch.int8)}, [3])
            >>> td.attrs()["a"].tgt_dtype
            torch.int8
        """
        td: Any = self

        def leaf(x: torch.Tensor) -> Any:
            return factory.TensorAttrs.from_tensor(x, fields=fields)

        source: dict[str, Any] = {}
        for key, value in td._own_items():
            if isinstance(value, torch.Tensor):
                source[key] = leaf(value)
            elif isinstance(value, DeviceMixin):
                source[key] = value.attrs(fields=fields)
            else:
                source[key] = value
        return td._new_dense(source, torch.Size([]))

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


def _is_attrs_spec(arg: Any) -> bool:
    """Whether ``arg`` is a tensordict of :class:`~tensordict.TensorAttrs` (from ``attrs()``)."""
    if not isinstance(arg, TensorCollection):
        return False
    for _, value in arg._own_items():
        if hasattr(type(value), "tgt_dtype") or _is_attrs_spec(value):
            return True
    return False


def _to_attrs(td: Any, spec: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``td.to(spec)``: each entry cast to its ``TensorAttrs``' dtype and moved to its device;
    entries the spec does not name are kept as they are."""
    if args:
        raise TypeError(
            "to(attrs) does not accept additional positional arguments: the tensordict of "
            "TensorAttrs gives every dtype and device."
        )
    if kwargs.get("non_blocking_pin"):
        raise NotImplementedError("to(attrs) does not support non_blocking_pin=True.")
    non_blocking = bool(kwargs.get("non_blocking", False))

    def move(name: Any, x: torch.Tensor) -> torch.Tensor:
        attrs = spec.get(name, None)
        if attrs is None or not hasattr(type(attrs), "tgt_dtype"):
            return x
        return x.to(device=attrs.tgt_device, dtype=attrs.tgt_dtype, non_blocking=non_blocking)

    return td.named_apply(move, nested_keys=True)


class DeviceTransferRecorder:
    """Per-thread record of device transfers between :meth:`mark` and :meth:`unmark` (upstream's
    ``tensordict.base._device_recorder``: a constructor marks, copies record the devices they
    leave, and one synchronisation covers them all). Its state is per thread, so concurrent
    constructions never see each other's marks.

    Examples:
        >>> recorder = DeviceTransferRecorder()
        >>> recorder.mark()
        >>> recorder.record_transfer(torch.device("cpu"))
        >>> recorder.marked, recorder.has_transfer()
        (True, True)
        >>> recorder.unmark()
        >>> recorder.marked, recorder.has_transfer()
        (False, False)
    """

    def __init__(self) -> None:
        self._state = threading.local()

    @property
    def marked(self) -> bool:
        """Whether this thread is between :meth:`mark` and :meth:`unmark`."""
        return bool(getattr(self._state, "marked", False))

    def mark(self) -> None:
        """Start recording this thread's transfers."""
        self._state.marked = True
        self._state.devices = set()

    def unmark(self) -> None:
        """Stop recording and forget what was recorded."""
        self._state.marked = False
        self._state.devices = set()

    def record_transfer(self, device: Any) -> None:
        """Note a copy that left ``device`` (kept only while marked)."""
        if self.marked:
            self._state.devices.add(None if device is None else torch.device(device))

    def has_transfer(self) -> bool:
        """Whether a transfer was recorded since :meth:`mark`."""
        return bool(getattr(self._state, "devices", None))


#: the recorder of this process (``tensordict.base._device_recorder`` upstream)
device_recorder = DeviceTransferRecorder()
