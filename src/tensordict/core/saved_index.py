"""Decoding an index saved in memory-mapped metadata (a sub-tensordict's ``index``).

Upstream writes indices as tagged lists (``["tuple", [["slice", {...}], 1]]``); older versions
wrote untagged tuples. :func:`_str_to_index` reads both.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["_str_to_index"]


def _str_to_index(index: Any) -> Any:
    """Decode an index saved in memmap metadata (tagged lists) back to a python index.

    Examples:
        >>> _str_to_index(["tuple", [["slice", {"start": 0, "stop": 2, "step": None}], 1]])
        (slice(0, 2, None), 1)
    """
    if not isinstance(index, (tuple, list)):
        return index
    if not index:
        return ()
    tag = index[0]
    if tag == "tuple":
        return tuple(_str_to_index(item) for item in index[1])
    if tag == "list":
        return [_str_to_index(item) for item in index[1]]
    if tag in ("slice", "range"):
        spec = index[1]
        make = slice if tag == "slice" else range
        return make(spec["start"], spec["stop"], spec["step"])
    if tag == "tensor":
        return torch.tensor(index[1], device=index[2] if len(index) > 2 else None)
    if tag == "ellipsis":
        return Ellipsis
    return tuple(_str_to_index(item) for item in index)  # older, untagged tuples
