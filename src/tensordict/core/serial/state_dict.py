"""``state_dict`` / ``load_state_dict`` of tensordicts, in the layout ``torch.nn.Module`` uses.

A state dict is an ``OrderedDict`` of the tensors under dotted keys (``"a"``, ``"nested.b"``) or,
with ``flatten=False``, of nested ``OrderedDict``\\ s. Its ``_metadata`` attribute holds one entry
per tensordict path (``""`` for the root): the batch size and device, and, for non-tensor entries,
their data. ``load_state_dict`` reads both layouts back.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

import torch

from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorData, is_non_tensor
from tensordict.errors import KeyMismatchError

__all__ = ["load_state_dict", "state_dict"]


def _inner(value: Any) -> Any:
    """The tensordict to walk for ``value`` (a tensorclass walks its tensordict), or None."""
    if getattr(type(value), "_is_tensorclass", False):
        return value._tensordict
    if isinstance(value, TensorCollection) and not is_non_tensor(value):
        return value
    return None


def _non_tensor_meta(value: Any) -> dict[str, Any]:
    data = value.data if isinstance(value, NonTensorData) else value.tolist()
    return {
        "batch_size": value.batch_size,
        "device": value.device,
        "_type": type(value).__name__,
        "_non_tensor": {"data": data, "_metadata": None, "_is_non_tensor": True},
    }


def state_dict(
    td: Any,
    destination: Any = None,
    prefix: str = "",
    keep_vars: bool = False,
    flatten: bool = True,
) -> collections.OrderedDict[str, Any]:
    """The tensors of ``td`` as a ``torch.nn.Module``-style state dict (``td.state_dict()``;
    batch sizes, devices and non-tensor data in its ``_metadata``).

    Args:
        td: a tensordict.
        destination: a mapping to fill (a new ``OrderedDict`` by default).
        prefix: prepended to every key.
        keep_vars: keep the tensors attached to autograd (detached by default).
        flatten: dotted keys (``True``) or nested ``OrderedDict``\\ s.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2])
        >>> list(td.state_dict())
        ['a', 'n.b']
    """
    out: Any = collections.OrderedDict() if destination is None else destination
    if not hasattr(out, "_metadata"):
        out._metadata = collections.OrderedDict()
    _fill(td, out, out._metadata, prefix, "", keep_vars, flatten)
    return out  # type: ignore[no-any-return]


def _fill(
    td: Any, out: Any, meta: Any, prefix: str, path: str, keep_vars: bool, flatten: bool
) -> None:
    meta[path] = {"batch_size": td.batch_size, "device": td.device}
    for key, value in td._own_items():
        sub_path = f"{path}.{key}" if path else key
        if isinstance(value, torch.Tensor):
            out[prefix + key] = value if keep_vars else value.detach()
        elif is_non_tensor(value):
            meta[sub_path] = _non_tensor_meta(value)
            if not flatten:
                out[prefix + key] = collections.OrderedDict()
        elif (inner := _inner(value)) is not None:
            if flatten:
                _fill(inner, out, meta, f"{prefix}{key}.", sub_path, keep_vars, flatten)
            else:
                nested: Any = collections.OrderedDict()
                _fill(inner, nested, meta, "", sub_path, keep_vars, flatten)
                out[prefix + key] = nested


def load_state_dict(
    td: Any,
    state_dict: Mapping[str, Any],
    strict: bool = True,
    assign: bool = False,
    from_flatten: bool | None = None,
) -> Any:
    """Load a state dict made by :func:`state_dict` into ``td`` (``td.load_state_dict(sd)``):
    existing tensors are written in place (``assign=True`` replaces them), missing entries are
    created; return ``td``.

    Args:
        td: the tensordict to load into.
        state_dict: flat (dotted keys) or nested.
        strict: the state dict and the tensordict must hold the same keys.
        assign: set the given tensors instead of copying into the existing ones.
        from_flatten: whether dotted keys are nested keys (default: yes).

    Raises:
        KeyMismatchError: (a ``RuntimeError``) the keys differ and ``strict`` is set.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2)}}, [2])
        >>> zeros = td.clone().zero_()
        >>> zeros.load_state_dict(td.state_dict())["n", "b"]
        tensor([1., 1.])
    """
    meta = dict(getattr(state_dict, "_metadata", None) or {})
    state = _drop_legacy_keys(state_dict, meta)
    entries: dict[tuple[str, ...], Any] = {}
    _collect(state, (), entries, from_flatten)
    for path, info in meta.items():
        if "_non_tensor" in info:
            entries[tuple(path.split("."))] = info["_non_tensor"]["data"]
    if strict:
        _check_keys(td, entries)
    _make_parents(td, meta, entries)
    for path, value in entries.items():
        current = td.get(path, None) if not assign else None
        if isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor):
            td.set_(path, value)  # in place (through to the members of a lazy stack)
        elif isinstance(value, torch.Tensor):
            td.set(path, value)
        else:
            td.set_non_tensor(path, value)
    return td


#: root entries of the state dicts of older tensordict versions (metadata, not entries)
_LEGACY_KEYS = ("__batch_size", "__device")


def _drop_legacy_keys(state: Mapping[str, Any], meta: dict[str, Any]) -> Mapping[str, Any]:
    """``state`` without the legacy ``__batch_size`` / ``__device`` entries; their batch size
    becomes the root metadata (applied to an empty tensordict), as upstream reads them."""
    if not any(key in state for key in _LEGACY_KEYS):
        return state
    if "__batch_size" in state and "" not in meta:
        meta[""] = {"batch_size": torch.Size(state["__batch_size"])}
    return {k: v for k, v in state.items() if k not in _LEGACY_KEYS}


def _collect(
    state: Mapping[str, Any],
    base: tuple[str, ...],
    entries: dict[tuple[str, ...], Any],
    from_flatten: bool | None,
) -> None:
    for key, value in state.items():
        path = base + (tuple(key.split(".")) if from_flatten is not False else (key,))
        if isinstance(value, Mapping) and not is_non_tensor(value):
            _collect(value, path, entries, from_flatten)
        else:
            entries[path] = value


def _check_keys(td: Any, entries: dict[tuple[str, ...], Any]) -> None:
    own = {
        (k,) if isinstance(k, str) else tuple(k)
        for k in td.keys(True, True, is_leaf=leaf_or_non_tensor)
    }
    given = set(entries)
    if own != given:
        raise KeyMismatchError(
            "Cannot load the state dict with strict=True: its keys differ from the tensordict's. "
            f"Only in the state dict: {sorted(given - own)}; only in the tensordict: "
            f"{sorted(own - given)}. Pass strict=False to load the common keys only."
        )


def _make_parents(td: Any, meta: dict[str, Any], entries: dict[tuple[str, ...], Any]) -> None:
    """Create the nested tensordicts the state dict holds and ``td`` lacks (with their batch
    size from the metadata); an empty ``td`` takes the root batch size."""
    root = meta.get("")
    if root is not None and not td._own_keys() and td.batch_size != root["batch_size"]:
        td.batch_size = root["batch_size"]
    parents = sorted({path[:i] for path in entries for i in range(1, len(path))}, key=len)
    for parent in parents:
        if td.get(parent, None) is None:
            info = meta.get(".".join(parent))
            above = td.get(parent[:-1]) if len(parent) > 1 else td
            bs = info["batch_size"] if info is not None else above.batch_size
            td.set(parent, td._new_dense({}, bs))
