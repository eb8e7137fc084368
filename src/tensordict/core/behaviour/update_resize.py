"""``update(source, update_batch_size=True)``: take the source's batch size along with its entries.

Nested tensordicts (and tensorclasses, lazy stacks) present on both sides keep their identity and
are resized recursively; every other entry is replaced by the source's. Every entry of the
destination must be in the source (an entry left at the old batch size could not be kept).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from tensordict.core.collection import TensorCollection
from tensordict.errors import BatchSizeError, KeyMismatchError, ShapeMismatchError

__all__ = ["batch_sizes_conflict", "check_source_batch_size", "update_resized"]


def batch_sizes_conflict(dest: Sequence[int], source: Sequence[int]) -> bool:
    """Whether an ``update`` from a tensordict of batch size ``source`` cannot fit ``dest``:
    their common leading dims differ (``[3]`` and ``[3, 2]`` fit, ``[3]`` and ``[4]`` do not).

    Examples:
        >>> batch_sizes_conflict([3], [3, 2]), batch_sizes_conflict([3], [4])
        (False, True)
    """
    n = min(len(dest), len(source))
    return tuple(dest[:n]) != tuple(source[:n])


def _is_collection(value: Any) -> bool:
    return isinstance(value, TensorCollection) or getattr(type(value), "_is_tensorclass", False)


def check_source_batch_size(dest: Any, source: Any, update_batch_size: bool) -> bool:
    """Whether ``dest.update(source)`` must resize ``dest``; raises if it must but may not."""
    if not _is_collection(source) or not batch_sizes_conflict(dest.batch_size, source.batch_size):
        return False
    if not update_batch_size:
        raise BatchSizeError(
            f"update() got a source with batch size {source.batch_size} for a destination with "
            f"batch size {dest.batch_size}. Pass update_batch_size=True to replace the batch "
            "size, or give a source whose leading dims match."
        )
    return True


def update_resized(
    dest: Any,
    source: Any,
    *,
    clone: bool = False,
    inplace: bool = False,
    keys_to_update: Any = None,
    is_leaf: Callable[[type], bool] | None = None,
) -> Any:
    """Give ``dest`` the batch size and entries of ``source`` (see the module docstring).

    Raises:
        ShapeMismatchError: ``inplace=True`` (the entries cannot be written in place).
        BatchSizeError: ``keys_to_update`` is given.
        KeyMismatchError: ``dest`` has entries ``source`` lacks.
    """
    if inplace:
        raise ShapeMismatchError(
            f"Source and destination tensor collection shapes mismatch ({source.batch_size} vs "
            f"{dest.batch_size}), but update was called with inplace=True, which cannot be "
            "achieved. Drop inplace=True to replace the entries."
        )
    if keys_to_update is not None:
        raise BatchSizeError(
            "Updating tensordicts of different batch-size with keys_to_update is currently not "
            "supported: update every entry, or select the keys of the source first."
        )
    source_keys, dest_keys = list(source.keys()), list(dest.keys())
    missing = [k for k in dest_keys if k not in set(source_keys)]
    if missing:
        raise KeyMismatchError(
            "Some keys of the dest tensordict are not present in the source during update with "
            f"mismatching batch-size. batch_size of source={source.batch_size}, batch_size of "
            f"dest={dest.batch_size}, keys in dest but not in source: {sorted(missing)}. They "
            "could not keep their old batch size: delete them first, or add them to the source."
        )
    values: dict[str, Any] = {}
    for key in source_keys:
        value = source.get(key)
        existing = dest.get(key, None)
        if (
            _is_collection(value)
            and _is_collection(existing)
            and not (is_leaf is not None and is_leaf(type(value)))
        ):
            existing.update(value, clone=clone, update_batch_size=True, is_leaf=is_leaf)
            values[key] = existing
        else:
            values[key] = value.clone() if clone and hasattr(value, "clone") else value
    order = dest_keys + [k for k in source_keys if k not in set(dest_keys)]
    for key in dest_keys:
        dest.del_(key)
    dest.batch_size = torch.Size(source.batch_size)
    for key in order:
        dest.set(key, values[key])
    return dest
