"""The leaves a transfer moves, in the order both ends walk them, and their fingerprint.

Order (upstream's): at each level the keys sorted, a nested tensordict or tensorclass walked where
its key falls, a lazy stack member by member, non-tensor data skipped (it never travels leaf by
leaf). Names do not have to match, as upstream: the leaves are paired by their place in that order.

A leaf's *record* is ``[dtype code, item size, ndim, *shape]``; a transfer's records are the
records of its leaves, one after the other, and its fingerprint a 63-bit hash of each leaf's dtype
and number of elements. The two ends of a transfer (or every rank of a collective) compare
fingerprints before moving data, and records to say where they differ. Two leaves fit when they
have the same dtype and number of elements: the shapes may differ, as with upstream (the values
are written in memory order, a ``(1, 2)`` leaf into a ``(2,)`` one).
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from tensordict.core.behaviour.base import is_tensor_collection
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import is_non_tensor

__all__ = [
    "Leaf",
    "consolidated_layout",
    "describe",
    "direct",
    "dtype_code",
    "first_difference",
    "fingerprint",
    "fits",
    "leaves",
    "records",
    "split_records",
    "write_back",
]


class Leaf(NamedTuple):
    """A tensor of a transfer: the tensordict holding it, its key there, the tensor, its path."""

    node: Any
    key: str
    tensor: torch.Tensor
    path: tuple[str, ...]


def _is_tc(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def leaves(td: Any) -> list[Leaf]:
    """The tensors of ``td`` in transfer order (see the module docstring).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(b=torch.zeros(2), a={"y": torch.ones(2), "x": torch.ones(2, 3)})
        >>> [leaf.path for leaf in leaves(td)]
        [('a', 'x'), ('a', 'y'), ('b',)]
    """
    out: list[Leaf] = []
    _walk(td, (), out)
    return out


def _walk(node: Any, path: tuple[str, ...], out: list[Leaf]) -> None:
    if _is_tc(node):
        node = node._tensordict
    if isinstance(node, LazyStackedTensorDict):
        for i, member in enumerate(node.tensordicts):
            _walk(member, (*path, f"<member {i}>"), out)
        return
    for key in sorted(node._own_keys()):
        value = node._get_str(key, None)
        if isinstance(value, torch.Tensor):
            out.append(Leaf(node, key, value, (*path, key)))
        elif is_non_tensor(value):
            continue
        elif is_tensor_collection(value):
            _walk(value, (*path, key), out)
        else:
            raise TypeError(
                f"The entry {(*path, key)} is a {type(value).__name__}: a tensordict travels "
                "as tensors, nested tensordicts and non-tensor data (which is not sent leaf by "
                "leaf). Store it as NonTensorData, or send the tensordict with init_remote / "
                "broadcast, which carry every entry."
            )


def direct(t: torch.Tensor) -> bool:
    """Whether a transport can read or write ``t`` itself (else a contiguous stand-in)."""
    return t.layout is torch.strided and not t.is_nested and t.is_contiguous()


def write_back(leaf: Leaf, buffer: torch.Tensor) -> Callable[[], None] | None:
    """What makes ``leaf`` hold ``buffer`` once it is received or reduced (None: ``buffer`` is
    the leaf's own tensor, stored as it is)."""
    node, key, tensor = leaf.node, leaf.key, leaf.tensor
    stored = isinstance(node, TensorDict) or node._get_str(key, None) is tensor
    if buffer is tensor and stored:
        return None

    if _overlaps(tensor):  # an expanded tensor cannot hold distinct values: replaced

        def replace() -> None:
            node._set_str(key, buffer, validated=True)

        return replace

    def write() -> None:
        with torch.no_grad():  # (leaves may require grad: this is a transfer, not an op)
            if buffer is not tensor:
                tensor.copy_(buffer)
            if not stored:  # a view, a file, a server: its entry is written through it
                node._set_str(key, tensor, validated=True, inplace=True)

    return write


def _overlaps(t: torch.Tensor) -> bool:
    """Whether elements of ``t`` share memory (an expanded dimension)."""
    return any(stride == 0 and size > 1 for size, stride in zip(t.shape, t.stride()))


_DTYPES = {str(d): d for d in vars(torch).values() if isinstance(d, torch.dtype)}


def dtype_code(dtype: torch.dtype | str) -> int:
    """A number for ``dtype`` that every process computes alike (a CRC of its name)."""
    return zlib.crc32(str(dtype).encode()) & 0x7FFFFFFF


_NAMES = {dtype_code(name): name.replace("torch.", "") for name in _DTYPES}


def records(tensors: list[torch.Tensor]) -> list[int]:
    """The records of ``tensors``, one after the other (see the module docstring).

    Examples:
        >>> records([torch.zeros(2, 3)])[1:]
        [4, 2, 2, 3]
    """
    out: list[int] = []
    for t in tensors:
        out += (dtype_code(t.dtype), t.element_size(), t.dim(), *t.shape)
    return out


def split_records(flat: list[int]) -> list[tuple[int, ...]]:
    """The records of ``flat`` one by one (the inverse of concatenating them)."""
    out, i = [], 0
    while i + 2 < len(flat):
        n = 3 + flat[i + 2]
        out.append(tuple(flat[i : i + n]))
        i += n
    return out


def fits(record: tuple[int, ...]) -> tuple[int, int, int]:
    """What must match between two leaves: dtype, item size, number of elements."""
    return record[0], record[1], math.prod(record[3:])


def fingerprint(flat: list[int], extra: bytes = b"") -> int:
    """A 63-bit hash of what must match in records (and of ``extra`` bytes), the same in every
    process."""
    fitting = [v for record in split_records(flat) for v in fits(record)]
    data = np.asarray(fitting, dtype=np.int64).tobytes() + extra
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") & (2**63 - 1)


def describe(record: tuple[int, ...] | None) -> str:
    """A record in words: ``float32 (2, 3)``."""
    if record is None:
        return "nothing"
    name = _NAMES.get(record[0], f"a dtype of {record[1]} bytes")
    return f"{name} {tuple(record[3:])}"


def first_difference(mine: list[tuple[int, ...]], theirs: list[tuple[int, ...]]) -> int | None:
    """The index of the first record that does not fit the other (None: they all fit)."""
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if fits(a) != fits(b):
            return i
    return None if len(mine) == len(theirs) else min(len(mine), len(theirs))


def consolidated_layout(meta: dict[str, Any]) -> tuple[list[int], bytes]:
    """The records of a consolidated tensordict's leaves in storage order, and where each lies
    in the storage (byte ranges), as bytes for the fingerprint."""
    found: list[tuple[int, str, tuple[str, ...], str, list[int], int]] = []
    _layout_walk(meta, (), found)
    found.sort()
    flat: list[int] = []
    for _start, dtype, _path, _key, shape, _end in found:
        item = _DTYPES[dtype].itemsize if dtype in _DTYPES else 0
        flat += (dtype_code(dtype), item, len(shape), *shape)
    return flat, repr([(start, end) for start, *_, end in found]).encode()


def _layout_walk(meta: dict[str, Any], path: tuple[str, ...], found: list[Any]) -> None:
    for key, leaf in meta.get("leaves", {}).items():
        found.append((leaf[2], str(leaf[0]), path, key, list(leaf[1]), leaf[3]))
    for key, sub in meta.items():
        if key not in ("cls", "non_tensors", "leaves", "cls_metadata") and isinstance(sub, dict):
            _layout_walk(sub, (*path, key), found)
