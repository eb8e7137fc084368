"""safetensors files: every tensor under its nested key joined with ``"."``, as in a ``state_dict``.

The structure (batch size and dimension names of each level, tensorclasses, lazy stacks,
non-tensor values) is kept as one JSON string under the metadata key ``"tensordict"``, upstream
tensordict's layout, so that :func:`from_safetensors` rebuilds it. Files without it (a model
checkpoint) load as a nested TensorDict with no batch dimension.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import FormatValueError
from tensordict.formats.deps import require, require_file

__all__ = ["from_safetensors", "to_safetensors"]

META_KEY = "tensordict"


def to_safetensors(data: Any, path: str | Path) -> None:
    """Save a tensordict or a tensorclass to a safetensors file.

    Raises:
        MissingDependencyError: safetensors is not installed (extra ``safetensors``).
        FormatValueError: a value safetensors cannot hold (a nested or sparse tensor, a
            non-tensor value that is not JSON, a stack of non-tensor values).
        ValueError: two keys give the same name once joined with ``"."``.

    Examples:
        >>> import tempfile, os
        >>> from tensordict import TensorDict
        >>> path = os.path.join(tempfile.mkdtemp(), "td.safetensors")
        >>> td = TensorDict({"w": torch.ones(2, 3), "sub": {"b": torch.zeros(2)}}, [2])
        >>> to_safetensors(td, path)
        >>> from_safetensors(path)["sub", "b"]
        tensor([0., 0.])
    """
    st = require("safetensors.torch", "safetensors", "writing safetensors files")
    tensors: dict[str, torch.Tensor] = {}
    root = _describe(data, (), tensors)
    meta = {META_KEY: json.dumps({"version": 1, "root": root})}
    st.save_file(tensors, str(path), metadata=meta)


def _describe(td: Any, prefix: tuple[str, ...], tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    node: dict[str, Any] = {}
    if getattr(type(td), "_is_tensorclass", False):
        cls = type(td)
        td = td._tensordict
        node["class"] = str(cls)
    if isinstance(td, LazyStackedTensorDict) and not isinstance(td, NonTensorStack):
        node["stack_dim"] = td.stack_dim
        td = td.to_tensordict()
    node = {"batch_size": list(td.batch_size), "names": td._names_or_none(), **node}
    keys: dict[str, Any] = {}
    for key, value in td._own_items():
        path = prefix + (key,)
        if isinstance(value, NonTensorData):
            keys[key] = {"non_tensor": _json_value(path, value.data)}
        elif isinstance(value, NonTensorStack):
            raise FormatValueError(
                f"cannot save the non-tensor stack {path!r} (one python object per element) in "
                "safetensors. Save it with td.memmap(...) or to_h5/to_zarr instead."
            )
        elif isinstance(value, TensorDictBase) or getattr(type(value), "_is_tensorclass", False):
            keys[key] = {"td": _describe(value, path, tensors)}
        else:
            keys[key] = {"tensor": _add_tensor(path, value, tensors)}
    node["keys"] = keys
    return node


def _add_tensor(path: tuple[str, ...], value: torch.Tensor, tensors: dict[str, Any]) -> str:
    name = ".".join(path)
    if name in tensors:
        raise ValueError(
            f"two entries are both named {name!r} once their keys are joined with '.': rename "
            "one of them (safetensors keys are flat)."
        )
    if value.is_nested or value.layout != torch.strided:
        raise FormatValueError(
            f"cannot save {path!r} in safetensors: its layout {value.layout} is not a dense "
            "tensor. Convert it first (e.g. .to_padded_tensor(0) or .to_dense())."
        )
    # safetensors refuses tensors that share memory: each is saved as its own copy
    tensors[name] = value.detach().to("cpu").contiguous().clone()
    return name


def _json_value(path: tuple[str, ...], value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise FormatValueError(
            f"cannot save the non-tensor value {path!r} ({type(value).__name__}) in safetensors: "
            "only JSON values (str, int, float, bool, None, list, dict) are kept. Convert it, "
            "or save with td.memmap(...)."
        ) from None
    return value


def from_safetensors(path: str | Path, *, device: Any = None) -> Any:
    """Load a tensordict from a safetensors file (its structure if tensordict wrote it; else a
    nested TensorDict whose keys are the names split on ``"."``).

    A tensorclass is rebuilt only if the module defining it is already imported (a file never
    makes tensordict import a module).
    """
    st = require("safetensors", "safetensors", "reading safetensors files")
    require_file(path, "safetensors file")
    with st.safe_open(str(path), framework="pt", device="cpu") as f:
        meta = f.metadata() or {}
        tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
    raw = meta.get(META_KEY)
    if raw is None:
        nested: dict[Any, Any] = {tuple(name.split(".")): t for name, t in tensors.items()}
        td: Any = TensorDict(nested, [])
    else:
        td = _rebuild(json.loads(raw)["root"], tensors)
    return td.to(device) if device is not None else td


def _rebuild(node: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Any:
    source: dict[str, Any] = {}
    bs = torch.Size(node["batch_size"])
    for key, entry in node["keys"].items():
        if "tensor" in entry:
            source[key] = tensors[entry["tensor"]]
        elif "td" in entry:
            source[key] = _rebuild(entry["td"], tensors)
        else:
            source[key] = NonTensorData(entry["non_tensor"], batch_size=bs)
    td: Any = TensorDict(source, batch_size=bs)
    if node.get("names"):
        td.names = node["names"]
    if "stack_dim" in node:
        td = LazyStackedTensorDict(*td.unbind(node["stack_dim"]), stack_dim=node["stack_dim"])
    cls = _tensorclass(node.get("class"))
    if cls is not None:
        td = cls._from_tensordict(td, None)
    return td


def _tensorclass(name: Any) -> Any:
    """The class named ``"<class 'module.qualname'>"`` if its module is imported, else None."""
    if not isinstance(name, str) or not name.startswith("<class '") or not name.endswith("'>"):
        return None
    parts = name[len("<class '") : -2].split(".")
    for i in range(len(parts) - 1, 0, -1):
        obj: Any = sys.modules.get(".".join(parts[:i]))
        for part in parts[i:]:
            obj = getattr(obj, part, None)
        if getattr(obj, "_is_tensorclass", False):
            return obj
    return None
