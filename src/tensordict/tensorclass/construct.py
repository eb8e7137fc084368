"""Making tensorclass instances and turning them into other things.

Every instance is built by :func:`new_instance`: ``object.__new__`` plus the two stores,
``_tensordict`` (the inner tensordict) and ``_non_tensordict`` (fields stored outside it, normally
the ``None`` ones). Results of indexing and of forwarded tensordict methods wrap an inner
tensordict that is already valid, so they go through :func:`new_instance` without any check.
The constructor (:func:`make_init`) binds the arguments to the fields, then stores each field with
the class's rules (see :mod:`tensordict.tensorclass.fields`).
"""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.errors import (
    MemmapFormatError,
    TensorclassArgumentError,
    UndeclaredFieldError,
)
from tensordict.memmap import io
from tensordict.tensorclass.fields import ClassSpec, default_of, has_default

__all__ = [
    "from_dict",
    "from_tensordict",
    "make_init",
    "new_instance",
    "rebuild",
    "to_dict",
    "to_tensordict",
    "wrap_user_init",
]

#: constructor keywords that are not fields
CONTROL_KEYWORDS = ("batch_size", "device", "names", "non_blocking", "lock")
_INITIALISING = "_tensorclass_initialising"


def spec_of(cls: type) -> ClassSpec:
    return cls.__tensorclass_spec__  # type: ignore[attr-defined, no-any-return]


def _own_spec(self: Any, owner: type) -> ClassSpec:
    """The spec of ``owner``, the class whose constructor runs on ``self``.

    Read through ``type(self)`` rather than kept in the constructor's closure: torch.compile
    cannot hold a ``ClassSpec`` found in the closure of a method of an object built inside the
    compiled function, but reads it as an attribute of the object's class.
    """
    cls = type(self)
    spec = spec_of(cls)
    if spec.cls is owner:
        return spec
    for klass in cls.__mro__:  # a subclass calling its tensorclass parent's constructor
        if klass is owner:
            return spec_of(klass)
    return spec


def new_instance(cls: type, td: Any, non_tensordict: Mapping[str, Any] | None) -> Any:
    """An instance of ``cls`` around ``td`` (no check; ``non_tensordict`` is copied)."""
    self: Any = object.__new__(cls)
    d = self.__dict__
    d["_tensordict"] = td
    d["_non_tensordict"] = dict(non_tensordict) if non_tensordict else {}
    return self


def _tensordict_protocol(
    cls: type, td: Any, non_tensordict: Mapping[str, Any] | None = None, safe: bool = True
) -> Any:
    """``cls._from_tensordict(td, non_tensordict)``: the hook memmap loading calls.

    Entries of ``non_tensordict`` that are not fields of ``cls`` are dropped; fields found in
    neither store are unset (``None``), as upstream.
    """
    spec = spec_of(cls)
    given = non_tensordict or {}
    present = set(td._own_keys())
    kept = {k: given.get(k) for k in spec.order if k not in present}
    out = new_instance(cls, td, kept)
    post_init = getattr(cls, "__post_init__", None)
    if post_init is not None and not getattr(cls, "_skip_post_init_on_rebuild", False):
        post_init(out)  # as upstream: a rebuilt instance is checked like a constructed one
    return out


def _setup(self: Any, batch_size: Any, device: Any) -> TensorDict:
    td = TensorDict(None, batch_size=batch_size, device=device)
    d = self.__dict__
    d["_tensordict"] = td
    d["_non_tensordict"] = {}
    return td


def _finish(self: Any, td: TensorDict, names: Any, lock: bool | None, spec: ClassSpec) -> None:
    if names is not None:
        td.names = names
    if lock if lock is not None else spec.frozen:
        td.lock_()


