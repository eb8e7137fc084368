"""The TensorDict API of a tensorclass, declared once in :data:`FORWARDED`.

A tensorclass answers the tensordict methods by calling them on its inner tensordict. What
happens to the result is declared per method:

* ``WRAP``: a tensordict result (or a tuple of them, from ``split``/``unbind``/...) comes back as
  an instance of the same tensorclass, with the same fields stored outside the tensordict;
  anything else (a bool from ``all()``, a tensor from ``sum(reduce=True)``) as it is;
* ``SELF``: in-place methods; the tensorclass itself is returned;
* ``PLAIN``: the result is returned as it is (keys, values, sizes, entries);
* ``BORROW``: the :class:`~tensordict.TensorDictBase` implementation runs with the tensorclass as
  ``self``: memory mapping writes the tensorclass layout (``meta.json`` with its ``_type``, tensors
  in ``_tensordict/``) and ``map``/``map_iter`` hand the tensorclass itself to the parallel engine.

:data:`PROPERTIES` lists the attributes read from the inner tensordict. ``torch`` functions reach
:func:`torch_function`, which unwraps tensorclass arguments, runs the tensordict implementation and
wraps the result. Methods the class (or a user base class) defines itself are never replaced.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.combine import TORCH_FUNCTIONS, run_higher_order_op
from tensordict.core.dense import TensorDict
from tensordict.core.factory import Forward
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.tensorclass.construct import new_instance

__all__ = [
    "FORWARDED",
    "PROPERTIES",
    "Kind",
    "describe",
    "describe_pending",
    "forwarder",
    "torch_function",
    "wrap_result",
]


class Kind(enum.Enum):
    """What a forwarded method does with the inner tensordict's result."""

    WRAP = "wrap"
    SELF = "self"
    PLAIN = "plain"
    BORROW = "borrow"


_ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or")

#: The forwarded tensordict API, by what happens to the result.
FORWARDED: dict[Kind, tuple[str, ...]] = {
    Kind.WRAP: (
        # copies and conversions
        *("clone", "copy", "contiguous", "detach", "to", "cpu", "cuda", "empty"),
        *("exclude", "filter_non_tensor_data", "flatten_keys", "unflatten_keys"),
        *("half", "bfloat16", "double", "float", "int", "long", "bool"),
        # shape
        *("reshape", "view", "permute", "transpose", "squeeze", "unsqueeze", "expand"),
        *("expand_as", "flatten", "unflatten", "gather", "flip", "repeat"),
        *("split", "chunk", "unbind"),
        # copies to a file or a server, which come back as an instance (core/behaviour/forwards.py)
        *("to_h5", "to_zarr", "to_store"),
        # the tree walk, maths, comparisons, reductions
        *("apply", "named_apply", "add", "sub", "mul", "div", "pow", "lerp", "clamp"),
        *("abs", "neg", "exp", "log", "sqrt", "sign", "sigmoid", "reciprocal"),
        *("isfinite", "isnan", "isinf", "logical_not"),
        *("sum", "nansum", "mean", "nanmean", "prod", "max", "min", "std", "var", "all", "any"),
        *("masked_fill", "masked_select", "where", "cumsum", "softmax", "clamp_min", "clamp_max"),
        *("new_zeros", "new_ones", "new_empty", "new_full", "replace", "split_keys"),
        *("log1p", "expm1", "sin", "cos", "tanh", "floor", "ceil", "round", "trunc", "frac"),
        *("nan_to_num", "maximum", "minimum", "logical_and", "logical_or", "logical_xor"),
        *("isclose", "argmax", "argmin", "pin_memory", "reshape_as", "view_as", "separates"),
        *("densify", "to_padded_tensor", "to_lazystack"),
        *(f"__{op}__" for op in _ARITHMETIC),
        *(f"__r{op}__" for op in ("add", "sub", "mul", "truediv", "pow")),
        *("__xor__", "__neg__", "__abs__", "__invert__"),
        *("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"),
        # the protocol core code calls on nested values
        *("_apply_leaves", "_transform", "_index"),
    ),
    Kind.SELF: (
        *("lock_", "unlock_", "share_memory_", "set_", "set_at_"),
        *("copy_", "zero_", "fill_", "apply_", "detach_", "clear_device_"),
        *("auto_batch_size_", "refine_names", "del_", "rename_key_", "__enter__"),
        *("add_", "sub_", "mul_", "div_", "pow_", "abs_", "neg_", "exp_", "sqrt_", "clamp_"),
        *("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__"),
        *("masked_fill_", "requires_grad_", "zero_grad"),
        *("clear", "create_nested", "update_at_", "set_non_tensor", "filter_empty_", "load_"),
        *("log_", "log1p_", "expm1_", "sin_", "cos_", "tanh_", "floor_", "ceil_", "round_"),
        *("trunc_", "frac_", "sigmoid_", "reciprocal_", "sign_", "nan_to_num_"),
    ),
    Kind.PLAIN: (
        *("keys", "values", "items", "sorted_keys", "numel", "size", "dim", "ndimension"),
        *("is_empty", "is_memmap", "is_shared", "setdefault", "pop"),
        *("make_memmap", "make_memmap_from_tensor", "__contains__", "__delitem__", "__bool__"),
        *("entry_class", "is_contiguous", "param_count", "bytes"),
        *("popitem", "get_non_tensor", "non_tensor_items", "tolist", "numpy"),
        *("allclose", "is_floating_point", "to_module"),
        # file formats whose result is not a tensordict (core/behaviour/forwards.py)
        *("to_pandas", "to_csv", "to_json", "to_parquet", "to_struct_array"),
        # torch.distributed: in place, or plain tensordicts / works, as upstream
        *("send", "recv", "isend", "irecv", "asend", "arecv"),
        *("all_reduce", "reduce", "all_gather", "scatter"),
        "__exit__",
    ),
    Kind.BORROW: (
        *("memmap_", "memmap", "memmap_like", "save", "dumps", "memmap_refresh_"),
        *("map", "map_iter", "__iter__", "__len__", "pack"),
        # the class travels by name, and the result comes back as an instance of it
        *("init_remote", "broadcast"),
    ),
}

