"""Reading and writing the fields of a tensorclass instance.

Each field is a ``property`` on the class whose getter reads the inner tensordict's dict directly:
``sample.obs`` costs one dict lookup more than ``td["obs"]``. Writes (``sample.obs = ...``,
``sample["obs"] = ...``, ``sample.set("obs", ...)``) go through :func:`set_field`, which converts
and validates the value before changing anything, so a failed assignment leaves the instance as it
was. ``__getattr__`` is only reached for names the class does not define: it hands out the inner
tensordict's attributes (methods come back wrapped like the forwarded ones).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from tensordict.core.behaviour.shape import broadcasts_to
from tensordict.core.indexing import plan_index
from tensordict.core.keys import key_path, leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import (
    BatchSizeError,
    FrozenTensorclassError,
    LockedError,
    ShapeMismatchError,
    UndeclaredFieldError,
)
from tensordict.tensorclass.construct import initialising, spec_of
from tensordict.tensorclass.fields import store_value
from tensordict.tensorclass.forwarding import wrap_result

__all__ = [
    "field_property",
    "get",
    "getattr_fallback",
    "getitem",
    "set_",
    "set_field",
    "setattr_",
    "setitem",
]

_MISSING: Any = object()
_Tensor = torch.Tensor


def _is_tc(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def field_property(name: str, doc: str | None = None, raw: bool = False) -> property:
    """The attribute of field ``name``: tensors as stored, non-tensor data unwrapped (kept as
    stored with ``raw``, as ``tensor_only`` classes read a ``NonTensorData`` field)."""

    def fget(self: Any) -> Any:
        try:  # a TensorDict keeps its entries in the dict `_tensordict`
            value = self._tensordict._tensordict[name]
        except (AttributeError, KeyError):
            value = self._tensordict._get_str(name, _MISSING)
            if value is _MISSING:
                return self._non_tensordict.get(name)
        if raw or type(value) is _Tensor:
            return value
        return _unwrap_non_tensor(value)

    def fset(self: Any, value: Any) -> None:
        set_field(self, name, value)

    fget.__qualname__ = fset.__qualname__ = name
    fget.__tensorclass_generated__ = True  # type: ignore[attr-defined]
    return property(fget, fset, None, doc or f"The field ``{name}``.")


def set_field(self: Any, name: str, value: Any) -> None:
    """Store ``value`` in field ``name`` (all checks first: a failure changes nothing).

    Raises:
        LockedError: the instance is locked (frozen classes are locked after ``__init__``).
        FieldTypeError: a value the class options refuse (see ``tensordict.tensorclass.fields``).
        BatchSizeError: a tensor or collection whose leading dims differ from the batch size.
    """
    td = self._tensordict
    cls = type(self)
    if td.is_locked:
        raise LockedError(
            f"cannot set {cls.__name__}.{name}: the instance is locked. Write tensors in place "
            f"with instance.set_({name!r}, value), or unlock it with instance.unlock_()."
        )
    stored = store_value(spec_of(cls), name, value, td.batch_size, td.device)
    nt = self._non_tensordict
    if stored is None:
        if td._get_str(name, None) is not None:
            td._del_str(name)
        nt[name] = None
        return
    try:
        td.set(name, stored)
    except BatchSizeError as err:
        raise BatchSizeError(
            f"{_mismatch(td.batch_size, stored)} ({cls.__name__}.{name}: {err})"
        ) from None
    nt.pop(name, None)


def _mismatch(batch_size: torch.Size, value: Any) -> str:
    """Upstream's wording for a value that does not fit the batch size."""
    inner = value._tensordict if _is_tc(value) else value
    if hasattr(inner, "_own_items"):
        for key in inner.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
            leaf = inner.get(key)
            shape = getattr(leaf, "shape", None)
            if shape is not None and tuple(shape[: len(batch_size)]) != tuple(batch_size):
                name = key if isinstance(key, str) else ".".join(key)
                return (
                    f"the {type(leaf).__name__} {name} has shape {shape} which is incompatible "
                    f"with the batch-size {batch_size}."
                )
    shape = getattr(value, "shape", None)
    return f"batch dimension mismatch, got self.batch_size={batch_size} and value.shape={shape}"


