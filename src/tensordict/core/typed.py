"""``TypedTensorDict``: a :class:`~tensordict.TensorDict` whose keys are declared as annotations.

A subclass lists its fields the way a ``TypedDict`` does::

    class State(TypedTensorDict):
        obs: Tensor
        noise: NotRequired[Tensor]

and gets a keyword constructor that checks the fields (missing required ones, undeclared ones),
attribute access (``state.obs``), inheritance of fields, and every tensordict operation, whose
results stay instances of the class. Class options come as subscripts
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
from tensordict.core.collection import publish_as
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
    return frozenset(dir(TensorDict)) | _RESERVED_EXTRA


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
class TypedTensorDict(TensorDict):
    """A tensordict whose fields are declared as class annotations.

    Subclass it and annotate the fields; ``NotRequired[...]`` (or a default) makes a field
    optional. Instances are :class:`~tensordict.TensorDict` objects: every operation works and
    returns the same class.

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

    __slots__ = ("__dict__", "_typed_source")

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
        attrs.update(_options_base=True, __module__=__name__, __qualname__=label)
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
        self._typed_source: TensorDictBase | None = None
        super().__init__(values, batch_size=batch_size, device=device, names=names)
        if lock or cls._frozen:
            self.lock_()

    @property
    def _source(self) -> TensorDictBase:
        """The tensordict this instance was made from by :meth:`from_tensordict` (else itself)."""
        source = getattr(self, "_typed_source", None)
        return self if source is None else source

    @_source.setter
    def _source(self, td: TensorDictBase) -> None:
        """Point this instance at ``td`` (as upstream): it now shares ``td``'s entries, batch
        size, device and names (``typed._source = typed._source.float()``)."""
        dense: Any = td if type(td) is TensorDict or isinstance(td, TypedTensorDict) else None
        if dense is None:
            dense = td.to_tensordict()  # type: ignore[attr-defined]
        self._tensordict = dense._tensordict
        self._batch_size = dense._batch_size
        self._device = dense._device
        self._names = dense._names
        self._typed_source = None if td is self else td

    @classmethod
    def from_tensordict(cls, td: TensorDictBase, *, check: bool = True) -> Any:
        """Typed access to an existing tensordict.

        A :class:`~tensordict.TensorDict` is wrapped without copying: the instance shares its
        entries, so writes through either are seen by both. Other tensordicts (lazy stacks, ...)
        are read into a dense tensordict first.

        Args:
            td: the tensordict.
            check: refuse a tensordict that lacks a required field.

        Raises:
            TypedFieldError: ``check`` and a required field is missing.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, TypedTensorDict
            >>> class State(TypedTensorDict):
            ...     obs: torch.Tensor
            >>> td = TensorDict(obs=torch.zeros(2), batch_size=[2])
            >>> State.from_tensordict(td).obs is td["obs"]
            True
        """
        if check:
            missing = sorted(cls.__required_keys__ - set(td.keys()))
            if missing:
                raise TypedFieldError(
                    f"{cls.__name__}.from_tensordict: missing required field(s): "
                    f"{', '.join(missing)}. Add them to the tensordict, or pass check=False to "
                    "fill them in later."
                )
        dense = td if type(td) is TensorDict or isinstance(td, TypedTensorDict) else None
        if dense is None:
            dense = td.to_tensordict()
        out = cls._adopt(dense)  # type: ignore[arg-type]
        out._typed_source = td
        return out

    @classmethod
    def _adopt(cls, td: TensorDict) -> Any:
        """An instance of ``cls`` sharing the entries and state of the dense ``td``."""
        out = cls._new_unsafe(
            td._tensordict,
            td._batch_size,
            td._device,
            td._names,
            lock=td._is_locked,
            is_memmap=td._is_memmap,
        )
        out._memmap_prefix = td._memmap_prefix
        return out

    @classmethod
    def _new_unsafe(cls, *args: Any, **kwargs: Any) -> Any:
        out: Any = super()._new_unsafe(*args, **kwargs)
        out._typed_source = None
        return out

    def _new_dense(
        self,
        source: dict[str, Any],
        batch_size: torch.Size,
        names: list[str | None] | None = None,
    ) -> Any:
        return type(self)._new_unsafe(source, batch_size, self._device, names)

    def _index_planned(self, plan: Any) -> Any:
        result = super()._index_planned(plan)
        return type(self)._adopt(result)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """A plain :class:`~tensordict.TensorDict` copy."""
        out = super().to_tensordict()
        if isinstance(out, TypedTensorDict):
            return TensorDict._new_unsafe(out._tensordict, out._batch_size, out._device, out._names)
        return out  # type: ignore[no-any-return]

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (_rebuild, (type(self), super().__reduce_ex__(protocol)))


def _rebuild(cls: type[TypedTensorDict], plain: tuple[Any, ...]) -> TypedTensorDict:
    fn, args = plain[0], plain[1]
    return cls._adopt(fn(*args))  # type: ignore[no-any-return]


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