#: Attributes read from the inner tensordict: name -> settable.
PROPERTIES: dict[str, bool] = {
    "batch_size": True,
    "shape": False,
    "device": True,  # the tensordict's setter explains how to move it
    "names": True,
    "is_locked": True,
    "batch_dims": False,
    "ndim": False,
    "dtype": False,
    "requires_grad": False,
}


def _is_tc(value: Any) -> bool:
    return getattr(type(value), "_is_tensorclass", False) is True


def _unwrap(value: Any) -> Any:
    if _is_tc(value):
        return value._tensordict
    cls = type(value)  # (type(), not __class__, which torch.compile cannot read on a function)
    if cls in (list, tuple) and any(_is_tc(v) for v in value):
        return cls(v._tensordict if _is_tc(v) else v for v in value)
    return value


def wrap_result(template: Any, result: Any) -> Any:
    """A tensordict result as an instance of ``template``'s class (tuples element-wise)."""
    if isinstance(result, TensorDictBase):
        if result is template._tensordict:
            return template
        return new_instance(type(template), result, template._non_tensordict)
    if type(result) is tuple and result and isinstance(result[0], TensorDictBase):
        return tuple(wrap_result(template, r) for r in result)
    return result


def _without_none_fields(self: Any, other: Any) -> Any:
    """A tensordict compared with a tensorclass, without the entries named like the fields the
    tensorclass holds as None (outside its tensors), as upstream compares them."""
    if not isinstance(other, TensorDictBase) or _is_tc(other) or not self._non_tensordict:
        return other
    skip = [k for k in self._non_tensordict if k in other]
    return other.exclude(*skip) if skip else other


