"""Rebuild a tensordict from its printed repr: the structure, shapes, dtypes and devices.

Tensor values are not in a repr, so leaves come back as zeros; non-tensor data comes back when
its printed value is a Python literal (otherwise as its text). Both the detailed layout
(``Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, is_shared=False)``) and the
compact one (``TensorDict(batch_size=[3], fields={a: f32[]})``) are read.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import torch

from tensordict.core.dense import TensorDict
from tensordict.core.nontensor.data import NonTensorData

__all__ = ["parse_tensor_dict_string"]

_OPEN, _CLOSE = "([{", ")]}"
_CALL = re.compile(r"^\s*([A-Za-z_][\w.]*)\((.*)\)\s*$", re.DOTALL)
_COMPACT_LEAF = re.compile(r"^([a-z]+\d*)\[([\d, ]*)\](?:@(\S+))?$")
# a compact nested tensordict: ``{...}``, or ``[2]{...}`` with batch dims of its own
_COMPACT_NESTED = re.compile(r"^(?:TensorDict)?(?:\[([\d, ]*)\])?\s*(?=\{)")
_SHORT_DTYPES = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "bool": torch.bool,
    "c64": torch.complex64,
    "c128": torch.complex128,
}


def _split(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside brackets and quotes."""
    parts, depth, start, quote = [], 0, 0, ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
            i += len(sep)
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _kwargs(body: str) -> dict[str, str]:
    out = {}
    for part in _split(body, ","):
        name, _, value = part.partition("=")
        out[name.strip()] = value.strip()
    return out


def _size(text: str) -> torch.Size:
    text = text.strip()
    if text.startswith("torch.Size("):
        text = text[len("torch.Size(") : -1]
    return torch.Size(ast.literal_eval(text) if text else [])


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _device(text: str | None) -> torch.device | None:
    if text is None or text.strip() in ("None", ""):
        return None
    return torch.device(text.strip())


def _dtype(text: str) -> torch.dtype:
    dtype = getattr(torch, text.strip().removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"parse_tensor_dict_string: unknown dtype {text!r}.")
    return dtype


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _fields(text: str) -> list[tuple[str, str]]:
    inner = text.strip()[1:-1]
    out = []
    for part in _split(inner, ","):
        key, _, value = part.partition(":")
        out.append((key.strip(), value.strip()))
    return out


def _value(text: str, batch_size: torch.Size, device: torch.device | None) -> Any:
    nested = _COMPACT_NESTED.match(text)
    if nested and text.endswith("}"):  # compact nested tensordict
        extra = _ints(nested.group(1) or "")
        return _build(
            _fields(text[nested.end() :]), torch.Size([*batch_size, *extra]), device, device
        )
    compact = _COMPACT_LEAF.match(text)
    if compact and compact.group(1) in _SHORT_DTYPES:
        dev = _device(compact.group(3)) or device
        shape = (*batch_size, *_ints(compact.group(2)))
        return torch.zeros(shape, dtype=_SHORT_DTYPES[compact.group(1)], device=dev)
    call = _CALL.match(text)
    if call is None:
        return NonTensorData(_literal(text), batch_size=batch_size, device=device)
    name, body = call.group(1), call.group(2)
    if name.endswith(("TensorDict", "TensorDictBase")):
        return _parse_call(body)
    kw = _kwargs(body)
    if name == "NonTensorData":
        return NonTensorData(
            _literal(kw.get("data", "None")),
            batch_size=_size(kw["batch_size"]) if "batch_size" in kw else batch_size,
            device=_device(kw.get("device")),
        )
    if "shape" in kw:
        dev = _device(kw.get("device")) or device
        dtype = _dtype(kw["dtype"]) if "dtype" in kw else torch.float32
        return torch.zeros(_size(kw["shape"]), dtype=dtype, device=dev)
    return NonTensorData(_literal(text), batch_size=batch_size, device=device)


def _build(
    fields: list[tuple[str, str]],
    batch_size: torch.Size,
    device: torch.device | None,
    leaf_device: torch.device | None,
) -> TensorDict:
    source = {key: _value(value, batch_size, leaf_device) for key, value in fields}
    return TensorDict(source, batch_size=batch_size, device=device)


def _parse_call(body: str) -> TensorDict:
    kw = _kwargs(body)
    batch_size = _size(kw.get("batch_size", "[]"))
    device = _device(kw.get("device"))
    fields = _fields(kw.get("fields", "{}"))
    return _build(fields, batch_size, device, device)


def parse_tensor_dict_string(s: str) -> TensorDict:
    """Build a tensordict with the structure printed in ``s`` (leaves are zeros).

    Raises:
        ValueError: ``s`` is not the repr of a tensordict.

    Examples:
        >>> td = TensorDict(a=torch.ones(3), nested=TensorDict(b=torch.ones(3, 2), batch_size=[3]),
        ...                 batch_size=[3])
        >>> out = parse_tensor_dict_string(repr(td))
        >>> out["nested", "b"].shape, str(out) == str(td)
        (torch.Size([3, 2]), True)
    """
    call = _CALL.match(s)
    if call is None or not call.group(1).endswith("TensorDict"):
        raise ValueError(
            f"parse_tensor_dict_string expects the repr of a tensordict, got {s[:60]!r}."
        )
    return _parse_call(call.group(2))