def bind_arguments(
    spec: ClassSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Map constructor arguments to fields, defaults filled in, in field order.

    Raises:
        TensorclassArgumentError: too many positional arguments, an unknown keyword, a field
            given twice or a required field missing.
    """
    name = spec.cls.__name__
    if len(args) > len(spec.positional):
        raise TensorclassArgumentError(
            f"{name}.__init__() takes {len(spec.positional) + 1} positional arguments but "
            f"{len(args) + 1} were given (its positional fields are {list(spec.positional)}; "
            "pass batch_size=, device=, names= and lock= by keyword)."
        )
    given = dict(zip(spec.positional, args))
    for key, value in kwargs.items():
        if key not in spec.init_names:
            raise TensorclassArgumentError(
                f"{name}() got an unexpected keyword argument {key!r}. Its fields are "
                f"{sorted(spec.init_names)}; the other keywords are {list(CONTROL_KEYWORDS)}."
            )
        if key in given:
            raise TensorclassArgumentError(f"{name}() got multiple values for field {key!r}.")
        given[key] = value
    missing = [n for n in spec.required if n not in given]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        listed = ", ".join(repr(m) for m in missing)
        raise TensorclassArgumentError(
            f"{name}.__init__() missing {len(missing)} required positional argument{plural}: "
            f"{listed}. Give them (None is accepted for an unset field), or declare a default "
            "in the class."
        )
    out: dict[str, Any] = {}
    for f in spec.fields:
        if f.name in given:
            out[f.name] = given[f.name]
        elif has_default(f):
            out[f.name] = default_of(f)
    return out


def make_init(spec: ClassSpec, set_field: Callable[[Any, str, Any], None]) -> Callable[..., None]:
    """The generated ``__init__``: fields (positional or keyword) plus the control keywords."""
    owner = spec.cls
    post_init = getattr(owner, "__post_init__", None)

    def __init__(
        self: Any,
        *args: Any,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        non_blocking: bool | None = None,
        lock: bool | None = None,
        **kwargs: Any,
    ) -> None:
        spec = _own_spec(self, owner)
        if spec.shadowed_controls:  # a field named like a keyword takes the keyword
            controls: dict[str, Any] = {"batch_size": batch_size, "device": device}
            controls.update(names=names, non_blocking=non_blocking, lock=lock)
            for key in spec.shadowed_controls:
                if controls[key] is not None:
                    kwargs[key] = controls[key]
                controls[key] = None
            batch_size, device = controls["batch_size"], controls["device"]
            names, lock = controls["names"], controls["lock"]
        values = bind_arguments(spec, args, kwargs)
        td = _setup(self, batch_size, device)
        if spec.user_setattr:  # a user-written __setattr__ sees the constructor's assignments
            d = self.__dict__
            d[_INITIALISING] = True
            try:
                for name, value in values.items():
                    setattr(self, name, value)
            finally:
                d.pop(_INITIALISING, None)
        else:
            for name, value in values.items():
                set_field(self, name, value)
        if post_init is not None:
            post_init(self)
        _finish(self, td, names, lock, spec)

    __init__.__signature__ = _signature(spec)  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{spec.cls.__qualname__}.__init__"
    __init__.__doc__ = (
        f"Build an instance of {spec.cls.__name__} from its fields and control keywords."
    )
    return __init__


def _signature(spec: ClassSpec) -> inspect.Signature:
    param = inspect.Parameter
    params = [param("self", param.POSITIONAL_OR_KEYWORD)]
    for f in spec.fields:
        if f.init:
            kind = param.KEYWORD_ONLY if f.kw_only else param.POSITIONAL_OR_KEYWORD
            params.append(param(f.name, kind, default=_default_shown(f), annotation=f.type))
    params.sort(key=lambda p: p.kind)
    for key in ("batch_size", "device", "names"):  # (non_blocking and lock are accepted too)
        if key not in spec.names:
            params.append(param(key, param.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


def _default_shown(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory
    return inspect.Parameter.empty


def wrap_user_init(user_init: Callable[..., None], spec: ClassSpec) -> Callable[..., None]:
    """A user-written ``__init__``, with the control keywords handled around it (as upstream)."""
    owner = spec.cls

    @functools.wraps(user_init)
    def __init__(
        self: Any,
        *args: Any,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        non_blocking: bool | None = None,
        lock: bool | None = None,
        **kwargs: Any,
    ) -> None:
        td = _setup(self, batch_size, device)
        d = self.__dict__
        d[_INITIALISING] = True
        try:
            user_init(self, *args, **kwargs)
        finally:
            d.pop(_INITIALISING, None)
        _finish(self, td, names, lock, _own_spec(self, owner))

    __init__.__tensorclass_user_init__ = user_init  # type: ignore[attr-defined]
    return __init__


def initialising(self: Any) -> bool:
    """Whether a user-written ``__init__`` of this instance is running (frozen classes allow
    assignments then)."""
    return _INITIALISING in self.__dict__


# ====================================================================== conversions
def from_tensordict(
    cls: type, tensordict: Any, non_tensordict: Mapping[str, Any] | None = None, safe: bool = True
) -> Any:
    """An instance of ``cls`` holding ``tensordict`` (shared, not copied).

    Nested tensordicts of fields annotated with a tensorclass become that tensorclass.

    Raises:
        TypeError: ``tensordict`` is not a tensordict.
        UndeclaredFieldError: with ``safe``, an entry that is not a field of ``cls``.
    """
    spec = spec_of(cls)
    if not isinstance(tensordict, TensorDictBase):
        raise TypeError(
            f"{cls.__name__}.from_tensordict expects a TensorDict, got {type(tensordict).__name__}."
        )
    extra = [k for k in tensordict._own_keys() if k not in spec.names]
    if safe and extra:
        raise UndeclaredFieldError(
            f"cannot make a {cls.__name__} from a tensordict with entries {extra}, which are not "
            f"fields (fields: {list(spec.order)}). Select the fields first: "
            f"td.select(*{list(spec.order)!r}, strict=False)."
        )
    for name in spec.order:
        sub = spec.tensorclass_of(name)
        if sub is None:
            continue
        value = tensordict.get(name, None)
        if isinstance(value, TensorDictBase):
            tensordict._set_str(name, from_tensordict(sub, value), validated=True)
    return _tensordict_protocol(cls, tensordict, non_tensordict)


def to_tensordict(self: Any, *, retain_none: bool | None = None) -> TensorDict:
    """A plain :class:`~tensordict.TensorDict` copy: nested tensorclasses become tensordicts,
    and with ``retain_none=True`` a field that holds None becomes a ``NonTensorData`` of None
    (as upstream; otherwise it is left out)."""
    from tensordict.core.nontensor.data import NonTensorData

    out: TensorDict = self._tensordict.to_tensordict(retain_none=retain_none)
    if retain_none:
        for name, value in self._non_tensordict.items():
            if value is None:
                none = NonTensorData(None, batch_size=self.batch_size, device=self.device)
                out._set_str(name, none, validated=True)
    return out


def to_dict(
    self: Any, *, retain_none: bool = True, convert_tensors: bool = False
) -> dict[str, Any]:
    """A nested dict of the fields (``None`` fields included unless ``retain_none=False``)."""
    out: dict[str, Any] = self._tensordict.to_dict(convert_tensors=convert_tensors)
    if retain_none:
        for name, value in self._non_tensordict.items():
            out.setdefault(name, value)
    return out


def from_dict(
    cls: type,
    input_dict: Mapping[str, Any],
    batch_size: Sequence[int] | None = None,
    device: Any = None,
    batch_dims: int | None = None,
    *,
    auto_batch_size: bool | None = None,
    names: Sequence[str | None] | None = None,
) -> Any:
    """Build from a (nested) dict of field values, as :meth:`to_dict` gives.

    Dicts under fields annotated with a tensorclass become that tensorclass. Without
    ``batch_size``, ``auto_batch_size=True`` (or ``batch_dims``) infers it from the leaves.
    """
    if batch_size is not None and batch_dims is not None:
        raise ValueError("give batch_size or batch_dims, not both.")
    spec = spec_of(cls)
    infer = batch_size is None and (bool(auto_batch_size) or batch_dims is not None)
    kwargs: dict[str, Any] = {}
    for key, value in input_dict.items():
        sub = spec.tensorclass_of(key) if key in spec.names else None
        if sub is not None and isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
            value = from_dict(
                sub, value, batch_size, device, auto_batch_size=infer or auto_batch_size
            )
        elif isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
            bs = batch_size if batch_size is not None else []
            value = TensorDict(dict(value), batch_size=bs, device=device)
        kwargs[key] = value
    out = cls(**kwargs, batch_size=batch_size, device=device)
    if infer:
        out._tensordict.auto_batch_size_(batch_dims)
    if names is not None:
        out._tensordict.names = names
    return out


def load_memmap(
    cls: type, prefix: Any, device: Any = None, *, allow_pickle: bool | None = None, **kwargs: Any
) -> Any:
    """Load an instance saved with ``memmap_``/``memmap``/``save``.

    Raises:
        MemmapFormatError: the directory holds something else than a ``cls``.
    """
    out = io.load_memmap(prefix, device=device, allow_pickle=allow_pickle, **kwargs)
    if not isinstance(out, cls):
        raise MemmapFormatError(
            f"{prefix} holds a {type(out).__name__}, not a {cls.__name__}. Load it with "
            "TensorDict.load_memmap(prefix), which returns whatever was saved."
        )
    return out


# ====================================================================== pickling and copies
def rebuild(cls: type, td: Any, non_tensordict: dict[str, Any]) -> Any:
    """Module-level rebuild function used by pickle."""
    return new_instance(cls, td, non_tensordict)


def reduce_ex(self: Any, protocol: Any) -> tuple[Any, ...]:
    """Pickle as upstream does: ``cls.__new__(cls)``, then :func:`setstate` with the inner
    tensordict and the non-tensor fields (so pickles load with either package); the inner
    tensordict pickles itself, so a memory-mapped instance travels as file references."""
    state = {"tensordict": self._tensordict, "non_tensordict": dict(self._non_tensordict)}
    return (copyreg.__newobj__, (type(self),), state)  # type: ignore[attr-defined]


def setstate(self: Any, state: Mapping[str, Any]) -> None:
    """``__setstate__``: the state :func:`reduce_ex` (or upstream's pickling) wrote."""
    non_tensordict = state.get("non_tensordict")
    d = self.__dict__
    d["_tensordict"] = state["tensordict"]
    d["_non_tensordict"] = dict(non_tensordict) if non_tensordict else {}


def copy_(self: Any) -> Any:
    """``copy.copy``: a new instance sharing the tensors (like ``clone(recurse=False)``)."""
    return new_instance(type(self), self._tensordict.clone(recurse=False), self._non_tensordict)


def deepcopy_(self: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy``: a full copy (like ``clone()``)."""
    return new_instance(
        type(self), self._tensordict.clone(), copy.deepcopy(self._non_tensordict, memo)
    )
