"""``repr`` of tensordicts, in upstream tensordict's layout.

Field lines are sorted as whole strings and indented by four spaces per level; a nested tensordict
prints its own repr in place. What is shown follows :func:`~tensordict.set_printoptions`; the
compact form, upstream's default, is built in ``compact_repr``.
"""

from __future__ import annotations

import textwrap
from typing import Any

import torch

from tensordict.core.behaviour.nesting import recursion_guard
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.options import get_printoptions
from tensordict.core.serial.compact_repr import _nested_shape, compact_repr

__all__ = ["field_lines", "header_parts", "leaf_repr", "td_repr"]


def leaf_repr(value: Any) -> str:
    """One entry's description (``Tensor(shape=..., device=..., dtype=..., is_shared=...)``),
    with the details :func:`~tensordict.set_printoptions` asks for."""
    if not isinstance(value, torch.Tensor):
        return repr(value)  # tensordicts, NonTensorData and NonTensorStack print themselves
    opts = get_printoptions()
    parts = []
    if opts["show_shape"]:
        parts.append(f"shape={value.shape if not value.is_nested else _nested_shape(value)}")
    if opts["show_field_device"]:
        parts.append(f"device={value.device}")
    if opts["show_dtype"]:
        parts.append(f"dtype={value.dtype}")
    if opts["show_field_is_shared"]:
        parts.append(f"is_shared={value.is_shared() and type(value) is torch.Tensor}")
    parts += _detail_parts(value, opts)
    return f"{type(value).__name__}({', '.join(parts)})"


def _detail_parts(value: torch.Tensor, opts: dict[str, Any]) -> list[str]:
    parts = []
    if opts["show_grad"]:
        parts.append(f"requires_grad={value.requires_grad}")
    if opts["show_is_contiguous"]:
        parts.append(f"is_contiguous={value.is_contiguous()}")
    if opts["show_is_view"]:
        parts.append(f"is_view={value._base is not None}")
    if opts["show_storage_size"]:
        parts.append(f"storage_size={value.untyped_storage().nbytes()}")
    if opts["plain"] and not value.is_nested and value.numel():
        data = value.detach().double()
        std = data.std().item() if data.numel() > 1 else 0.0
        parts.append(f"mean={data.mean().item():.4g}, std={std:.4g}")
    return parts


def field_lines(items: Any, sep: str = ": ") -> list[str]:
    """One line per entry, in the order of the ``sort_keys`` print option (alphabetical by
    default, ``"insertion"``, or a key function of the key)."""
    lines = [(str(key), f"{key}{sep}{leaf_repr(value)}") for key, value in items]
    order = get_printoptions()["sort_keys"]
    if order == "insertion":
        return [line for _, line in lines]
    if callable(order):
        return [line for _, line in sorted(lines, key=lambda kl: order(kl[0]))]
    return sorted(line for _, line in lines)


def header_parts(td: Any) -> list[str]:
    """``batch_size=``, ``device=`` and ``is_shared=`` of a tensordict, as the print options
    show them."""
    opts = get_printoptions()
    parts = []
    if opts["show_batch_size"]:
        parts.append(f"batch_size={td.batch_size}")
    if opts["show_device"]:
        parts.append(f"device={td.device}")
    if opts["show_is_shared"]:
        parts.append(f"is_shared={_is_shared(td)}")
    return parts


def _fields_block(lines: list[str]) -> str:
    return textwrap.indent("\n" + ",\n".join(lines), "    ")


def _is_shared(td: Any) -> bool:
    try:
        return bool(td.is_shared()) and not td.is_memmap()
    except Exception:
        return False


def td_repr(td: Any) -> str:
    """The repr of a TensorDict or LazyStackedTensorDict: the compact form (upstream's
    default) unless ``set_printoptions(compact=False)``, or the detailed one."""
    with recursion_guard("repr"):
        return _td_repr(td)


def _td_repr(td: Any) -> str:
    if get_printoptions()["compact"]:
        try:
            return compact_repr(td)
        except Exception:  # (a repr must not raise: the detailed form reads less metadata)
            pass
    if isinstance(td, LazyStackedTensorDict):
        return _lazy_repr(td)
    fields = _fields_block(field_lines(td._own_items()))
    parts = [f"fields={{{fields}}}", *header_parts(td)]
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
        *header_parts(td),
        f"stack_dim={td.stack_dim}",
    ]
    body = textwrap.indent(",\n".join(parts), "    ")
    return f"{type(td).__name__}(\n{body})"
