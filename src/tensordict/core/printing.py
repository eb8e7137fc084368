"""``repr`` of tensordicts, in upstream tensordict's layout.

Field lines are sorted as whole strings and indented by four spaces per level; a nested tensordict
prints its own repr in place.
"""

from __future__ import annotations

import textwrap
from typing import Any

import torch

__all__ = ["field_lines", "leaf_repr", "td_repr"]


def leaf_repr(value: Any) -> str:
    """One entry's description (``Tensor(shape=..., device=..., dtype=..., is_shared=...)``)."""
    if isinstance(value, torch.Tensor):
        shared = value.is_shared() and type(value) is torch.Tensor
        shape = value.shape if not value.is_nested else _nested_shape(value)
        return (
            f"{type(value).__name__}(shape={shape}, device={value.device}, "
            f"dtype={value.dtype}, is_shared={shared})"
        )
    return repr(value)  # tensordicts, NonTensorData and NonTensorStack print themselves


def _nested_shape(value: torch.Tensor) -> torch.Size:
    """A nested tensor's shape with -1 for its ragged dims (a strided one has no ``.shape``)."""
    sizes = [t.shape for t in value.unbind()]
    if not sizes:
        return torch.Size([0])
    merged = [s if all(sh[i] == s for sh in sizes) else -1 for i, s in enumerate(sizes[0])]
    return torch.Size([len(sizes), *merged])


def field_lines(items: Any, sep: str = ": ") -> list[str]:
    return sorted(f"{key}{sep}{leaf_repr(value)}" for key, value in items)


def _fields_block(lines: list[str]) -> str:
    return textwrap.indent("\n" + ",\n".join(lines), "    ")


def _is_shared(td: Any) -> bool:
    try:
        return bool(td.is_shared()) and not td.is_memmap()
    except Exception:
        return False


def td_repr(td: Any) -> str:
    """The repr of a TensorDict or LazyStackedTensorDict."""
    from tensordict.core.lazy_stack import LazyStackedTensorDict

    if isinstance(td, LazyStackedTensorDict):
        return _lazy_repr(td)
    fields = _fields_block(field_lines(td._own_items()))
    device = td.device
    parts = [
        f"fields={{{fields}}}",
        f"batch_size={td.batch_size}",
        f"device={device}",
        f"is_shared={_is_shared(td)}",
    ]
    body = textwrap.indent(",\n".join(parts), "    ")
    return f"{type(td).__name__}(\n{body})"


def _lazy_repr(td: Any) -> str:
    common = []
    for key in td._own_keys():
        common.append((key, td._repr_value(key)))
    fields = _fields_block(field_lines(common))
    shared_keys = set(td._own_keys())
    exclusive = []
    for i, member in enumerate(td.tensordicts):
        own = [(k, v) for k, v in member._own_items() if k not in shared_keys]
        if own:
            lines = textwrap.indent(",\n".join(field_lines(own)), "    ")
            exclusive.append(f"{i} ->\n{lines}")
    exclusive_block = _fields_block(exclusive)
    parts = [
        f"fields={{{fields}}}",
        f"exclusive_fields={{{exclusive_block}}}",
        f"batch_size={td.batch_size}",
        f"device={td.device}",
        f"is_shared={_is_shared(td)}",
        f"stack_dim={td.stack_dim}",
    ]
    body = textwrap.indent(",\n".join(parts), "    ")
    return f"{type(td).__name__}(\n{body})"
