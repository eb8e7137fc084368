"""The fields of a tensorclass, and how a value given for a field is stored.

A tensorclass instance keeps its data in two places: the inner :class:`~tensordict.TensorDict`
(``_tensordict``) and a small dict of fields whose value is ``None`` (``_non_tensordict``), as
upstream does. Which one, and in what form, depends on the class options:

* **default**: ``None`` goes to ``_non_tensordict``; tensors, tensordicts, tensorclasses and
  non-tensor data are stored as they are; a dict stays one python object (``from_dict`` builds
  nested tensordicts); any other value is stored the way :class:`~tensordict.TensorDict` stores
  it (numbers and numeric arrays become tensors, other python objects become
  :class:`~tensordict.NonTensorData`).
* **nocast**: numbers and numpy arrays are never turned into tensors: they are stored as
  :class:`~tensordict.NonTensorData` unchanged (``1`` stays the python int ``1``). Other values
  follow the default rules. As upstream, the annotation is not checked.
* **autocast**: the annotation decides. A value that is already an instance is kept (python
  objects as non-tensor data); otherwise a ``torch.Tensor`` annotation casts with
  ``torch.as_tensor``, a tensordict or tensorclass annotation builds one from a dict, and any
  other class ``T`` casts with ``T(value)`` (``np.asarray`` for arrays), stored as non-tensor data:
  ``x: int`` given ``torch.tensor(1.0)`` stores the python int ``1``. A failed cast raises
  :class:`~tensordict.errors.FieldTypeError`. Annotations that name no class fall back to the
  default rules.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import FieldTypeError

__all__ = ["ClassSpec", "classes_of", "store_value"]

_NONE_TYPE = type(None)
_UNRESOLVED: Any = object()


def is_tensorclass_type(cls: Any) -> bool:
    return isinstance(cls, type) and bool(getattr(cls, "_is_tensorclass", False))


def is_collection_type(cls: type) -> bool:
    """Whether instances of ``cls`` are stored in the inner tensordict as they are."""
    return issubclass(cls, (torch.Tensor, TensorDictBase)) or is_tensorclass_type(cls)


def stored_as_is(value: Any) -> bool:
    """Tensors, tensor collections and non-tensor data: stored without conversion in every mode."""
    return (
        isinstance(value, (torch.Tensor, TensorDictBase, NonTensorData, NonTensorStack))
        or getattr(type(value), "_is_tensorclass", False) is True
    )


def classes_of(hint: Any) -> tuple[type, ...] | None:
    """The classes an annotation admits, or None when it names no class (anything goes).

    Examples:
        >>> classes_of(typing.Optional[int])
        (<class 'int'>, <class 'NoneType'>)
        >>> classes_of(list[int]), classes_of(typing.Any)
        ((<class 'list'>,), None)
    """
    if hint is None or hint is _NONE_TYPE:
        return (_NONE_TYPE,)
    supertype = getattr(hint, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return classes_of(supertype)
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return classes_of(typing.get_args(hint)[0])
    if origin is typing.Union or origin is types.UnionType:
        out: list[type] = []
        for arg in typing.get_args(hint):
            found = classes_of(arg)
            if found is None:
                return None
            out.extend(found)
        return tuple(out)
    if origin is not None:
        return (origin,) if isinstance(origin, type) else None
    if isinstance(hint, type) and hint is not typing.Any:
        return (hint,)
    return None


def _widen(classes: tuple[type, ...]) -> tuple[type, ...]:
    """PEP 484's numeric tower: an int is a valid float, an int or float a valid complex."""
    extra: list[type] = []
    if float in classes:
        extra.append(int)
    if complex in classes:
        extra.extend((int, float))
    return classes + tuple(extra)


class ClassSpec:
    """What ``@tensorclass`` collected about a class: its fields, their order and the options."""

    def __init__(
        self,
        cls: type,
        fields: tuple[dataclasses.Field[Any], ...],
        *,
        autocast: bool,
        nocast: bool,
        frozen: bool,
        shadow: bool,
        tensor_only: bool = False,
    ) -> None:
        self.cls = cls
        self.fields = fields
        self.order = tuple(f.name for f in fields)
        self.names = frozenset(self.order)
        init = [f for f in fields if f.init]
        self.init_names = frozenset(f.name for f in init)
        self.positional = tuple(f.name for f in init if not f.kw_only)
        self.required = tuple(f.name for f in init if not has_default(f))
        self.autocast = autocast
        self.nocast = nocast
        self.frozen = frozen
        self.shadow = shadow
        self.tensor_only = tensor_only
        #: constructor keywords that are also field names (``shadow=True`` classes)
        self.shadowed_controls = tuple(
            k for k in ("batch_size", "device", "names", "non_blocking", "lock") if k in self.names
        )
        #: whether the class (or a user base) writes its own ``__setattr__``
        self.user_setattr = False
        self._hints: dict[str, Any] | None = None

    def hint(self, name: str) -> Any:
        """The resolved annotation of a field (``_UNRESOLVED`` if it cannot be resolved)."""
        if self._hints is None:
            self._hints = resolve_hints(self.cls, self.fields)
        return self._hints.get(name, _UNRESOLVED)

    def classes(self, name: str) -> tuple[type, ...] | None:
        hint = self.hint(name)
        return None if hint is _UNRESOLVED else classes_of(hint)

    def tensorclass_of(self, name: str) -> type | None:
        """The tensorclass a field is annotated with (``Optional`` allowed), if any."""
        found = [c for c in self.classes(name) or () if c is not _NONE_TYPE]
        return found[0] if len(found) == 1 and is_tensorclass_type(found[0]) else None


