"""The compact repr, upstream 0.15's default: one token per entry, read from metadata only.

``TensorDict(batch_size=[3], device=cpu, fields={a: f32[4], n: [5]{x: f64[2]}, s: str})``: a
tensor is its dtype code and its shape after the batch dims (``@device`` appended when the
tensordict has no device and the tensor is not on the cpu); a nested tensordict is its extra
batch dims and its entries in braces (prefixed by its class name unless it is a plain
``TensorDict``); non-tensor data is the type name of its value. The whole fits on one line of
80 columns, or each entry that does not fit takes its own line, indented by four spaces.

A node of the tree rendered here is either a token (``str``) or ``(prefix, entries)`` with
``entries`` a list of ``(key, node)``.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.options import get_printoptions
from tensordict.core.unbatched import is_unbatched

__all__ = ["compact_repr", "dtype_code"]

_WIDTH = 80
_CPU = torch.device("cpu")
Node = Any  # str | tuple[str, list[tuple[str, Node]]]


def _nested_shape(value: torch.Tensor) -> torch.Size:
    """A nested tensor's shape with -1 for its ragged dims (a strided one has no ``.shape``)."""
    sizes = [t.shape for t in value.unbind()]
    if not sizes:
        return torch.Size([0])
    merged = [s if all(sh[i] == s for sh in sizes) else -1 for i, s in enumerate(sizes[0])]
    return torch.Size([len(sizes), *merged])


def dtype_code(dtype: torch.dtype) -> str:
    """``f32``, ``i64``, ``u8``, ``c64``, ``bf16``, ``bool``, ... for a torch dtype."""
    name = str(dtype).removeprefix("torch.")
    for long, short in (("float", "f"), ("uint", "u"), ("int", "i"), ("complex", "c")):
        name = name.replace(long, short)
    return name


def _token(shape: Any, dtype: torch.dtype, device: Any, td_device: Any) -> str:
    token = "[" + ",".join(str(s) for s in shape) + "]"
    if get_printoptions()["show_dtype"]:
        token = dtype_code(dtype) + token
    if td_device is None and device is not None and torch.device(device) != _CPU:
        token += f"@{device}"
    return token


def _is_tensorclass(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def _prints_itself(value: Any) -> bool:
    """A collection with its own repr (stores, files): shown by its class name."""
    return type(value).__repr__ is not TensorDictBase.__repr__


def _entry(td: Any, key: str, value: Any) -> Node:
    bd = len(td.batch_size)
    if isinstance(value, torch.Tensor):
        full = _nested_shape(value) if value.is_nested and value.layout == torch.strided else None
        full = value.shape if full is None else full
        shape = full if is_unbatched(value) else full[bd:]
        return _token(shape, value.dtype, value.device, td.device)
    if type(value).__name__ == "_ShapeOnly":  # a lazy stack's stacked leaf, not built
        return _token(value.shape[bd:], value.dtype, value.device, td.device)
    if isinstance(value, NonTensorData):
        return type(value.data).__name__
    if isinstance(value, NonTensorStack):
        return type(value).__name__
    if _is_tensorclass(value):
        prefix, body = type(value).__name__, _tensorclass_body(value)
    elif hasattr(value, "_own_items") and not _prints_itself(value):
        prefix = "" if type(value).__name__ == "TensorDict" else type(value).__name__
        body = _body(value)
    else:
        return type(value).__name__
    extra = value.batch_size[bd:]
    if extra:
        prefix += "[" + ",".join(str(s) for s in extra) + "]"
    return prefix, body


def _items(td: Any) -> list[tuple[str, Any]]:
    if hasattr(td, "_repr_value") and hasattr(td, "tensordicts"):  # a lazy stack
        return [(key, td._repr_value(key)) for key in td._own_keys()]
    return list(td._own_items())


def _sorted(entries: list[tuple[str, Node]]) -> list[tuple[str, Node]]:
    order = get_printoptions()["sort_keys"]
    if order == "insertion":
        return entries
    if callable(order):
        return sorted(entries, key=lambda e: order(f"{e[0]}: {_flat(e[1])}"))
    return sorted(entries, key=lambda e: f"{e[0]}: {_flat(e[1])}")


def _body(td: Any) -> list[tuple[str, Node]]:
    return _sorted([(str(key), _entry(td, key, value)) for key, value in _items(td)])


def _tensorclass_body(tc: Any) -> list[tuple[str, Node]]:
    entries = _sorted([(str(k), _entry(tc, k, v)) for k, v in tc._tensordict._own_items()])
    others = [
        (str(k), "None" if v is None else type(v).__name__) for k, v in tc._non_tensordict.items()
    ]
    return entries + others


def _flat(node: Node) -> str:
    if isinstance(node, str):
        return node
    prefix, entries = node
    return prefix + "{" + ", ".join(f"{k}: {_flat(v)}" for k, v in entries) + "}"


def _render(node: Node, indent: str, used: int, tail: int) -> str:
    """``node`` on one line if ``used`` columns before it, it and ``tail`` after it fit in the
    width; else one entry per line, each rendered by the same rule."""
    flat = _flat(node)
    if isinstance(node, str) or not node[1] or used + len(flat) + tail <= _WIDTH:
        return flat
    prefix, entries = node
    pad = indent + "    "
    lines = []
    for i, (key, value) in enumerate(entries):
        after = tail + 1 if i == len(entries) - 1 else 1
        lines.append(f"{pad}{key}: {_render(value, pad, len(pad) + len(key) + 2, after)}")
    return prefix + "{\n" + ",\n".join(lines) + "}"


def compact_repr(td: Any) -> str:
    """The compact repr of a tensordict, a lazy stack or a tensorclass instance (see the module
    documentation).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> nested = TensorDict(x=torch.zeros(3, 5), batch_size=[3, 5])
        >>> td = TensorDict(a=torch.zeros(3, 4), n=nested, batch_size=[3])
        >>> print(compact_repr(td))
        TensorDict(batch_size=[3], fields={a: f32[4], n: [5]{x: f32[]}})
    """
    opts = get_printoptions()
    header = []
    if opts["show_batch_size"]:
        header.append("batch_size=[" + ",".join(str(s) for s in td.batch_size) + "]")
    if opts["show_device"] and td.device is not None:
        header.append(f"device={td.device}")
    exclusive: list[tuple[str, Node]] = []
    if _is_tensorclass(td):  # its tensordict's fields, then the ones kept outside it
        head = f"{type(td).__name__}(" + "".join(f"{h}, " for h in header) + "fields="
        return head + _render(("", _tensorclass_body(td)), "", len(head), 1) + ")"
    if hasattr(td, "tensordicts") and hasattr(td, "stack_dim"):
        header.append(f"stack_dim={td.stack_dim}")
        common = set(td._own_keys())
        for i, member in enumerate(td.tensordicts):
            items = [(k, v) for k, v in member._own_items() if k not in common]
            own = [(str(k), _entry(member, k, v)) for k, v in items]
            if own:
                exclusive.append((str(i), ("", _sorted(own))))
    head = f"{type(td).__name__}(" + "".join(f"{h}, " for h in header) + "fields="
    tail = 1 + len(", exclusive_fields={") if exclusive else 1
    out = head + _render(("", _body(td)), "", len(head), tail)
    if exclusive:
        used = len(out.rsplit("\n", 1)[-1]) + len(", exclusive_fields=")
        out += ", exclusive_fields=" + _render(("", exclusive), "", used, 1)
    return out + ")"