def _call_inner(self: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The inner tensordict's ``name``, with tensorclass arguments unwrapped."""
    if args:
        args = tuple(_unwrap(a) for a in args)
    if kwargs:
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    return getattr(self._tensordict, name)(*args, **kwargs)


def forwarder(name: str, kind: Kind) -> Callable[..., Any]:
    """The method ``name`` of a tensorclass, forwarded as ``kind`` says."""
    if kind is Kind.BORROW:
        impl = getattr(TensorDictBase, name)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return impl(self, *args, **kwargs)

    elif kind is Kind.WRAP:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if name in ("__eq__", "__ne__") and args:
                args = (_without_none_fields(self, args[0]), *args[1:])
            return wrap_result(self, _call_inner(self, name, args, kwargs))

    elif kind is Kind.SELF:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            _call_inner(self, name, args, kwargs)
            return self

    else:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._tensordict, name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = _doc(name, kind)
    method.__tensorclass_generated__ = True  # type: ignore[attr-defined]
    describe(method, name)
    return method


#: forwarders made while ``import tensordict`` runs, before the TensorDict method they forward
#: was bound (``core.factory.forward``): :func:`describe_pending` describes them once it is
_PENDING: list[tuple[Callable[..., Any], str]] = []


def describe(method: Callable[..., Any], name: str) -> None:
    """Show the TensorDict method ``name`` as ``method``: its docstring, and its signature
    (``__wrapped__``, which ``inspect.signature`` and ``help()`` follow), so that
    ``help(MyClass.map_iter)`` lists the real parameters, not ``*args, **kwargs``."""
    target = _TARGETS.get(name, _UNSET)
    if target is _UNSET:
        if isinstance(inspect.getattr_static(TensorDict, name, None), Forward):
            _PENDING.append((method, name))
            return
        impl = getattr(TensorDict, name, None)
        target = getattr(impl, "__func__", impl)  # a classmethod's function takes the class first
        if not callable(target) or not hasattr(target, "__code__"):
            target = None  # a slot wrapper (``__eq__`` of object, ...): nothing to show
        _TARGETS[name] = target
    if target is None:
        return
    method.__wrapped__ = target  # type: ignore[attr-defined]
    if target.__doc__:
        method.__doc__ = target.__doc__


#: what :func:`describe` found for each name once TensorDict's method was bound (looked up once:
#: every tensorclass gets a forwarder per name, and ``getattr_static`` is slow)
_TARGETS: dict[str, Any] = {}
_UNSET = object()


def describe_pending() -> None:
    """Describe the forwarders :func:`describe` put aside (``import tensordict`` calls this once
    every forwarded TensorDict method is bound)."""
    while _PENDING:
        describe(*_PENDING.pop())


@functools.cache
def _doc(name: str, kind: Kind) -> str:
    what = {
        Kind.WRAP: "a tensordict result comes back as this tensorclass",
        Kind.SELF: "works in place and returns this instance",
        Kind.PLAIN: "the result is returned as it is",
        Kind.BORROW: "runs the TensorDictBase implementation on this instance",
    }[kind]
    return f"``TensorDict.{name}`` on the inner tensordict; {what}."


def property_forwarder(name: str, settable: bool) -> property:
    def fget(self: Any) -> Any:
        return getattr(self._tensordict, name)

    def fset(self: Any, value: Any) -> None:
        if name == "device":
            raise RuntimeError(
                "device cannot be set using tensorclass.device = device, because the tensors "
                "would stay where they are. Use instance.to(device) to move them, or "
                "instance.clear_device_() to forget the device."
            )
        setattr(self._tensordict, name, value)

    fget.__tensorclass_generated__ = True  # type: ignore[attr-defined]
    doc = f"``TensorDict.{name}`` of the inner tensordict."
    return property(fget, fset if settable else None, None, doc)


def _template(args: Sequence[Any]) -> Any:
    for a in args:
        if _is_tc(a):
            return a
        if type(a) in (list, tuple):
            for v in a:
                if _is_tc(v):
                    return v
    return None


def torch_function(
    cls: type,
    func: Callable[..., Any],
    types: Any,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
) -> Any:
    """``__torch_function__``: the tensordict implementation on the inner tensordicts, wrapped."""
    impl = TORCH_FUNCTIONS.get(func)
    if impl is None:
        return run_higher_order_op(func, args, kwargs)
    mixed = (
        func in (torch.stack, torch.cat)
        and args
        and isinstance(args[0], (list, tuple))
        and not all(_is_tc(a) or isinstance(a, TensorDictBase) for a in args[0])
    )
    if mixed:
        return NotImplemented  # tensors mixed in: torch raises its dispatch TypeError
    return _dispatch(impl, args, kwargs or {})


def _dispatch(impl: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """``impl`` (a tensordict function) on the inner tensordicts of the tensorclass instances
    among ``args`` and ``kwargs`` (lists of them too); a tensordict result re-wrapped."""
    template = _template(args)
    if template is None:
        template = _template(tuple(kwargs.values()))
    result = impl(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
    out = kwargs.get("out")
    if out is not None and _is_tc(out) and result is out._tensordict:
        return out
    return result if template is None else wrap_result(template, result)


#: the name core's late binding (``factory.tensorclass_dispatch``) reaches it by
tensorclass_dispatch = _dispatch


def stack(cls: type, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kw: Any) -> Any:
    """Stack instances along a new batch dimension (same as ``torch.stack``)."""
    return _dispatch(TORCH_FUNCTIONS[torch.stack], (list(input), dim), {"out": out})


def cat(cls: type, input: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """Concatenate instances along a batch dimension (same as ``torch.cat``)."""
    return _dispatch(TORCH_FUNCTIONS[torch.cat], (list(input), dim), {"out": out})


def lazy_stack(cls: type, input: Sequence[Any], dim: int = 0, **kw: Any) -> Any:
    """Stack instances without copying (the inner tensordict is a lazy stack)."""
    members = list(input)
    result = LazyStackedTensorDict(*members, stack_dim=dim)
    template = _template(members)
    return result if template is None else wrap_result(template, result)


#: TensorDict attributes never forwarded by name (``data`` may be a field; the rest are written)
_NOT_FORWARDED = frozenset({"data", "grad"})


#: TensorDict constructors that keep building plain tensordicts from a tensorclass
_PLAIN_CONSTRUCTORS = frozenset({"from_module", "from_modules"})


class RestOfApi(NamedTuple):
    methods: tuple[str, ...]
    properties: dict[str, bool]
    constructors: tuple[str, ...]


@functools.cache
def rest_of_api(written: frozenset[str]) -> RestOfApi:
    """The public TensorDict methods, properties and classmethods that neither
    :data:`FORWARDED`, :data:`PROPERTIES` nor ``written`` cover: forwarded as ``WRAP`` methods,
    read-through properties and re-wrapping constructors (:func:`constructor`), so that a
    tensorclass answers the whole API as the dense class grows."""
    declared = {n for names in FORWARDED.values() for n in names} | set(PROPERTIES) | written
    methods: list[str] = []
    properties: dict[str, bool] = {}
    constructors: list[str] = []
    for name in dir(TensorDict):
        if name.startswith("_") or name in declared or name in _NOT_FORWARDED:
            continue
        attr = inspect.getattr_static(TensorDict, name)
        if isinstance(attr, Forward):  # a forwarding row not bound yet: what it will be
            if attr.kind == "method":
                methods.append(name)
            elif name not in _PLAIN_CONSTRUCTORS:
                constructors.append(name)
            continue
        if isinstance(attr, property):
            properties[name] = attr.fset is not None
        elif isinstance(attr, classmethod):
            if name not in _PLAIN_CONSTRUCTORS:
                constructors.append(name)
        elif isinstance(attr, staticmethod):
            continue
        elif callable(attr):
            methods.append(name)
    return RestOfApi(tuple(methods), properties, tuple(constructors))


def constructor(name: str) -> classmethod:  # type: ignore[type-arg]
    """``Cls.name(...)``: the TensorDict classmethod, its tensordict result as a ``Cls``."""
    impl = getattr(TensorDict, name)

    def method(cls: type, *args: Any, **kwargs: Any) -> Any:
        result = impl(*args, **kwargs)
        if isinstance(result, TensorDictBase):
            return cls._from_tensordict(result)  # type: ignore[attr-defined]
        return result

    method.__name__ = name
    method.__doc__ = f"``TensorDict.{name}``, the result as an instance of this tensorclass."
    method.__tensorclass_generated__ = True  # type: ignore[attr-defined]
    describe(method, name)
    return classmethod(method)


def _names(kinds: tuple[Kind, ...], extra: tuple[str, ...] = ()) -> list[str]:
    return sorted({n for k in kinds for n in FORWARDED[k]} | set(extra))


#: Upstream's names for the forwarded API, derived from :data:`FORWARDED` (sorted, disjoint):
#: comparisons that always run on the inner tensordict ...
_FALLBACK_METHOD_FROM_TD_FORCE = sorted(
    n
    for n in (*FORWARDED[Kind.WRAP], "__ror__")
    if n in ("__ge__", "__gt__", "__le__", "__lt__", "__ror__")
)
#: ... methods whose tensordict result comes back as the tensorclass (or that return it) ...
_FALLBACK_METHOD_FROM_TD = sorted(
    (set(_names((Kind.WRAP, Kind.SELF))) | set(rest_of_api(frozenset()).methods))
    - set(_FALLBACK_METHOD_FROM_TD_FORCE)
    - set(_names((Kind.PLAIN, Kind.BORROW)))
)
#: ... methods and attributes returned as the inner tensordict gives them ...
_FALLBACK_METHOD_FROM_TD_NOWRAP = _names((Kind.PLAIN,), tuple(PROPERTIES))
#: ... and methods run with the tensorclass itself as ``self``.
_METHOD_FROM_TD = _names((Kind.BORROW,))