def setattr_(self: Any, name: str, value: Any) -> None:
    """``__setattr__``: fields, and settable properties (``batch_size``, ``names``, user ones).

    Raises:
        FrozenTensorclassError: the class is frozen.
        UndeclaredFieldError: ``name`` is not a field or a settable attribute of the class.
    """
    cls = type(self)
    spec = spec_of(cls)
    if spec.frozen and not initialising(self):
        raise FrozenTensorclassError(
            f"cannot assign to {name!r}: {cls.__name__} is frozen. Build a new instance, or write "
            "tensor data in place (instance.set_(key, value), instance[index] = other)."
        )
    if name in spec.names:
        set_field(self, name, value)
        return
    descriptor = getattr(cls, name, None)
    if descriptor is not None and hasattr(type(descriptor), "__set__"):
        object.__setattr__(self, name, value)
        return
    raise UndeclaredFieldError(
        f"Cannot set the attribute {name!r}: {cls.__name__} has no such field. Declared fields: "
        f"{list(spec.order)}. Declare it in the class (e.g. `{name}: torch.Tensor`) to store it."
    )


def delattr_(self: Any, name: str) -> None:
    cls = type(self)
    spec = spec_of(cls)
    if spec.frozen:
        raise FrozenTensorclassError(f"cannot delete {name!r}: {cls.__name__} is frozen.")
    if name in spec.names:
        raise AttributeError(
            f"fields of {cls.__name__} cannot be deleted; assign None to unset {name!r}."
        )
    object.__delattr__(self, name)


def getattr_fallback(self: Any, name: str) -> Any:
    """``__getattr__`` (only called for names the class lacks): the inner tensordict's attribute.

    Private names are returned as they are (the protocol core code uses); public methods come back
    wrapped like the forwarded ones.
    """
    td = self.__dict__.get("_tensordict")
    if td is None or name.startswith("__"):
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
    try:
        attr = getattr(td, name)
    except AttributeError:
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r} (fields: "
            f"{list(spec_of(type(self)).order)})."
        ) from None
    if name.startswith("_") or not callable(attr):
        return attr

    def method(*args: Any, **kwargs: Any) -> Any:
        return wrap_result(self, attr(*args, **kwargs))

    method.__name__ = name
    return method


def getitem(self: Any, index: Any) -> Any:
    """``instance[index]``: a str key reads that field (or entry); any other index selects along
    the batch dimensions and returns an instance of the same class."""
    cls = type(index)
    if cls is str:
        try:
            value = self._tensordict._tensordict[index]
        except (AttributeError, KeyError):
            return _getitem_slow(self, index)
        return value if type(value) is _Tensor else _unwrap_non_tensor(value)
    if cls is tuple and index and type(index[0]) is str:
        return self._tensordict[index]
    td = self._tensordict._index(index)
    out = object.__new__(type(self))
    d = out.__dict__
    d["_tensordict"] = td
    nt = self._non_tensordict
    d["_non_tensordict"] = nt.copy() if nt else {}
    return out


def _unwrap_non_tensor(value: Any) -> Any:
    if isinstance(value, NonTensorData):
        return value.data
    cls = type(value)
    if cls is NonTensorStack:
        return value._as_linked_list()
    return value


def _getitem_slow(self: Any, key: str) -> Any:
    """``instance[key]`` for a lazily stacked inner tensordict, an unset field or a missing key."""
    value = self._tensordict._get_str(key, _MISSING)
    if value is not _MISSING:
        return _unwrap_non_tensor(value)
    if key in spec_of(type(self)).names:
        return self._non_tensordict.get(key)
    return self._tensordict[key]  # raises the tensordict's missing-key error


