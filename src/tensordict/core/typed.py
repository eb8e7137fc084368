"""``TypedTensorDict``: typed access to a tensordict whose keys are declared as annotations.

A subclass lists its fields the way a ``TypedDict`` does::

    class State(TypedTensorDict):
        obs: Tensor
        noise: NotRequired[Tensor]

and gets a keyword constructor that checks the fields (missing required ones, undeclared ones),
attribute access (``state.obs``), inheritance of fields, and every tensordict operation, whose
results stay instances of the class. An instance wraps a tensordict, its source (as upstream's):
a :class:`~tensordict.TensorDict` it builds, or any tensordict given to ``from_tensordict``,
read and written where it is. Class options come as subscripts
(``TypedTensorDict["frozen", "shadow"]``) or class keywords (``frozen=True``): ``frozen`` locks
instances, ``shadow`` allows a field named like a tensordict attribute.

On disk a typed tensordict is a plain tensordict (upstream writes the same layout), so
``TypedTensorDict`` directories load as :class:`~tensordict.TensorDict` everywhere.
"""

import contextlib
import inspect
import sys
import typing
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.setitem import stage_setitem
from tensordict.core.collection import OverSourceMixin, publish_as
from tensordict.core.dense import TensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import TypedFieldError

if sys.version_info >= (3, 11):
    from typing import NotRequired, Required, dataclass_transform
else:  # pragma: no cover - python 3.10
    from typing_extensions import NotRequired, Required, dataclass_transform

__all__ = ["TypedTensorDict"]

_OPTIONS = ("shadow", "frozen")
_IGNORED_OPTIONS = ("autocast", "nocast", "tensor_only")
_NO_DEFAULT: Any = object()
#: attributes a field may only hide with ``shadow`` (``data`` too, as upstream)
_RESERVED_EXTRA = frozenset({"data", "grad", "batch_size", "device", "names"})


def _annotation_flags(hint: Any) -> tuple[bool, bool]:
    """(is ClassVar, is NotRequired) for a resolved hint or an unresolved string."""
    if isinstance(hint, str):
        text = hint.replace("typing.", "").replace("typing_extensions.", "")
        return text.startswith("ClassVar"), text.startswith("NotRequired[")
    origin = typing.get_origin(hint)
    return origin is ClassVar, origin is NotRequired


def _own_hints(cls: type) -> dict[str, Any]:
    """The annotations ``cls`` itself declares, resolved where possible (else kept as strings)."""
    own = inspect.get_annotations(cls)
    if not own:
        return {}
    module = sys.modules.get(cls.__module__)
    globalns = dict(vars(module)) if module is not None else {}
    out: dict[str, Any] = {}
    for name, hint in own.items():
        if isinstance(hint, str):
            with contextlib.suppress(Exception):
                hint = eval(hint, globalns, {"NotRequired": NotRequired, "Required": Required})
        out[name] = hint
    return out


def _tensordict_attributes() -> frozenset[str]:
    return frozenset(dir(TensorDictBase)) | _RESERVED_EXTRA


def _field_property(name: str) -> property:
    def fget(self: TypedTensorDict) -> Any:
        value = self._get_str(name, _NO_DEFAULT)
        if value is _NO_DEFAULT:
            default = type(self)._field_defaults.get(name, _NO_DEFAULT)
            if default is not _NO_DEFAULT:
                return default
            raise AttributeError(
                f"{type(self).__name__}.{name} is declared but not set. Set it with "
                f"state.{name} = value (or state[{name!r}] = value)."
            )
        if isinstance(value, NonTensorData):
            return value.data
        if isinstance(value, NonTensorStack):
            return value.tolist()
        return value

    def fset(self: TypedTensorDict, value: Any) -> None:
        self.set(name, value)

    return property(fget, fset, None, f"The field ``{name}``.")


