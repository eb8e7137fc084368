"""``@tensorclass``: dataclasses whose tensor data lives in a :class:`~tensordict.TensorDict`.

The decorator hands the class to :class:`ClassBuilder`, which works like attrs' class builder:

1. **collect** the fields with the standard dataclass machinery (annotations, defaults,
   ``field(default_factory=...)``, ``kw_only``, fields inherited from other tensorclasses), with
   ``__init__``/``__repr__``/``__eq__`` generation switched off;
2. **check** the field names: the constructor keywords and the storage attributes are reserved,
   and a field may not hide a tensordict method unless ``shadow=True``;
3. **add** a property per field, the written methods (constructor, item and attribute access,
   ``repr``, pickling, conversions) and the forwarded tensordict API
   (:mod:`tensordict.tensorclass.forwarding`). Nothing the class or one of its user-written bases
   defines is replaced;
4. **finish**: the flags upstream code reads (``_is_tensorclass``, ``_autocast``, ``_nocast``,
   ``_frozen``, ``_shadow``), the field spec, and registration so that
   ``TensorDict.load_memmap`` finds the class by the ``_type`` string of its ``meta.json``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, overload

from tensordict.core.dense import TensorDict
from tensordict.core.nontensor.data import NonTensorData
from tensordict.errors import TensorclassDefinitionError
from tensordict.memmap.format import register_class
from tensordict.tensorclass import access, construct, forwarding, state
from tensordict.tensorclass.fields import ClassSpec, has_default
from tensordict.tensorclass.printing import tensorclass_repr

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - python 3.10
    from typing_extensions import dataclass_transform

__all__ = ["ClassBuilder", "is_tensorclass", "tensorclass"]

_T = TypeVar("_T")
_MISSING: Any = object()

#: field names that cannot be used: constructor keywords, the instance's two stores, class flags
RESERVED = frozenset(construct.CONTROL_KEYWORDS) | {
    "_tensordict",
    "_non_tensordict",
    "_is_tensorclass",
    "_autocast",
    "_nocast",
    "_frozen",
    "_shadow",
    "_tensor_only",
}


def _mark(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn.__tensorclass_generated__ = True  # type: ignore[attr-defined]
    return fn


def _is_generated(attr: Any) -> bool:
    inner = getattr(attr, "fget", None) or getattr(attr, "__func__", None) or attr
    return getattr(inner, "__tensorclass_generated__", False) is True


def _written_methods() -> dict[str, Any]:
    """The methods written for tensorclasses (not forwarded), by name."""
    methods: dict[str, Any] = {name: _mark(fn) for name, fn in access.ACCESS.items()}
    methods.update(
        {
            "__repr__": _mark(tensorclass_repr),
            "__reduce_ex__": _mark(construct.reduce_ex),
            "__setstate__": _mark(construct.setstate),
            "__copy__": _mark(construct.copy_),
            "__deepcopy__": _mark(construct.deepcopy_),
            "to_dict": _mark(construct.to_dict),
            "to_tensordict": _mark(construct.to_tensordict),
            "saved_path": property(_mark(access.saved_path)),
            "grad": property(_mark(access.grad)),
            "state_dict": _mark(state.state_dict),
            "load_state_dict": _mark(state.load_state_dict),
            "select": _mark(state.select),
        }
    )
    classmethods: dict[str, Callable[..., Any]] = {
        "_from_tensordict": construct._tensordict_protocol,
        "from_tensordict": construct.from_tensordict,
        "from_dict": construct.from_dict,
        "load_memmap": construct.load_memmap,
        "load": construct.load_memmap,
        "stack": forwarding.stack,
        "maybe_dense_stack": forwarding.stack,
        "cat": forwarding.cat,
        "lazy_stack": forwarding.lazy_stack,
        "__torch_function__": forwarding.torch_function,
    }
    for name in _READERS:  # file and table readers build a TensorDict, then the instance
        classmethods[name] = _reader(name)
    methods.update({name: classmethod(_mark(fn)) for name, fn in classmethods.items()})
    return methods


#: TensorDict classmethods that read data (``core/behaviour/forwards.py``), for tensorclasses
_READERS = (
    *("from_pandas", "from_csv", "from_json", "from_parquet", "from_struct_array"),
    *("from_h5", "from_zarr", "from_schema"),
)


def _reader(name: str) -> Callable[..., Any]:
    def read(cls: type, *args: Any, **kwargs: Any) -> Any:
        from tensordict.core.dense import TensorDict

        return construct.from_tensordict(cls, getattr(TensorDict, name)(*args, **kwargs))

    read.__name__ = read.__qualname__ = name
    read.__doc__ = f"``TensorDict.{name}(...)`` as an instance of this tensorclass."
    forwarding.describe(read, name)  # help() shows TensorDict's parameters and docstring
    return read


WRITTEN = _written_methods()

#: every tensordict name a tensorclass answers (a field of that name needs ``shadow=True``)
_REST = forwarding.rest_of_api(frozenset(WRITTEN))
API_NAMES = frozenset(
    [name for names in forwarding.FORWARDED.values() for name in names]
    + list(forwarding.PROPERTIES)
    + list(WRITTEN)
    + list(_REST.methods)
    + list(_REST.properties)
    + list(_REST.constructors)
)


def api_members(qualname: str) -> Iterator[tuple[str, Callable[[], Any]]]:
    """The methods and properties a tensorclass gets (all but ``__init__``), by name, each with
    the zero-argument function that makes it: the written ones, the forwarded ones and the rest
    of the TensorDict API as the inner tensordict has it (``qualname``: the class's, for the
    forwarders' ``__qualname__``). Members are made only when asked for: a class that inherits
    them from a built base (every ``TensorClass`` subclass) makes none."""
    for name, member in WRITTEN.items():
        yield name, functools.partial(_same, member)
    for kind, names in forwarding.FORWARDED.items():
        for name in names:
            yield name, functools.partial(_method, name, kind, qualname)
    for name, settable in forwarding.PROPERTIES.items():
        yield name, functools.partial(forwarding.property_forwarder, name, settable)
    rest = forwarding.rest_of_api(frozenset(WRITTEN))
    for name in rest.methods:
        yield name, functools.partial(_method, name, forwarding.Kind.WRAP, qualname)
    for name, settable in rest.properties.items():
        yield name, functools.partial(forwarding.property_forwarder, name, settable)
    for name in rest.constructors:
        yield name, functools.partial(forwarding.constructor, name)


def _same(member: Any) -> Any:
    return member


def _method(name: str, kind: forwarding.Kind, qualname: str) -> Callable[..., Any]:
    method = forwarding.forwarder(name, kind)
    method.__qualname__ = f"{qualname}.{name}"
    return method


class ClassBuilder:
    """Turns a class with annotated fields into a tensorclass (collect, check, add, finish)."""

    def __init__(
        self,
        cls: type,
        *,
        autocast: bool,
        frozen: bool,
        nocast: bool,
        shadow: bool,
        tensor_only: bool = False,
    ) -> None:
        if autocast and nocast:
            raise TensorclassDefinitionError(
                "autocast is exclusive with nocast: autocast converts values to the annotated "
                "type, nocast never converts. Choose one."
            )
        if tensor_only and (autocast or nocast):
            raise TensorclassDefinitionError(
                f"tensor_only is exclusive with {'autocast' if autocast else 'nocast'}: a "
                "tensor_only class stores every field as a tensor (numbers are converted), "
                "whatever the annotation. Choose one."
            )
        self.cls = cls
        self.options = {
            "autocast": autocast,
            "nocast": nocast,
            "frozen": frozen,
            "shadow": shadow,
            "tensor_only": tensor_only,
        }

    def build(self) -> type:
        spec = self._collect()
        self._check_names(spec)
        self._add_fields(spec)
        self._add_methods(spec)
        return self._finish(spec)

    # -------------------------------------------------------------------- collect
    def _collect(self) -> ClassSpec:
        cls = self.cls
        self._keep_inherited_defaults()
        dataclasses.dataclass(cls, init=False, repr=False, eq=False)
        spec = ClassSpec(cls, dataclasses.fields(cls), **self.options)
        seen_default = None
        for f in spec.fields:
            if not f.init or f.kw_only:
                continue
            if has_default(f):
                seen_default = f.name
            elif seen_default is not None:
                raise TensorclassDefinitionError(
                    f"{cls.__name__}: field {f.name!r} has no default but follows {seen_default!r}"
                    ", which has one. Move it up, give it a default, or make it keyword-only "
                    "(dataclasses.field(kw_only=True))."
                )
        return spec

    def _keep_inherited_defaults(self) -> None:
        """A field redeclared without a value keeps the inherited default (as in dataclasses),
        instead of taking the inherited field property as its default."""
        cls = self.cls
        for name in inspect.get_annotations(cls):
            if name in cls.__dict__:
                continue
            inherited = getattr(cls, name, None)
            if not (isinstance(inherited, property) and _is_generated(inherited)):
                continue
            base_field = _inherited_field(cls, name)
            if base_field is None or not has_default(base_field):
                setattr(cls, name, dataclasses.field())
            elif base_field.default_factory is not dataclasses.MISSING:
                setattr(cls, name, dataclasses.field(default_factory=base_field.default_factory))
            else:
                setattr(cls, name, dataclasses.field(default=base_field.default))

    # -------------------------------------------------------------------- check
    def _check_names(self, spec: ClassSpec) -> None:
        cls = self.cls
        for name in spec.order:
            if name in RESERVED and not (spec.shadow and name in construct.CONTROL_KEYWORDS):
                raise TensorclassDefinitionError(
                    f"{cls.__name__}: {name!r} cannot be a field name: it is reserved for the "
                    f"constructor keywords {list(construct.CONTROL_KEYWORDS)}, the storage "
                    "attributes and the class flags. Rename the field."
                )
            # ("data" is allowed as upstream allows it: the field wins over TensorDict.data)
            hidden = name in API_NAMES or hasattr(TensorDict, name)
            if not spec.shadow and name != "data" and hidden:
                raise TensorclassDefinitionError(
                    f"Attribute name {name} can't be used with @tensorclass: in "
                    f"{cls.__name__}, the field {name!r} would hide the tensordict attribute "
                    f"{name!r}. Rename the field, or pass @tensorclass(shadow=True) to let the "
                    "field win (that method is then unavailable on instances)."
                )

    # -------------------------------------------------------------------- add
    def _add_fields(self, spec: ClassSpec) -> None:
        for name in spec.order:
            raw = spec.tensor_only and any(
                isinstance(c, type) and issubclass(c, NonTensorData)
                for c in spec.classes(name) or ()
            )
            setattr(self.cls, name, access.field_property(name, raw=raw))

    def _add(self, spec: ClassSpec, name: str, make: Callable[[], Any]) -> None:
        # a base that defines the name wins: a user's method, or the member a built base (or
        # TensorClass itself) already carries, which this class then shares
        if name in spec.names or _defined(self.cls, name):
            return
        setattr(self.cls, name, make())

    def _add_methods(self, spec: ClassSpec) -> None:
        cls = self.cls
        spec.user_setattr = _user_defined(cls, "__setattr__")
        user_init = cls.__dict__.get("__init__")
        if user_init is not None and not _is_generated(user_init):
            init = construct.wrap_user_init(user_init, spec)
        else:
            init = construct.make_init(spec, access.set_field)
        cls.__init__ = _mark(init)  # type: ignore[misc]
        for name, make in api_members(cls.__qualname__):
            self._add(spec, name, make)

    # -------------------------------------------------------------------- finish
    def _finish(self, spec: ClassSpec) -> type:
        cls: Any = self.cls
        cls._is_tensorclass = True
        cls._autocast = spec.autocast
        cls._nocast = spec.nocast
        cls._frozen = spec.frozen
        cls._shadow = spec.shadow
        cls._tensor_only = spec.tensor_only
        cls.__tensorclass_spec__ = spec
        cls.__expected_keys__ = frozenset(spec.order)
        register_class(cls)
        return cls  # type: ignore[no-any-return]


def _inherited_field(cls: type, name: str) -> dataclasses.Field[Any] | None:
    for base in cls.__mro__[1:]:
        found = getattr(base, "__dataclass_fields__", {}).get(name)
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None


def _defined(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base (other than ``object``) defines ``name``."""
    return any(name in klass.__dict__ for klass in cls.__mro__[:-1])


def _user_defined(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base (other than ``object``) defines ``name`` itself."""
    for klass in cls.__mro__[:-1]:
        attr = klass.__dict__.get(name, _MISSING)
        if attr is not _MISSING:
            return not _is_generated(attr)
    return False


@overload
def tensorclass(cls: type[_T], /) -> type[_T]: ...


@overload
def tensorclass(
    cls: None = None,
    /,
    *,
    autocast: bool = False,
    frozen: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform()
def tensorclass(
    cls: type[_T] | None = None,
    /,
    *,
    autocast: bool = False,
    frozen: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Make a class with annotated fields a dataclass whose data lives in a TensorDict.

    Fields may hold tensors, tensordicts, other tensorclasses or python objects (stored as
    :class:`~tensordict.NonTensorData`); ``None`` marks an unset field. The constructor takes the
    fields plus the keywords ``batch_size=``, ``device=``, ``names=`` and ``lock=``. Instances
    answer the TensorDict API (indexing, shape operations, ``torch.stack``/``torch.cat``, maths,
    ``apply``, ``memmap_``, ``map_iter``, ...) and results come back as the same class.

    Args:
        cls: the class (when used as ``@tensorclass`` without arguments).
        autocast: cast values to the field's annotation (``x: int`` stores a python int).
        frozen: instances cannot be assigned to after ``__init__``, and are locked.
        nocast: never convert values (``1`` stays a python int); values must match the field's
            annotation (see :mod:`tensordict.tensorclass.fields` for the exact rule).
        shadow: allow field names that hide tensordict methods (the field wins).
        tensor_only: every field holds a tensor, a tensordict or a tensorclass: numbers and
            numpy arrays are converted to tensors, other python objects are refused (instead of
            being stored as :class:`~tensordict.NonTensorData`).

    Returns:
        The class itself, completed (or a decorator when called with options only).

    Raises:
        TensorclassDefinitionError: ``autocast`` with ``nocast`` (or either with
            ``tensor_only``), a reserved field name, or a field that hides a tensordict
            attribute without ``shadow=True``.

    Examples:
        >>> import torch
        >>> from tensordict import tensorclass
        >>> @tensorclass
        ... class Sample:
        ...     obs: torch.Tensor
        ...     label: str = "none"
        >>> s = Sample(obs=torch.zeros(4, 3), label="cat", batch_size=[4])
        >>> s[1:3].obs.shape, s[1:3].label
        (torch.Size([2, 3]), 'cat')
        >>> torch.stack([s, s]).batch_size
        torch.Size([2, 4])
        >>> type(s.reshape(2, 2)).__name__
        'Sample'
    """

    def build(klass: type[_T]) -> type[_T]:
        builder = ClassBuilder(
            klass,
            autocast=autocast,
            frozen=frozen,
            nocast=nocast,
            shadow=shadow,
            tensor_only=tensor_only,
        )
        return builder.build()  # type: ignore[return-value]

    return build if cls is None else build(cls)


def is_tensorclass(obj: Any) -> bool:
    """Whether ``obj`` is a tensorclass or an instance of one.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, tensorclass
        >>> from tensordict.tensorclass import is_tensorclass
        >>> @tensorclass
        ... class Point:
        ...     xy: torch.Tensor
        >>> is_tensorclass(Point), is_tensorclass(Point(xy=torch.zeros(2)))
        (True, True)
        >>> is_tensorclass(TensorDict())
        False
        >>> from tensordict import NonTensorData
        >>> is_tensorclass(NonTensorData)  # as upstream, where it is made by @tensorclass
        True
    """
    cls = obj if isinstance(obj, type) else type(obj)
    if issubclass(cls, NonTensorData):  # (a tensorclass upstream, as are its subclasses)
        return True
    return getattr(cls, "_is_tensorclass", False) is True