def has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def default_of(f: dataclasses.Field[Any]) -> Any:
    """The default value of a field (a fresh one from its ``default_factory``)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def resolve_hints(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> dict[str, Any]:
    """Resolve string annotations once; a hint that does not resolve is left out (means Any).

    Names resolve in the defining module, never in the class namespace: there ``int`` or
    ``float`` would be the forwarded dtype methods.
    """
    localns = {cls.__name__: cls}
    try:
        return typing.get_type_hints(cls, localns=localns)
    except Exception:
        pass
    module = sys.modules.get(cls.__module__)
    globalns = dict(vars(module)) if module is not None else {}
    out: dict[str, Any] = {}
    for f in fields:
        hint = f.type
        if isinstance(hint, str):
            try:
                hint = eval(hint, globalns, localns)
            except Exception:
                continue
        out[f.name] = hint
    return out


def store_value(spec: ClassSpec, name: str, value: Any, batch_size: torch.Size, device: Any) -> Any:
    """What to store in the inner tensordict for ``name`` (None: the field is unset).

    Raises:
        FieldTypeError: under ``nocast``, a value of the wrong type; under ``autocast``, a value
            the annotation cannot cast.
    """
    if value is None:
        return None
    if spec.tensor_only:
        return _tensor_only(spec, name, value)
    if spec.nocast:
        return _nocast(spec, name, value)
    if spec.autocast:
        return _autocast(spec, name, value, batch_size, device)
    return _default(value)


def _default(value: Any) -> Any:
    """The default rule: as a TensorDict stores it, except that a mapping stays one python
    object (upstream keeps a dict given to a field as it is)."""
    if isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
        return NonTensorData(value)
    return value


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _nocast(spec: ClassSpec, name: str, value: Any) -> Any:
    """Numbers and numpy arrays stay python objects; everything else follows the default rules."""
    if isinstance(value, (bool, int, float, complex, np.ndarray, np.generic)):
        return NonTensorData(value)
    return value


def _tensor_only(spec: ClassSpec, name: str, value: Any) -> Any:
    declared = spec.classes(name) or ()
    if any(isinstance(c, type) and issubclass(c, NonTensorData) for c in declared):
        return value if isinstance(value, NonTensorData) else NonTensorData(value)
    if isinstance(value, (torch.Tensor, TensorDictBase, Mapping)) or is_tensorclass_type(
        type(value)
    ):
        return value  # (a dict becomes a TensorDict when stored)
    if isinstance(value, (bool, int, float, complex, np.ndarray, np.generic, list, tuple)):
        try:
            return torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as err:
            reason = f"it does not convert to a tensor ({err})"
    else:
        reason = "python objects are not stored"
    raise FieldTypeError(
        f"{spec.cls.__name__}.{name}: got {type(value).__name__} {_describe(value)}, but the class "
        f"is tensor_only and {reason}: every field holds a tensor, a tensordict or a tensorclass "
        "(numbers, lists of numbers and numpy arrays are converted). Convert the value, or drop "
        "tensor_only to store python objects as NonTensorData."
    )


def _autocast(spec: ClassSpec, name: str, value: Any, batch_size: torch.Size, device: Any) -> Any:
    classes = spec.classes(name)
    if classes is None or len(classes) != 1 or classes[0] is _NONE_TYPE:
        return _default(value)  # as upstream, unions (Optional too) are not cast
    target = classes[0]
    if isinstance(value, NonTensorData):
        value = value.data
    if isinstance(value, target):  # exactly: autocast turns an int into a declared float
        return value if stored_as_is(value) else NonTensorData(value)
    try:
        return _cast(target, value, batch_size, device)
    except FieldTypeError:
        raise
    except Exception as err:
        raise FieldTypeError(
            f"{spec.cls.__name__}.{name} is declared as {target.__name__} and autocast=True, but "
            f"{type(value).__name__} {_describe(value)} cannot be cast to it: {err}"
        ) from err


def _cast(target: type, value: Any, batch_size: torch.Size, device: Any) -> Any:
    if is_collection_type(target):
        plain_mapping = isinstance(value, Mapping) and not isinstance(value, TensorDictBase)
        if plain_mapping and not issubclass(target, torch.Tensor):
            if is_tensorclass_type(target):
                fields = dict.fromkeys(target.__tensorclass_spec__.required)  # type: ignore[attr-defined]
                return target.from_dict(  # type: ignore[attr-defined]
                    {**fields, **value}, batch_size=batch_size, device=device
                )
            return TensorDict(dict(value), batch_size=batch_size, device=device)
        if issubclass(target, torch.Tensor):
            return torch.as_tensor(value, device=device)
        return value
    caster: Any = np.asarray if target is np.ndarray else target
    return NonTensorData(caster(value))
