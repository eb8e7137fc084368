"""``state_dict`` / ``load_state_dict`` of tensorclasses, in upstream's layout.

A flat state dict (the default) is an ``OrderedDict`` of the tensors under dotted keys
(``"x"``, ``"y.x"`` for a nested instance ``y``), with a ``_metadata`` attribute, as
``torch.nn.Module`` state dicts have: one entry per instance path (``""`` for the root, ``"y"``,
...) holding its class (``_type``), its non-tensor fields (``_non_tensor``), batch size and
device. ``flatten=False`` gives nested dicts instead. ``load_state_dict`` reads both, and the
older layout (``{"_tensordict": {...}, "_non_tensordict": {...}}``).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

import torch

from tensordict.tensorclass.construct import new_instance

__all__ = ["load_state_dict", "select", "state_dict"]

_UNEXPECTED = "Key {!r} wasn't expected in the state-dict."


def _is_tc(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def _fields(tc: Any) -> tuple[str, ...]:
    return type(tc).__tensorclass_spec__.order  # type: ignore[no-any-return]


def _split(tc: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(tensors, nested collections, non-tensor values) of a tensorclass, by field."""
    tensors: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    plain: dict[str, Any] = {}
    for name in _fields(tc):
        value = getattr(tc, name)
        if isinstance(value, torch.Tensor):
            tensors[name] = value
        elif _is_tc(value) or hasattr(value, "_own_items"):
            nested[name] = value
        else:
            plain[name] = value
    return tensors, nested, plain


def _meta(tc: Any, plain: dict[str, Any]) -> dict[str, Any]:
    return {
        "_type": str(type(tc)),
        "_non_tensor": dict(plain),
        "batch_size": tc.batch_size,
        "device": tc.device,
    }


def state_dict(
    self: Any,
    destination: Any = None,
    prefix: str = "",
    keep_vars: bool = False,
    flatten: bool = True,
) -> Any:
    """The tensors of this instance (and nested ones) with its non-tensor fields as metadata.

    Args:
        destination: a mapping to fill (a new ``OrderedDict`` by default).
        prefix: prepended to every key.
        keep_vars: keep tensors attached to autograd (detached otherwise).
        flatten: dotted keys (``True``) or nested dicts.
    """
    out: Any = collections.OrderedDict() if destination is None else destination
    if not hasattr(out, "_metadata"):
        out._metadata = collections.OrderedDict()
    _fill(self, out, prefix, keep_vars, flatten)
    return out


def _fill(tc: Any, out: Any, prefix: str, keep_vars: bool, flatten: bool) -> None:
    tensors, nested, plain = _split(tc)
    out._metadata[prefix.rstrip(".")] = _meta(tc, plain)
    for name, value in tensors.items():
        out[prefix + name if flatten else name] = value if keep_vars else value.detach()
    for name, value in nested.items():
        if _is_tc(value) and flatten:
            _fill(value, out, f"{prefix}{name}.", keep_vars, flatten)
        elif _is_tc(value):
            sub: Any = collections.OrderedDict()
            sub._metadata = collections.OrderedDict()
            _fill(value, sub, "", keep_vars, flatten)
            out[name] = sub
        else:
            inner = (
                value.state_dict(keep_vars=keep_vars)
                if hasattr(value, "state_dict")
                else {k: v for k, v in value.flatten_keys(".").items()}
            )
            for key, leaf in inner.items():
                out[f"{prefix}{name}.{key}" if flatten else f"{name}.{key}"] = leaf


def load_state_dict(
    self: Any, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
) -> Any:
    """Write the tensors and non-tensor fields of ``state_dict`` into this instance.

    Raises:
        KeyError: a key (or a non-tensor entry) that names no field, with ``strict``.
    """
    if "_tensordict" in state_dict and "_non_tensordict" in state_dict:  # the older layout
        for key, value in state_dict["_tensordict"].items():
            if not key.startswith("__"):
                _write(self, key.split("."), value, strict)
        for key, value in state_dict["_non_tensordict"].items():
            _write(self, [key], value, strict)
        return self
    metadata = getattr(state_dict, "_metadata", None) or {}
    for path, meta in metadata.items():
        for key, value in (meta.get("_non_tensor") or {}).items():
            _write(self, [*(path.split(".") if path else []), key], value, strict)
    _load_items(self, state_dict, [], strict)
    return self


def _load_items(tc: Any, items: Mapping[str, Any], base: list[str], strict: bool) -> None:
    for key, value in items.items():
        if isinstance(value, Mapping) and not isinstance(value, torch.Tensor):
            _load_items(tc, value, [*base, key], strict)
            sub_meta = getattr(value, "_metadata", None) or {}
            for path, meta in sub_meta.items():
                prefix = [*base, key, *(path.split(".") if path else [])]
                for name, data in (meta.get("_non_tensor") or {}).items():
                    _write(tc, [*prefix, name], data, strict)
        else:
            _write(tc, [*base, *key.split(".")], value, strict)


def _write(tc: Any, path: list[str], value: Any, strict: bool) -> None:
    target = tc
    for i, part in enumerate(path[:-1]):
        nxt = _child(target, part)
        if nxt is None:
            if strict:
                raise KeyError(_UNEXPECTED.format(".".join(path[i:])))
            return
        target = nxt
    name = path[-1]
    if _is_tc(target):
        if name not in _fields(target):
            if strict:
                raise KeyError(_UNEXPECTED.format(name))
            return
        current = getattr(target, name)
        if isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor):
            current.copy_(value)
        else:
            setattr(target, name, value)
    elif hasattr(target, "_own_items"):
        target.set(name, value)


def _child(target: Any, part: str) -> Any:
    if _is_tc(target):
        return getattr(target, part) if part in _fields(target) else None
    if hasattr(target, "_own_items"):
        return target.get(part, None)
    return None


def select(self: Any, *keys: Any, inplace: bool = False, strict: bool = True, **kwargs: Any) -> Any:
    """``TensorDict.select`` of the fields; ``as_tensordict=True`` gives the plain tensordict
    (the unselected fields are otherwise ``None`` in the result)."""
    as_tensordict = kwargs.pop("as_tensordict", False)
    selected = self._tensordict.select(*keys, inplace=inplace, strict=strict, **kwargs)
    if as_tensordict:
        return selected
    if inplace:
        return self
    kept = {k: v for k, v in self._non_tensordict.items() if k in keys}
    return new_instance(type(self), selected, kept)
