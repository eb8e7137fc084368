"""``TensorAttrs``: a tensorclass recording the device, dtype and shape of one tensor."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from tensordict.tensorclass.inherit import TensorClass

__all__ = ["TensorAttrs"]

_KNOWN = ("device", "dtype", "shape")


class TensorAttrs(TensorClass):
    """The device, dtype and shape of a tensor, as a tensorclass (fields ``tgt_*``).

    The fields are prefixed with ``tgt_`` so that they do not hide the tensorclass's own
    ``device``/``dtype``/``shape`` attributes. Unset fields are ``None``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorAttrs
        >>> attrs = TensorAttrs.from_tensor(torch.zeros(2, 3, dtype=torch.int8))
        >>> attrs.tgt_dtype, attrs.tgt_shape, attrs.tgt_device
        (torch.int8, torch.Size([2, 3]), device(type='cpu'))
        >>> TensorAttrs.from_tensor(torch.zeros(2), fields=("dtype",)).tgt_shape is None
        True
    """

    tgt_device: Any = None
    tgt_dtype: Any = None
    tgt_shape: Any = None

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, *, fields: Iterable[str] = _KNOWN) -> TensorAttrs:
        """The attributes of ``tensor`` named in ``fields`` (the others stay ``None``).

        Raises:
            ValueError: a name in ``fields`` other than ``device``, ``dtype``, ``shape``.
        """
        wanted = tuple(fields)
        unknown = [f for f in wanted if f not in _KNOWN]
        if unknown:
            raise ValueError(
                f"TensorAttrs.from_tensor: unknown field(s) {unknown}; choose among {list(_KNOWN)}."
            )
        kwargs: dict[str, Any] = {}
        if "device" in wanted:
            kwargs["tgt_device"] = tensor.device
        if "dtype" in wanted:
            kwargs["tgt_dtype"] = tensor.dtype
        if "shape" in wanted:
            kwargs["tgt_shape"] = torch.Size(tensor.shape)
        return cls(batch_size=(), **kwargs)  # type: ignore[call-arg]