def setitem(self: Any, index: Any, value: Any) -> None:
    """``instance[key] = value`` sets a field; ``instance[index] = other`` writes in place."""
    if type(index) is str or (type(index) is tuple and index and type(index[0]) is str):
        set_(self, index, value)
        return
    target_bs = plan_index(index, self._tensordict.batch_size).batch_size
    value_bs = getattr(value, "batch_size", None)
    if value_bs is not None and not broadcasts_to(tuple(value_bs), tuple(target_bs)):
        raise ShapeMismatchError(
            f"indexed destination TensorDict batch size is {target_bs} (batch_size = "
            f"{self._tensordict.batch_size}, index={index}), which differs from the source batch "
            f"size {value_bs}. Index the source the same way, or give a broadcastable one."
        )
    if _is_tc(value):
        if type(value) is not type(self) and set(spec_of(type(value)).names) != set(
            spec_of(type(self)).names
        ):
            raise ValueError(
                "__setitem__ is only allowed for same-class or compatible class (i.e. same "
                f"members) assignment: {type(self).__name__} has fields "
                f"{sorted(spec_of(type(self)).names)}, {type(value).__name__} has "
                f"{sorted(spec_of(type(value)).names)}."
            )
        value = value._tensordict
    self._tensordict[index] = value


def rxor(self: Any, other: Any) -> Any:
    """``other ^ instance`` (exclusive or is symmetric)."""
    return self.__xor__(other)


def ror(self: Any, other: Any) -> Any:
    """``other | instance`` (or is symmetric)."""
    return self.__or__(other)


def rand(self: Any, other: Any) -> Any:
    """``other & instance`` (and is symmetric)."""
    return self.__and__(other)


def get(self: Any, key: Any, default: Any = None, **kwargs: Any) -> Any:
    """The value of a field (as the attribute gives it) or of a nested entry, else ``default``.

    Keyword arguments (``as_list=``, ``as_padded_tensor=``...) go to the inner tensordict's
    ``get``; a name that is no field nor entry reads the attribute (``get("batch_size")``), as
    upstream.
    """
    if kwargs:
        return self._tensordict.get(key, default, **kwargs)
    if type(key) is str:
        if key in spec_of(type(self)).names:
            value = getattr(self, key)
            return default if value is None else value
        value = self._tensordict.get(key, _MISSING)
        if value is _MISSING:
            attr = getattr(type(self), key, None)
            return getattr(self, key) if isinstance(attr, property) else default
        return value
    if type(key) is tuple and len(key) == 1:
        return get(self, key[0], default)
    value = self._tensordict.get(key, _MISSING)
    return default if value is _MISSING else _unwrap_non_tensor(value)


def set_(self: Any, key: Any, item: Any, inplace: bool = False, **kwargs: Any) -> Any:
    """Set a field (``key`` a str) or an entry inside a collection field (a nested key).

    Raises:
        UndeclaredFieldError: the (first part of the) key is not a field.
    """
    path = (key,) if type(key) is str else key_path(key)
    spec = spec_of(type(self))
    if path[0] not in spec.names:
        raise UndeclaredFieldError(
            f"Cannot set the attribute {path[0]!r}: {type(self).__name__} has no such field. "
            "Declared "
            f"fields: {list(spec.order)}."
        )
    if len(path) > 1 or (inplace and self._tensordict.get(path[0], None) is not None):
        self._tensordict.set(path, item, inplace=inplace, **kwargs)
    else:
        set_field(self, path[0], item)
    return self


def get_at(self: Any, key: Any, index: Any, default: Any = None) -> Any:
    """``get(key)[index]``; ``default`` when there is no such field or entry (as upstream)."""
    value = get(self, key, _MISSING)
    if value is _MISSING or value is None:
        return default
    if isinstance(value, torch.Tensor) or hasattr(value, "batch_size"):
        return value[index]
    return value  # a python object is the same for every element


