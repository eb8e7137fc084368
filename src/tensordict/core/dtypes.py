"""dtype tables shared by conversions between numpy and torch."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["NUMPY_TO_TORCH_DTYPE_DICT"]

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
