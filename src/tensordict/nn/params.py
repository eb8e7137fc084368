"""TensorDictParams: a tensordict whose tensors are the parameters and buffers of an ``nn.Module``.

A :class:`TensorDictParams` is both a :class:`~tensordict.TensorDictBase` and an
:class:`torch.nn.Module`. It wraps a :class:`~tensordict.TensorDict` (``_param_td``) whose
floating-point tensors are turned into :class:`torch.nn.Parameter` on the way in; the module sees
them through two live views (``_parameters`` and ``_buffers``, keyed by dotted paths such as
``"b.c"``), so ``named_parameters()``, ``state_dict()``, optimisers and ``module.to(...)`` work on
exactly the tensors the tensordict holds, whatever was written since.

Tensordict behaviour comes from the core through the primitives (``_own_items``, ``_get_str``,
``_set_str``, ...) delegated to the wrapped tensordict; what differs from a plain tensordict is
listed in :class:`TensorDictParams`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import torch
from torch import nn

from tensordict.core import factory
from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.collection import OverSourceMixin
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, leaf_or_non_tensor
from tensordict.errors import MemmapParamsError, ParamsWriteError

__all__ = ["TensorDictParams"]

_FLOATS = (torch.float16, torch.float32, torch.float64)
_MISSING: Any = object()


def _is_buffer_marked(tensor: torch.Tensor) -> bool:
    return bool(getattr(tensor, "_is_buffer", False))


def _as_registered(value: Any, no_convert: bool) -> Any:
    """A tensor as it is stored: a parameter stays one; a floating point tensor becomes an
    ``nn.Parameter`` (unless ``no_convert``: then a tensor computed from others, with a
    ``grad_fn``, stays itself); any other tensor is marked as an ``nn.Buffer`` (a detached
    alias of the same storage)."""
    if not isinstance(value, torch.Tensor) or isinstance(value, nn.Parameter):
        return value
    if _is_buffer_marked(value):
        return value
    if not no_convert and value.dtype in _FLOATS:
        return nn.Parameter(value)
    if value.grad_fn is not None:
        return value  # (a view of a parameter, e.g. expanded by from_modules: gradients reach it)
    return nn.Buffer(value)


def _register_in_place(td: TensorDictBase, no_convert: bool) -> None:
    """Replace the float tensors of a dense tensordict by parameters, keeping its structure."""
    for key, value in list(td._own_items()):
        if isinstance(value, TensorDict):
            _register_in_place(value, no_convert)
        elif isinstance(value, torch.Tensor):
            new = _as_registered(value, no_convert)
            if new is not value:
                td._set_str(key, new, validated=True)


def _registered_copy(value: Any, no_convert: bool) -> Any:
    """A value ready to be stored: tensors converted, tensordicts rebuilt with converted leaves."""
    if isinstance(value, TensorDictBase):
        return value._apply_leaves(lambda t: _as_registered(t, no_convert))
    return _as_registered(value, no_convert)


class _LeafRegistry(MutableMapping[str, torch.Tensor]):
    """A live, dotted-key view of the parameters (or of the other tensors) of a TensorDictParams.

    ``nn.Module`` reads and writes ``self._parameters`` / ``self._buffers``; these views make the
    wrapped tensordict the single place where the tensors live.
    """

    def __init__(self, owner: TensorDictParams, parameters: bool) -> None:
        self._owner = owner
        self._parameters = parameters

    def _leaves(self) -> Iterator[tuple[str, torch.Tensor]]:
        td = self._owner.__dict__["_param_td"]
        for key, value in td.items(
            include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
        ):
            if isinstance(value, torch.Tensor) and (
                isinstance(value, nn.Parameter) is self._parameters
            ):
                yield (key if isinstance(key, str) else ".".join(key)), value

    def __getitem__(self, key: str) -> torch.Tensor:
        for name, value in self._leaves():
            if name == key:
                return value
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return any(name == key for name, _ in self._leaves())

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, _ in self._leaves()])

    def __len__(self) -> int:
        return sum(1 for _ in self._leaves())

    def __setitem__(self, key: str, value: torch.Tensor | None) -> None:
        td = self._owner.__dict__["_param_td"]
        path = tuple(key.split("."))
        if value is None:
            if td.get(path, None) is not None:
                td.del_(path)
            return
        td.set(path, value)

    def __delitem__(self, key: str) -> None:
        self._owner.__dict__["_param_td"].del_(tuple(key.split(".")))

    def items(self) -> Any:
        return list(self._leaves())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._leaves())!r})"


class TensorDictParams(OverSourceMixin, TensorDictBase, nn.Module):  # type: ignore[misc]
    """A tensordict whose tensors are registered parameters and buffers of an ``nn.Module``.

    Putting a tensordict of weights in a module as a ``TensorDictParams`` makes them visible to
    ``module.parameters()``, ``state_dict()``, optimisers and ``module.to(...)``, while the
    tensordict API (nested keys, indexing, ``to_module``, ...) keeps working on them.

    Floating point tensors (float16/32/64) are stored as ``nn.Parameter`` (unless ``no_convert``);
    other tensors, and tensors marked with ``nn.Buffer``, are buffers. Written tensors are converted
    the same way. A tensordict given to the constructor keeps its structure: its float tensors are
    replaced by parameters in place, so the tensordict and the ``TensorDictParams`` share them.

    Differences from a plain tensordict: ``clone()`` makes new leaf parameters; ``to``/``cuda``/
    ``cpu``, ``copy()`` and ``clone(recurse=False)`` return a ``TensorDictParams``; in-place data
    writes that optimisers do (``apply_``, ``zero_``, ``update_``, ``copy_``, ``set_``, ``fill_``,
    ``set_at_``) run without autograd; other results (``apply``, indexing, ``select``, ``detach``,
    ``data``) are plain tensordicts.

    Args:
        parameters: a tensordict or a (nested) dict of tensors; keyword arguments are used when
            it is None.
        no_convert: keep the tensors as given: only ``nn.Parameter`` s are parameters, every other
            tensor is a buffer.
        lock: accepted for compatibility; the result is unlocked (as upstream).

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictParams
        >>> params = TensorDictParams(TensorDict({"w": torch.zeros(3), "n": {"b": torch.ones(2)}}))
        >>> module = nn.Module()
        >>> module.params = params
        >>> [name for name, _ in module.named_parameters()]
        ['params.w', 'params.n.b']
        >>> type(params["n", "b"]).__name__
        'Parameter'
    """

    #: ``torch.stack`` / ``torch.cat`` with ``out=`` a TensorDictParams write without autograd
    _writes_without_autograd = True

    def __init__(
        self,
        parameters: TensorDictBase | Mapping[str, Any] | None = None,
        *,
        no_convert: bool = False,
        lock: bool = False,
        **kwargs: Any,
    ) -> None:
        nn.Module.__init__(self)
        if parameters is None:
            parameters = TensorDict(kwargs)
        elif isinstance(parameters, TensorDictParams):
            parameters = parameters._param_td.copy()
        elif not isinstance(parameters, TensorDictBase):
            if not isinstance(parameters, Mapping):
                raise TypeError(
                    "TensorDictParams expects a tensordict or a dict of tensors, got "
                    f"{type(parameters).__name__}. Build it with TensorDict.from_module(module) "
                    "or from a dict."
                )
            parameters = TensorDict(dict(parameters))
        if not isinstance(parameters, TensorDict):
            parameters = parameters._apply_leaves(lambda t: t)  # a dense tensordict
        assert isinstance(parameters, TensorDictBase)
        _register_in_place(parameters, no_convert)
        self._wrap(parameters, no_convert)

    @classmethod
    def _lazy_shape_view(cls, params: TensorDictParams, op: str, **kwargs: Any) -> Any:
        """Upstream's legacy lazy mode: a TensorDictParams over the lazy shape view of the
        wrapped tensordict (viewing it back gives a TensorDictParams over that tensordict)."""
        view = factory.lazy_shape_view(params._param_td, op, **kwargs)
        out = cls.__new__(cls)
        nn.Module.__init__(out)
        out._wrap(view, True)
        return out

    def _wrap(self, parameters: TensorDictBase, no_convert: bool) -> None:
        self.__dict__["_param_td"] = parameters
        self.__dict__["no_convert"] = no_convert
        self.__dict__["_parameters"] = _LeafRegistry(self, parameters=True)
        self.__dict__["_buffers"] = _LeafRegistry(self, parameters=False)
        self.__dict__["_td_context"] = None
        self.__dict__["_last_op"] = None
        self.__dict__["_locked"] = False
        self.__dict__["_get_post_hooks"] = []
        self._lock_parents = None

    _param_td: TensorDict
    no_convert: bool

    def __hash__(self) -> int:
        # by identity, as every tensordict here; written in Python because torch.compile does
        # not trace object.__hash__ (a C slot), which nn.Module.named_modules calls on each
        # submodule (a loss module listing its parameters inside a compiled function)
        return id(self)

    # ================================================================== primitives (delegated)
    # the wrapped tensordict's (``OverSourceMixin``), but for these
    @property
    def _inner_td(self) -> TensorDict:
        """The wrapped tensordict (``_param_td``), read and written by ``OverSourceMixin``."""
        return self._param_td

    @OverSourceMixin.is_locked.getter  # type: ignore[attr-defined]  # (mypy reads no property here)
    def is_locked(self) -> bool:
        # its own flag: the wrapped tensordict may stay locked (writes through the
        # TensorDictParams unlock it for their length)
        return bool(self.__dict__.get("_locked", False))

    def _set_str(self, key: str, value: Any, *, validated: bool, **upstream: Any) -> None:
        if not validated:
            value = self._convert(key, value, self.batch_size)
        self._param_td._set_str(key, value, validated=True, **upstream)

    def _index(self, index: Any) -> Any:
        return self._param_td._index(index)

    def _new_dense(
        self,
        source: dict[str, Any],
        batch_size: torch.Size,
        names: list[str | None] | None = None,
    ) -> Any:
        return self._param_td._new_dense(source, batch_size, names)

    def _set_locked(self, value: bool, parent: TensorDictBase | None = None) -> None:
        if value and parent is not None:
            self._add_lock_parent(parent)
        self.__dict__["_locked"] = value
        if value or not self._param_td._locked_parents():
            self._param_td._set_locked(value)

    @contextlib.contextmanager
    def _writable(self) -> Iterator[None]:
        """Writes through an unlocked TensorDictParams reach a locked wrapped tensordict."""
        inner = self._param_td
        if self.is_locked or not inner.is_locked:
            yield
            return
        inner._set_locked(False)
        try:
            yield
        finally:
            inner._set_locked(True)

    def set(self, key: NestedKey, item: Any, inplace: bool = False, **kwargs: Any) -> Any:
        with self._writable():
            out = super().set(key, item, inplace, **kwargs)
        return self if out is self._param_td else out

    def update(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        inplace: bool = False,
        **kwargs: Any,
    ) -> Any:
        with self._writable():
            return super().update(input_dict_or_td, clone, inplace, **kwargs)

    def del_(self, key: NestedKey) -> Any:
        with self._writable():
            return super().del_(key)

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> Any:
        with self._writable():
            return super().rename_key_(old_key, new_key, safe)

    def _context_ops(self) -> list[tuple[str, bool] | None]:
        if self._td_context is None:
            self.__dict__["_td_context"] = []
        return self._td_context  # type: ignore[return-value]

    _td_context: list[tuple[str, bool] | None] | None

    def __getattr__(self, name: str) -> Any:
        # nn.Module's registered tensors and submodules first, then what only the wrapped
        # tensordict has (attributes of the dense class that core code reads)
        try:
            return nn.Module.__getattr__(self, name)
        except AttributeError:
            inner = self.__dict__.get("_param_td")
            if inner is not None and not name.startswith("_"):
                # a nested entry read as a submodule (torch.export and state-dict loading walk
                # "params.0.weight" with getattr): a TensorDictParams on a copy of its structure
                # holding the same tensors, as upstream (tensors swapped into it, as torch.export
                # does while tracing, do not reach this one)
                nested = inner._get_str(name, None)
                if isinstance(nested, TensorDictBase):
                    return type(self)(nested.copy(), no_convert=True)
            if inner is None or name.startswith("__") or not hasattr(inner, name):
                raise AttributeError(
                    f"'TensorDictParams' object has no attribute {name!r}"
                ) from None
            return getattr(inner, name)

    # ================================================================== read hooks
    def register_get_post_hook(self, hook: Callable[[Any, torch.Tensor], Any]) -> None:
        """Pass every tensor read (``get``, ``[key]``, ``values``, ``items``) through ``hook``.

        ``hook(params, tensor)`` returns the tensor to hand out (``None`` keeps it), e.g.
        ``lambda params, t: t.data`` to read the parameters without autograd history. Hooks run
        in the order they were registered; nested tensordicts are handed out unchanged.

        Raises:
            ValueError: ``hook`` is not callable.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictParams
            >>> params = TensorDictParams(w=torch.zeros(2))
            >>> params.register_get_post_hook(lambda params, t: t.data)
            >>> params["w"].requires_grad, params.get("w").requires_grad
            (False, False)
        """
        if not callable(hook):
            raise ValueError(
                f"register_get_post_hook expects a callable hook(params, tensor), got "
                f"{type(hook).__name__}."
            )
        self._hooks().append(hook)

    def _hooks(self) -> list[Callable[[Any, torch.Tensor], Any]]:
        hooks = self.__dict__.get("_get_post_hooks")
        if hooks is None:
            hooks = self.__dict__["_get_post_hooks"] = []
        return hooks  # type: ignore[no-any-return]

    def _after_get(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            for hook in self._hooks():
                new = hook(self, value)
                if new is not None:
                    value = new
        return value

    def get(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        return self._after_get(super().get(key, *args, **kwargs))

    def __getitem__(self, index: Any) -> Any:
        return self._after_get(super().__getitem__(index))

    def values(self, *args: Any, **kwargs: Any) -> Any:
        view = super().values(*args, **kwargs)
        if not self._hooks():
            return view
        return (self._after_get(value) for value in view)

    def items(self, *args: Any, **kwargs: Any) -> Any:
        view = super().items(*args, **kwargs)
        if not self._hooks():
            return view
        return ((key, self._after_get(value)) for key, value in view)

    # ================================================================== writes convert tensors
    def _convert(self, key: Any, value: Any, batch_size: torch.Size) -> Any:
        if value is self:
            raise ValueError(
                f"cannot store a TensorDictParams inside itself (key {key!r}): it would hold "
                "itself. Store a copy instead (params.data.clone())."
            )
        value = super()._convert(key, value, batch_size)
        return _registered_copy(value, self.no_convert)

    def _no_grad(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            out = method(*args, **kwargs)
        return self if out is self._param_td else out

    def apply(
        self, fn: Callable[..., Any], *others: Any, inplace: bool = False, **kwargs: Any
    ) -> Any:
        """Like :meth:`TensorDictBase.apply`. ``inplace=True`` writes with autograd on, which
        leaf parameters refuse: use :meth:`apply_` (no autograd) to update them.

        Raises:
            ParamsWriteError: ``inplace=True`` on parameters that require grad.
        """
        if not inplace:
            return super().apply(fn, *others, **kwargs)
        return self._autograd_write(super().apply, fn, *others, inplace=True, **kwargs)

    def named_apply(
        self, fn: Callable[..., Any], *others: Any, inplace: bool = False, **kwargs: Any
    ) -> Any:
        """Like :meth:`TensorDictBase.named_apply`; ``inplace=True`` as in :meth:`apply`.

        Raises:
            ParamsWriteError: ``inplace=True`` on parameters that require grad.
        """
        if not inplace:
            return super().named_apply(fn, *others, **kwargs)
        return self._autograd_write(super().named_apply, fn, *others, inplace=True, **kwargs)

    def _autograd_write(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``method`` writing in place with autograd on: leaf parameters refuse it."""
        try:
            return method(*args, **kwargs)
        except RuntimeError as err:
            if "leaf Variable" not in str(err):
                raise
            raise ParamsWriteError(
                f"Failed to update the parameters in place: {err} Use params.apply_(fn) (no "
                "autograd) or params.data.apply(fn, inplace=True)."
            ) from err

    def masked_fill(self, mask: torch.Tensor, value: Any) -> Any:
        """Like :meth:`TensorDictBase.masked_fill`: a :class:`~tensordict.TensorDict` computed
        from the parameters (autograd records it), which are left as they are."""
        return self._param_td.masked_fill(mask, value)

    def memmap_(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: parameters live in memory (memory-map ``params.data`` with ``memmap``).

        Raises:
            MemmapParamsError: always.
        """
        raise MemmapParamsError(
            "Cannot build a memmap TensorDict in-place from a TensorDictParams: its tensors are "
            "the parameters of a module. Use params.data.memmap(prefix) for a memory-mapped copy."
        )

    def apply_(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> TensorDictParams:
        """Apply ``fn`` and write each result into the parameters in place (without autograd)."""
        return self._no_grad(super().apply_, fn, *others, **kwargs)  # type: ignore[no-any-return]

    def zero_(self) -> TensorDictParams:
        """Fill every tensor with zeros in place (without autograd)."""
        return self._no_grad(super().zero_)  # type: ignore[no-any-return]

    def update_(self, input_dict_or_td: Any = None, clone: bool = False, **kwargs: Any) -> Any:
        """Write every entry in place (without autograd); every key must exist."""
        return self._no_grad(super().update_, input_dict_or_td, clone, **kwargs)

    def copy_(self, src: Any, non_blocking: bool = False) -> Any:
        """Copy every entry of ``src`` into the parameters in place (without autograd)."""
        return self._no_grad(super().copy_, src, non_blocking)

    def set_(self, key: NestedKey, item: Any) -> Any:
        """Overwrite an existing entry in place (without autograd)."""
        return self._no_grad(super().set_, key, item)

    def set_at_(self, key: NestedKey, value: Any, index: Any) -> Any:
        """Write ``value`` into ``params[key][index]`` in place (without autograd)."""
        return self._no_grad(super().set_at_, key, value, index)

    def fill_(self, key: Any, value: Any) -> Any:
        """Fill the entry ``key`` with ``value`` in place (without autograd)."""
        return self._no_grad(super().fill_, key, value)

    # ================================================================== copies
    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictParams:
        """A copy: new leaf parameters with copied data (``recurse=False``: shared tensors)."""
        if not recurse:
            return TensorDictParams(self._param_td.copy(), no_convert=True)
        memo: dict[int, torch.Tensor] = {}  # a tensor held under two keys stays shared

        def clone_leaf(t: torch.Tensor) -> torch.Tensor:
            if id(t) not in memo:
                memo[id(t)] = _clone_leaf(t)
            return memo[id(t)]

        out = self._param_td._apply_leaves(clone_leaf)
        return TensorDictParams(out, no_convert=True)

    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        """A plain :class:`~tensordict.TensorDict` holding copies of the tensors."""
        return self._param_td.clone()

    def copy(self) -> TensorDictParams:
        """A TensorDictParams sharing the same tensors (the structure is copied)."""
        return self.clone(recurse=False)

    def to(self, *args: Any, **kwargs: Any) -> TensorDictParams:
        """Move or cast like :meth:`TensorDictBase.to`; the result is a ``TensorDictParams``.

        Parameters stay parameters (new ones when the data had to be copied).
        """
        out = self._param_td.to(*args, **kwargs)
        if out is self._param_td:
            return self
        out = out._apply_leaves(_keep_kind, self._param_td)
        return TensorDictParams(out, no_convert=True)

    def cuda(self, device: Any = None) -> TensorDictParams:
        return self.to(torch.device("cuda" if device is None else f"cuda:{device}"))

    def cpu(self) -> TensorDictParams:
        return self.to("cpu")

    # ================================================================== nn.Module side
    def _apply(self, fn: Callable[..., Any], recurse: bool = True) -> TensorDictParams:
        """What ``module.to()`` / ``.double()`` call: parameters and buffers keep their
        identity (their ``.data`` is swapped, as upstream), where torch allows the swap."""
        td = self._param_td
        with torch.no_grad():
            for key, value in list(
                td.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
            ):
                if not isinstance(value, torch.Tensor):
                    continue
                applied = fn(value)
                if isinstance(value, nn.Parameter):
                    value.data = applied
                    if value.grad is not None:
                        value.grad = fn(value.grad)
                elif applied is value:
                    continue
                elif torch._has_compatible_shallow_copy_type(value, applied):
                    value.data = applied
                else:
                    parent = td._parent_for_write(_as_path(key), create=False)
                    parent._set_str(_as_path(key)[-1], applied, validated=True)
        return self

    def state_dict(  # type: ignore[override]
        self,
        destination: Any = None,
        prefix: str = "",
        keep_vars: bool = False,
        flatten: bool = True,
    ) -> Any:
        """The module state dict: one entry per tensor, keyed by its dotted path."""
        return nn.Module.state_dict(
            self, destination=destination, prefix=prefix, keep_vars=keep_vars
        )

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        # one entry per tensor in key order (parameters and buffers interleaved, as upstream)
        for key, value in self._param_td.items(
            include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
        ):
            if isinstance(value, torch.Tensor):
                name = key if isinstance(key, str) else ".".join(key)
                destination[prefix + name] = value if keep_vars else value.detach()

    def _load_from_state_dict(
        self,
        state_dict: Mapping[str, Any],
        prefix: str,
        local_metadata: Any,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        # nn.Module's version splits keys on the first dot, which our dotted paths contain
        mine: dict[str, torch.Tensor] = dict(self.__dict__["_parameters"].items())
        mine.update(self.__dict__["_buffers"].items())
        assign = bool(local_metadata.get("assign_to_params_buffers", False))
        for name, tensor in mine.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if value.shape != tensor.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a tensor of shape {tuple(value.shape)}, "
                    f"the tensor in the current module has shape {tuple(tensor.shape)}."
                )
            elif assign:
                self._parameters[name] = _as_registered(value, self.no_convert)
            else:
                with torch.no_grad():
                    tensor.copy_(value)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key[len(prefix) :] not in mine:
                    unexpected_keys.append(key)

    def load_state_dict(  # type: ignore[override]
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool | None = None,
    ) -> TensorDictParams:
        """Copy the tensors of a state dict (flat dotted keys or nested) into the parameters."""
        flat: dict[str, Any] = {}
        _flatten_state(state_dict, "", flat)
        nn.Module.load_state_dict(self, flat, strict=strict, assign=assign)
        return self

    @property
    def data(self) -> Any:
        """A tensordict of the parameters' ``.data`` (no autograd history)."""
        return self._param_td._apply_leaves(lambda t: t.data)

    @property
    def grad(self) -> Any:
        """A tensordict of the gradients (tensors without a gradient are left out)."""
        return self._param_td._apply_leaves(lambda t: t.grad, filter_empty=True)

    def __repr__(self) -> str:
        return f"TensorDictParams(params={self._param_td!r})"

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_parameters", "_buffers")}
        return (_rebuild_params, (state,))


def _as_path(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _clone_leaf(tensor: torch.Tensor) -> torch.Tensor:
    data = tensor.detach().clone()
    if isinstance(tensor, nn.Parameter):
        return nn.Parameter(data, requires_grad=tensor.requires_grad)
    return nn.Buffer(data) if _is_buffer_marked(tensor) else data


def _keep_kind(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """After ``to()``, a parameter that had to be copied becomes a parameter again (a plain
    tensor when cast to a dtype that cannot require gradients, as upstream)."""
    if new is old or not isinstance(old, nn.Parameter) or isinstance(new, nn.Parameter):
        return new
    if not (new.is_floating_point() or new.is_complex()):
        return new
    return nn.Parameter(new.detach(), requires_grad=old.requires_grad)


def _flatten_state(state: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in state.items():
        if key in ("__batch_size", "__device"):
            continue
        if isinstance(value, (Mapping, TensorDictBase)):
            items = value.items() if isinstance(value, Mapping) else value._own_items()
            _flatten_state(dict(items), f"{prefix}{key}.", out)
        else:
            out[f"{prefix}{key}"] = value


def _rebuild_params(state: dict[str, Any]) -> TensorDictParams:
    """Unpickle a TensorDictParams (module level so that pickle can find it)."""
    self = TensorDictParams.__new__(TensorDictParams)
    self.__dict__.update(state)
    self.__dict__["_parameters"] = _LeafRegistry(self, parameters=True)
    self.__dict__["_buffers"] = _LeafRegistry(self, parameters=False)
    self._lock_parents = None
    return self