def grad(self: Any) -> Any:
    """The gradients of the tensor fields, as an instance of this class (None if none)."""
    result = self._tensordict.grad
    return None if result is None else wrap_result(self, result)


def saved_path(self: Any) -> str | None:
    """The directory this instance was memory-mapped to (its ``meta.json``), if any."""
    path = self._tensordict.saved_path
    if path is not None and os.path.basename(path) == "_tensordict":
        return os.path.dirname(path)
    return path  # type: ignore[no-any-return]


def _update_items(source: Any, kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    if source is None:
        items: list[tuple[str, Any]] = []
    elif _is_tc(source):
        # a stack of python objects is carried as it is (its getter would give the objects);
        # read from a dense inner tensordict's entries (a lazy one would stack them)
        store = getattr(source._tensordict, "_tensordict", None)
        store = store if isinstance(store, dict) else {}
        items = [
            (k, v if isinstance(v := store.get(k), NonTensorStack) else getattr(source, k))
            for k in spec_of(type(source)).order
        ]
        items = [(k, v) for k, v in items if v is not None]
    elif hasattr(source, "_own_items"):
        items = list(source._own_items())
    else:
        items = list(dict(source).items())
    return items + list(kwargs.items())


def update(
    self: Any,
    input_dict_or_td: Any = None,
    clone: bool = False,
    inplace: bool = False,
    *,
    keys_to_update: Any = None,
    non_blocking: bool = False,
    **kwargs: Any,
) -> Any:
    """Write the fields found in a tensorclass, tensordict or dict (and keyword arguments).

    A value for a field holding a tensorclass or tensordict updates it recursively; other
    values replace the field (in place with ``inplace``). Keyword arguments win.
    """
    options = {k: kwargs.pop(k) for k in ("update_batch_size", "is_leaf") if k in kwargs}
    if options:  # (upstream's options of update: the tensordict applies them)
        source = input_dict_or_td._tensordict if _is_tc(input_dict_or_td) else input_dict_or_td
        self._tensordict.update(
            source, clone, inplace, keys_to_update=keys_to_update, **options, **kwargs
        )
        return self
    wanted = None if keys_to_update is None else {key_path(k)[0] for k in keys_to_update}
    for key, value in _update_items(input_dict_or_td, kwargs):
        if wanted is not None and key not in wanted:
            continue
        current = get(self, key)
        nested = _is_tc(current) or hasattr(current, "_own_items")
        if isinstance(value, (NonTensorData, NonTensorStack)):
            nested = False  # python objects replace what the field held, as upstream
        if nested and (_is_tc(value) or isinstance(value, dict) or hasattr(value, "_own_items")):
            current.update(value, clone=clone, inplace=inplace)
            continue
        if clone and hasattr(value, "clone"):
            value = value.clone()
        if inplace and self._tensordict._get_str(key, _MISSING) is not _MISSING:
            # in place, as the tensordict writes it (locked and memory-mapped instances too)
            self._tensordict.update_({key: value._tensordict if _is_tc(value) else value})
        elif inplace and current is None:
            continue  # (as upstream: update_ writes only the fields the instance holds)
        else:
            set_(self, key, value)
    return self


def update_(self: Any, input_dict_or_td: Any = None, clone: bool = False, **kwargs: Any) -> Any:
    """``update`` in place: tensors are copied into the existing ones."""
    return update(self, input_dict_or_td, clone, inplace=True, **kwargs)


#: name -> implementation, attached by the builder
ACCESS: dict[str, Callable[..., Any]] = {
    "__setattr__": setattr_,
    "__delattr__": delattr_,
    "__getattr__": getattr_fallback,
    "__getitem__": getitem,
    "__setitem__": setitem,
    "__rxor__": rxor,
    "__rand__": rand,
    "__ror__": ror,
    "get": get,
    "get_at": get_at,
    "update": update,
    "update_": update_,
    "set": set_,
}