@dataclass_transform(kw_only_default=True)
class TypedTensorDict(OverSourceMixin, TensorDictBase):
    """A tensordict whose fields are declared as class annotations.

    Subclass it and annotate the fields; ``NotRequired[...]`` (or a default) makes a field
    optional. An instance holds its entries in another tensordict, its source: a
    :class:`~tensordict.TensorDict` made by the constructor, or whatever tensordict
    :meth:`from_tensordict` was given (a lazy stack, an HDF5 file, a Redis store, ...), which it
    reads and writes in place. Every operation works and returns the same class (over the
    result of the operation on the source).

    Args:
        batch_size: the batch size (default: none).
        device: the device of every tensor (default: each stays where it is).
        names: names of the batch dimensions.
        non_blocking: accepted for compatibility.
        lock: lock the instance after construction (always, for ``frozen`` classes).
        **fields: the value of each field.

    Raises:
        TypedFieldError: a required field is missing or a keyword is not a field.

    Examples:
        >>> import torch
        >>> from tensordict import TypedTensorDict
        >>> class State(TypedTensorDict):
        ...     obs: torch.Tensor
        ...     reward: torch.Tensor
        >>> s = State(obs=torch.zeros(4, 3), reward=torch.ones(4), batch_size=[4])
        >>> s.obs.shape, type(s[1:3]).__name__
        (torch.Size([4, 3]), 'State')
        >>> sorted(State.__required_keys__)
        ['obs', 'reward']
    """

    __slots__ = ("__dict__", "__weakref__", "_context", "_last_op", "_td_source")
    _context: list[tuple[str, bool] | None] | None
    _td_source: Any

    __expected_keys__: ClassVar[frozenset[str]] = frozenset()
    __required_keys__: ClassVar[frozenset[str]] = frozenset()
    __optional_keys__: ClassVar[frozenset[str]] = frozenset()
    _field_defaults: ClassVar[dict[str, Any]] = {}
    _field_order: ClassVar[tuple[str, ...]] = ()
    _shadow: ClassVar[bool] = False
    _frozen: ClassVar[bool] = False
    #: True on the option-carrying bases that ``TypedTensorDict[...]`` makes
    _options_base: ClassVar[bool] = True

    def __class_getitem__(cls, item: str | tuple[str, ...]) -> type:
        names = (item,) if isinstance(item, str) else tuple(item)
        for name in names:
            if name not in _OPTIONS + _IGNORED_OPTIONS:
                raise ValueError(
                    f"Unknown TypedTensorDict option {name!r}: the options are "
                    f"{list(_OPTIONS)}. Write e.g. TypedTensorDict['frozen']."
                )
        _warn_ignored([n for n in names if n in _IGNORED_OPTIONS])
        attrs: dict[str, Any] = {f"_{n}": True for n in names if n in _OPTIONS}
        label = f"TypedTensorDict[{', '.join(repr(n) for n in names)}]"
        attrs.update(_options_base=True, __module__=cls.__module__, __qualname__=label)
        return type(label, (cls,), attrs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        options = {k: kwargs.pop(k) for k in _OPTIONS + _IGNORED_OPTIONS if k in kwargs}
        super().__init_subclass__(**kwargs)
        _warn_ignored([k for k in options if k in _IGNORED_OPTIONS])
        for key in _OPTIONS:
            if key in options:
                setattr(cls, f"_{key}", bool(options[key]))
        if cls.__dict__.get("_options_base", False):
            return
        cls._options_base = False
        _collect_fields(cls)

    def __init__(
        self,
        source: Mapping[str, Any] | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        non_blocking: bool | None = None,
        lock: bool = False,
        **fields: Any,
    ) -> None:
        cls = type(self)
        given = {**(dict(source) if source is not None else {}), **fields}
        _check_fields(cls, given)
        values = {}
        for name in cls._field_order:
            value = given.get(name, cls._field_defaults.get(name))
            if value is not None:
                values[name] = value
        self._wrap(TensorDict(values, batch_size=batch_size, device=device, names=names))
        if lock or cls._frozen:
            self.lock_()

    def _wrap(self, td: Any) -> None:
        self._td_source = td
        self._consolidated = None
        self._lock_parents = None
        self._last_op = None
        self._context = None

    @classmethod
    def _over(cls, td: Any) -> Any:
        """An instance of ``cls`` whose source is ``td`` (no check)."""
        out = cls.__new__(cls)
        out._wrap(td)
        return out

    def _typed(self, result: Any) -> Any:
        """``result`` of an operation on the source, as this class when it is a tensordict."""
        if isinstance(result, TensorDictBase) and not isinstance(result, TypedTensorDict):
            return type(self)._over(result)
        return result

    @property
    def _source(self) -> TensorDictBase:
        """The tensordict holding the entries (read and written in place)."""
        return self._td_source

    @_source.setter
    def _source(self, td: TensorDictBase) -> None:
        """Point this instance at ``td`` (as upstream): it now reads and writes ``td``
        (``typed._source = typed._source.float()``)."""
        self._td_source = td._source if isinstance(td, TypedTensorDict) else td

    @classmethod
    def from_tensordict(cls, td: TensorDictBase, *, check: bool = True) -> Any:
        """Typed access to an existing tensordict, which stays where it is.

        Nothing is copied: reads and writes go to ``td`` (a
        :class:`~tensordict.TensorDict`, a lazy stack, an HDF5- or Redis-backed tensordict),
        so changes through either are seen by both.

        Args:
            td: the tensordict.
            check: refuse a tensordict that lacks a required field.

        Raises:
            TypedFieldError: ``check`` and a required field is missing.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, TypedTensorDict, lazy_stack
            >>> class State(TypedTensorDict):
            ...     obs: torch.Tensor
            >>> td = TensorDict(obs=torch.zeros(2), batch_size=[2])
            >>> State.from_tensordict(td).obs is td["obs"]
            True
            >>> stack = lazy_stack([TensorDict(obs=torch.zeros(3)) for _ in range(2)])
            >>> State.from_tensordict(stack).obs = torch.ones(2, 3)
            >>> stack[1]["obs"]
            tensor([1., 1., 1.])
        """
        if check:
            missing = sorted(cls.__required_keys__ - set(td.keys()))
            if missing:
                raise TypedFieldError(
                    f"{cls.__name__}.from_tensordict: missing required field(s): "
                    f"{', '.join(missing)}. Add them to the tensordict, or pass check=False to "
                    "fill them in later."
                )
        if getattr(type(td), "_is_tensorclass", False):
            td = td._tensordict  # type: ignore[attr-defined]
        return cls._over(td._source if isinstance(td, TypedTensorDict) else td)

    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        """A plain :class:`~tensordict.TensorDict` copy."""
        return self._td_source.to_tensordict(retain_none=retain_none)

    # ================================================================== state and entries
    # the source's (``OverSourceMixin``), but for these
    @OverSourceMixin.device.setter  # type: ignore[attr-defined]  # (mypy reads no property here)
    def device(self, value: Any) -> None:
        self._td_source.device = value

    def _check_unlockable(self) -> None:
        self._td_source._check_unlockable()

    def _lock_children(self) -> list[Any]:
        return self._td_source._lock_children()

    def _drop_storage_flags(self) -> None:
        self._td_source._drop_storage_flags()

    @property
    def _is_memmap(self) -> bool:
        return self.is_memmap()

    def is_shared(self) -> bool:
        return self._td_source.is_shared()

    def _set_str(self, key: str, value: Any, *, validated: bool, **kwargs: Any) -> None:
        self._td_source._set_str(key, value, validated=validated, **kwargs)

    def entry_class(self, key: Any) -> type:
        return self._td_source.entry_class(key)

    def _write_inplace(self, path: tuple[str, ...], existing: Any, item: Any) -> None:
        self._td_source._write_inplace(path, existing, item)

    def _stage_setitem_index(self, index: Any, value: Any) -> list[Any]:
        return stage_setitem(self._td_source, index, value)

    def set_at_(self, key: Any, value: Any, index: Any) -> Any:
        self._td_source.set_at_(key, value, index)
        return self

    # ================================================================== results: typed
    def _new_dense(
        self,
        source: dict[str, Any],
        batch_size: torch.Size,
        names: list[str | None] | None = None,
    ) -> Any:
        return type(self)._over(self._td_source._new_dense(source, batch_size, names))

    def _index(self, index: Any) -> Any:
        return self._typed(self._td_source._index(index))

    def _apply_leaves(self, fn: Any, *others: Any, **kwargs: Any) -> Any:
        result = self._td_source._apply_leaves(fn, *others, **kwargs)
        return self if kwargs.get("inplace") and result is self._td_source else self._typed(result)

    # the source's own versions of these (a lazy stack, a file or a server writes its way)
    def zero_(self) -> Any:
        """Write zeros into every tensor, where the source keeps it."""
        self._td_source.zero_()
        return self

    def fill_(self, key: Any, value: Any) -> Any:
        """Fill the entry ``key`` with ``value``, where the source keeps it."""
        self._td_source.fill_(key, value)
        return self

    def rename_key_(self, old_key: Any, new_key: Any, safe: bool = False) -> Any:
        """Rename an entry of the source."""
        self._td_source.rename_key_(old_key, new_key, safe=safe)
        return self

    def share_memory_(self) -> Any:
        """Move the source's tensors to shared memory."""
        self._td_source.share_memory_()
        return self

    def memmap_(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Any:
        """Move the source's tensors into memory-mapped files (this instance, now locked)."""
        self._td_source = self._td_source.memmap_(prefix, copy_existing=copy_existing, **kwargs)
        return self

    def memmap(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Any:
        """A memory-mapped copy of this class (see :meth:`TensorDict.memmap`)."""
        return self._typed(self._td_source.memmap(prefix, copy_existing=copy_existing, **kwargs))

    save = dumps = memmap

    def memmap_like(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Any:
        """Empty memory-mapped files shaped like the entries, as this class."""
        return self._typed(
            self._td_source.memmap_like(prefix, copy_existing=copy_existing, **kwargs)
        )

    def _inplace_result(self, result: Any, inplace: bool, what: str) -> Any:
        """With ``inplace``, the source takes ``result`` (``to``, ``reshape``, ... in place)."""
        if not inplace:
            return result
        inner = result._source if isinstance(result, TypedTensorDict) else result
        self._td_source = self._td_source._inplace_result(inner, True, what)
        return self

    def clone(self, recurse: bool = True, **kwargs: Any) -> Any:
        """A copy (of the source, as the source copies itself), of this class."""
        return self._typed(self._td_source.clone(recurse, **kwargs))

    def contiguous(self, *, inplace: bool = False, canonical: bool = False) -> Any:
        """A contiguous copy of this class (``inplace``: the source is made contiguous)."""
        result = self._td_source.contiguous(inplace=inplace, canonical=canonical)
        return self if inplace else self._typed(result)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (type(self)._over, (self._td_source,))


def _warn_ignored(options: list[str]) -> None:
    if options:
        warnings.warn(
            f"TypedTensorDict ignores the option(s) {options}: they only apply to TensorClass "
            "(they have no effect here and will be refused in a later release).",
            DeprecationWarning,
            stacklevel=3,
        )


def _collect_fields(cls: type[TypedTensorDict]) -> None:
    """Gather the fields of ``cls`` and its bases; check names; add the field properties."""
    order: list[str] = list(cls._field_order)
    required = set(cls.__required_keys__)
    optional = set(cls.__optional_keys__)
    defaults = dict(cls._field_defaults)
    reserved = _tensordict_attributes()
    for name, hint in _own_hints(cls).items():
        is_classvar, not_required = _annotation_flags(hint)
        if is_classvar:
            continue
        if name in reserved and not cls._shadow:
            raise AttributeError(
                f"Field {name!r} shadows a TensorDictBase attribute. Use "
                "TypedTensorDict['shadow'] to allow this (the field then hides it)."
            )
        if name not in order:
            order.append(name)
        default = cls.__dict__.get(name, _NO_DEFAULT)
        if default is not _NO_DEFAULT:
            defaults[name] = default
        if not_required or default is not _NO_DEFAULT:
            optional.add(name)
            required.discard(name)
        else:
            required.add(name)
            optional.discard(name)
        setattr(cls, name, _field_property(name))
    cls._field_order = tuple(order)
    cls._field_defaults = defaults
    cls.__required_keys__ = frozenset(required)
    cls.__optional_keys__ = frozenset(optional)
    cls.__expected_keys__ = frozenset(order)


def _check_fields(cls: type[TypedTensorDict], given: Mapping[str, Any]) -> None:
    unexpected = [k for k in given if k not in cls.__expected_keys__]
    if unexpected:
        raise TypedFieldError(
            f"{cls.__name__}() got unexpected field(s): {', '.join(unexpected)}. Declared "
            f"fields: {list(cls._field_order)}; declare the field in the class to store it."
        )
    missing = [k for k in cls._field_order if k in cls.__required_keys__ and k not in given]
    if missing:
        raise TypedFieldError(
            f"{cls.__name__}() missing required field(s): {', '.join(missing)}. Pass them as "
            "keywords, or declare them NotRequired[...] (or with a default) in the class."
        )


__test__ = publish_as("tensordict.typedtensordict", TypedTensorDict)  # upstream's path; examples
