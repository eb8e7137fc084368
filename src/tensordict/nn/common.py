"""Modules that read their inputs from a tensordict and write their outputs into it.

* :class:`TensorDictModuleBase`: an ``nn.Module`` with ``in_keys`` and ``out_keys``; the keys may
  be class attributes, they become per-instance lists. ``select_out_keys`` narrows what a call
  writes, ``reset_parameters_recursive`` re-initialises the submodules.
* :class:`TensorDictModule`: wraps any callable (an ``nn.Module``, a function, a method of a
  module): reads ``in_keys`` (positionally, or as keyword arguments when ``in_keys`` is a dict),
  calls it, writes the results under ``out_keys``.
* :class:`TensorDictModuleWrapper`: wraps a tensordict module and forwards attributes to it.
* :class:`WrapModule`: a function from tensordict to tensordict as a module.
* :class:`as_tensordict_module`: a decorator turning a function into a tensordict module.
"""

from __future__ import annotations

import inspect
import pickle
import warnings
from collections.abc import Callable, Iterable, MutableSequence, Sequence
from functools import wraps
from textwrap import indent
from typing import Any

import torch
from torch import nn

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, unravel_key_list
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.nn.keyword_dispatch import dispatch
from tensordict.nn.select_out_keys import OutKeyNotFoundError, OutKeysSelect
from tensordict.nn.utils import _set_skip_existing_None

__all__ = [
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "WrapModule",
    "as_tensordict_module",
    "dispatch",
]

_MISSING: Any = object()


def _read(tensordict: Any, key: NestedKey, strict: bool) -> Any:
    """An input for the wrapped callable: the tensor, the object of non-tensor data, or None."""
    value = tensordict.get(key, _MISSING)
    if value is _MISSING:
        if strict:
            raise KeyError(
                f"strict=True: the input key {key!r} is not in the tensordict (keys: "
                f"{list(tensordict.keys())}). Add it, or build the module with strict=False "
                "to pass None for missing inputs."
            )
        return None
    if isinstance(value, NonTensorData):
        return value.data
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return value


def _selection(out_keys: tuple[Any, ...]) -> list[Any]:
    """The keys given to ``select_out_keys`` (a list instead of keys raises a clear error)."""
    try:
        return unravel_key_list(list(out_keys))
    except (TypeError, ValueError) as err:
        raise OutKeyNotFoundError(
            f"key should be a str or a tuple of str, got {out_keys!r}. Pass the keys as separate "
            "arguments: select_out_keys('a', 'b'), or unpack a list with select_out_keys(*keys)."
        ) from err


def _find_module_attr(module: nn.Module, name: str) -> Any:
    """``nn.Module``'s registered parameters, buffers and children, without the slow path."""
    d = module.__dict__
    for store in ("_parameters", "_buffers", "_modules"):
        found = d.get(store, {}).get(name, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


class TensorDictModuleBase(nn.Module):
    """Base of the modules that read ``in_keys`` from a tensordict and write ``out_keys``.

    Subclasses may declare ``in_keys`` / ``out_keys`` as class attributes: each instance gets its
    own (unravelled) lists, which can be reassigned. Nested keys are tuples of strings.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Double(TensorDictModuleBase):
        ...     in_keys = ["x"]
        ...     out_keys = [("out", "y")]
        ...     def forward(self, tensordict):
        ...         return tensordict.set(("out", "y"), 2 * tensordict["x"])
        >>> module = Double()
        >>> module(TensorDict(x=torch.ones(2)))["out", "y"]
        tensor([2., 2.])
        >>> module.out_keys
        [('out', 'y')]
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("in_keys", "out_keys"):
            declared = cls.__dict__.get(name, _MISSING)
            if declared is _MISSING or isinstance(declared, property):
                continue
            keys = unravel_key_list(list(declared))
            setattr(cls, f"_{name}", keys)
            if name == "out_keys":
                cls._out_keys_apparent = keys
            setattr(cls, name, getattr(TensorDictModuleBase, name))

    @staticmethod
    def is_tdmodule_compatible(module: Any) -> bool:
        """Whether ``module`` has ``in_keys`` and ``out_keys``."""
        return hasattr(module, "in_keys") and hasattr(module, "out_keys")

    @property
    def in_keys(self) -> Any:
        return self._in_keys

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        self._in_keys = unravel_key_list(list(value))

    @property
    def out_keys(self) -> Any:
        return self._out_keys_apparent

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        keys = unravel_key_list(list(value))
        self._out_keys = keys
        self._out_keys_apparent = keys

    @property
    def out_keys_source(self) -> Any:
        """All the keys the module computes (``out_keys`` may be a selection of them)."""
        return self._out_keys

    def select_out_keys(self, *out_keys: NestedKey) -> Any:
        """Keep only ``out_keys`` in what the module writes (and returns); returns the module.

        Raises:
            ValueError: a key the module does not write.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from tensordict.nn import TensorDictModule
            >>> mod = TensorDictModule(lambda x: (x + 1, x + 2), in_keys=["x"], out_keys=["a", "b"])
            >>> sorted(mod.select_out_keys("b")(TensorDict(x=torch.zeros(1))).keys())
            ['b', 'x']
        """
        keys = _selection(out_keys)
        if len(keys) == 1 and keys[0] not in self.out_keys:
            hint = ""
            if isinstance(keys[0], (tuple, list)) and keys[0] and keys[0][0] in self.out_keys:
                hint = (
                    f" Are you passing the keys in a list? Try unpacking as: `{', '.join(keys[0])}`"
                )
            raise OutKeyNotFoundError(
                f"Can't select non existent key: {keys[0]!r}. The module writes "
                f"{self.out_keys}.{hint}"
            )
        hook = OutKeysSelect(keys)
        hook.attach(self)
        self.register_forward_hook(hook, with_kwargs=True)
        return self

    def reset_out_keys(self) -> Any:
        """Undo every :meth:`select_out_keys`; returns the module."""
        for handle_id, hook in reversed(list(self._forward_hooks.items())):
            if isinstance(hook, OutKeysSelect):
                hook.remove()
                del self._forward_hooks[handle_id]
        return self

    def reset_parameters_recursive(
        self, parameters: TensorDictBase | None = None
    ) -> TensorDictBase | None:
        """Re-initialise every submodule that has ``reset_parameters``.

        With ``parameters`` (a tensordict of the module's parameters, no batch dimension), the
        new values are written into a detached copy of it, which is returned; the module itself
        is left as it was.

        Raises:
            RuntimeError: ``parameters`` has batch dimensions.
        """
        if parameters is None:
            if not self._reset_parameters(self):
                warnings.warn(
                    "reset_parameters_recursive was called without the parameters argument and "
                    "did not find any parameters to reset",
                    stacklevel=2,
                )
            return None
        if parameters.ndim:
            raise RuntimeError(
                "reset_parameters_recursive does not support batched TensorDicts, ensure "
                "`batch_size` is empty and the parameters shape match their original shape."
            )
        fresh = parameters.apply(lambda x: x.detach().requires_grad_())
        with fresh.to_module(self, preserve_module_state=False):
            self._reset_parameters(self)
        return fresh  # type: ignore[no-any-return]

    def _reset_parameters(self, module: nn.Module) -> bool:
        reset = False
        for child in module.children():
            reset |= self._reset_parameters(child)
            if hasattr(child, "reset_parameters"):
                child.reset_parameters()  # type: ignore[operator]
                reset = True
        return reset

    @property
    def __name__(self) -> str:  # type: ignore[override]
        return type(self).__qualname__.rsplit(".", 1)[-1]

    def __repr__(self) -> str:
        entries = [f"{name}={child}" for name, child in self.named_children()]
        payload = self.__dict__.get("module")
        if payload is not None:
            entries.insert(0, f"module={payload}")
        entries += [f"in_keys={self.in_keys}", f"out_keys={self.out_keys}"]
        fields = indent(",\n".join(entries), "    ")
        return f"{type(self).__name__}(\n{fields})"


class TensorDictModule(TensorDictModuleBase):
    """Wrap a callable so that it reads ``in_keys`` from a tensordict and writes ``out_keys``.

    Args:
        module: an ``nn.Module`` or any callable (or an object whose ``method`` is called).
        in_keys: the input keys, passed positionally; or a dict mapping keyword names to keys
            (``{"x": "obs"}`` calls ``module(x=td["obs"])``; reversed with ``out_to_in_map=False``).
        out_keys: the keys of the outputs, in order; ``"_"`` drops an output.

    Keyword Args:
        out_to_in_map: orientation of a dict ``in_keys`` (default True: keyword -> key).
        inplace: True writes into the input; False into a new empty tensordict; ``"empty"`` into
            ``tensordict.empty()`` (same batch size and device).
        method: the name of the method of ``module`` to call.
        method_kwargs: keyword arguments added to every call.
        strict: a missing input raises KeyError (default: it is passed as None).
        get_kwargs: accepted for compatibility.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> module = TensorDictModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"])
        >>> td = module(TensorDict(obs=torch.randn(4, 3), batch_size=[4]))
        >>> td["action"].shape
        torch.Size([4, 2])
        >>> module(obs=torch.randn(3)).shape  # tensors in, tensors out
        torch.Size([2])
    """

    _IN_KEY_ERR = "in_keys must be of type list, str or tuples of str, or dict."
    _OUT_KEY_ERR = "out_keys must be of type list, str or tuples of str."

    def __init__(
        self,
        module: Callable[..., Any],
        in_keys: NestedKey | list[NestedKey] | dict[Any, Any],
        out_keys: NestedKey | list[NestedKey],
        *,
        out_to_in_map: bool | None = None,
        inplace: bool | str | None = True,
        method: str | None = None,
        method_kwargs: dict[str, Any] | None = None,
        strict: bool = False,
        get_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        in_list, self._kwargs = self._parse_in_keys(in_keys, out_to_in_map)
        if isinstance(out_keys, (str, tuple)):
            out_keys = [out_keys]
        elif not isinstance(out_keys, MutableSequence):
            raise ValueError(self._OUT_KEY_ERR)
        try:
            self.out_keys = list(out_keys)
        except Exception as err:
            raise ValueError(self._OUT_KEY_ERR) from err
        if type(module) is type or (method is None and not callable(module)):
            raise ValueError(
                f"Module {module} of type {type(module)} is not callable. Typical accepted types "
                "are nn.Module or TensorDictModule. To call a method of an object, pass its name "
                "as method=..."
            )
        if inplace not in (None, True, False, "empty"):
            raise ValueError(
                "The only accepted valued for inplace is `None`, `True`, `False`, or `'empty'`. "
                f"Got inplace={inplace} instead."
            )
        self.in_keys = in_list
        if "_" in self.in_keys:
            warnings.warn(
                'key "_" is for ignoring output, it should not be used in input keys', stacklevel=2
            )
        self.strict = strict
        self.module = module
        self.inplace = inplace
        self.method = method
        self.method_kwargs = method_kwargs if method_kwargs is not None else {}
        self._get_kwargs = get_kwargs if get_kwargs is not None else {}

    def _parse_in_keys(self, in_keys: Any, out_to_in_map: bool | None) -> tuple[list[Any], Any]:
        if out_to_in_map is not None and not isinstance(in_keys, dict):
            warnings.warn(
                "out_to_in_map is not None but is only used when in_key is a dictionary.",
                stacklevel=3,
            )
        if isinstance(in_keys, dict):
            kw_first = out_to_in_map is None or out_to_in_map
            pairs = list(in_keys.items()) if kw_first else [(v, k) for k, v in in_keys.items()]
            keys = [key for _, key in pairs]
            kwargs: Any = [kw for kw, _ in pairs]
        elif isinstance(in_keys, (str, tuple)):
            keys, kwargs = [in_keys], None
        elif isinstance(in_keys, MutableSequence):
            keys, kwargs = list(in_keys), None
        else:
            raise ValueError(self._IN_KEY_ERR)
        try:
            return unravel_key_list(keys), kwargs
        except Exception as err:
            raise ValueError(self._IN_KEY_ERR) from err

    def _write_to_tensordict(
        self,
        tensordict: TensorDictBase,
        tensors: Sequence[Any],
        tensordict_out: TensorDictBase | None = None,
        out_keys: Iterable[NestedKey] | None = None,
    ) -> TensorDictBase:
        out_keys = list(self.out_keys_source if out_keys is None else out_keys)
        if tensordict_out is None:
            if self.inplace is True:
                tensordict_out = tensordict
            elif self.inplace == "empty":
                tensordict_out = tensordict.empty()
            else:
                tensordict_out = TensorDict()
        if len(tensors) > len(out_keys):
            raise RuntimeError(
                f"There are more tensors (len(tensors)={len(tensors)}) than out_keys "
                f"(out_keys={out_keys})."
            )
        if len(out_keys) > len(tensors):
            raise RuntimeError(
                f"There are more out_keys ({out_keys}) than tensors ({len(tensors)} returned)."
            )
        for key, value in zip(out_keys, tensors):
            if key != "_":
                tensordict_out.set(key, value)
        return tensordict_out

    def _call_module(self, tensors: Sequence[Any], **kwargs: Any) -> Any:
        kwargs.update(self.method_kwargs)
        if self.method is None:
            return self.module(*tensors, **kwargs)
        return getattr(self.module, self.method)(*tensors, **kwargs)

    @dispatch(auto_batch_size=False)
    @_set_skip_existing_None()
    def forward(
        self,
        tensordict: TensorDictBase,
        *args: Any,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Read the inputs, call the wrapped callable, write the outputs; returns the tensordict
        written into (the input unless ``inplace`` says otherwise or ``tensordict_out`` is given).
        """
        if args:
            raise ValueError("Got a non-empty list of extra agruments, when none was expected.")
        try:
            if self._kwargs is not None:
                for kw, key in zip(self._kwargs, self.in_keys):
                    kwargs[kw] = _read(tensordict, key, self.strict)
                inputs: tuple[Any, ...] = ()
            else:
                inputs = tuple(_read(tensordict, key, self.strict) for key in self.in_keys)
            try:
                outputs = self._call_module(inputs, **kwargs)
            except Exception as err:
                missing = [k for k, v in zip(self.in_keys, inputs) if v is None]
                if missing and "None" in str(err):
                    raise KeyError(
                        "Some tensors that are necessary for the module call may not have not "
                        f"been found in the input tensordict: the following inputs are None: "
                        f"{set(missing)}."
                    ) from err
                raise
            return self._write_to_tensordict(tensordict, self._as_tuple(outputs), tensordict_out)
        except Exception as err:
            if hasattr(err, "add_note"):
                err.add_note(
                    f"(in TensorDictModule with in_keys={self.in_keys}, out_keys={self.out_keys}, "
                    f"module={self.module!r:.200})"
                )
            raise

    def _as_tuple(self, outputs: Any) -> tuple[Any, ...]:
        if outputs is None:
            return ()
        if (
            type(outputs) is not torch.Tensor
            and isinstance(outputs, (dict, TensorDictBase))
            and all(_has_key(outputs, k) for k in self.out_keys_source)
        ):
            if isinstance(outputs, dict):
                outputs = dict(zip(unravel_key_list(list(outputs)), outputs.values()))
            return tuple(outputs.get(k) for k in self.out_keys_source)
        return outputs if isinstance(outputs, tuple) else (outputs,)

    @property
    def device(self) -> torch.device:
        """Deprecated: the device of the first parameter (cpu without parameters)."""
        warnings.warn(
            "TensorDictModule.device is deprecated and will be removed in TensorDict 0.17. "
            "Modules may hold parameters on several devices; inspect them instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        for param in self.parameters():
            return param.device
        return torch.device("cpu")

    def __getattr__(self, name: str) -> Any:
        found = _find_module_attr(self, name)
        if found is not _MISSING:
            return found
        if not name.startswith("_"):
            module = self.__dict__.get("_modules", {}).get("module", self.__dict__.get("module"))
            if module is not None:
                return getattr(module, name)
        raise AttributeError(f"module {type(self).__name__} has no attribute named {name}.")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        payload = state.get("module")
        if payload is not None and not isinstance(payload, nn.Module):
            state["module"] = _PickledCallable(payload)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        payload = state.get("module")
        if isinstance(payload, _PickledCallable):
            state["module"] = payload.load()
        self.__dict__.update(state)


def _has_key(mapping: Any, key: NestedKey) -> bool:
    if isinstance(mapping, dict):
        return key in mapping or (isinstance(key, tuple) and len(key) == 1 and key[0] in mapping)
    return mapping.get(key, _MISSING) is not _MISSING


class _PickledCallable:
    """A callable that plain pickle may not handle (a lambda): stored with cloudpickle."""

    def __init__(self, fn: Any) -> None:
        try:
            self.payload, self.cloud = pickle.dumps(fn), False
        except Exception:
            try:
                import cloudpickle
            except ImportError as err:  # pragma: no cover - cloudpickle is a dependency
                raise TypeError(
                    f"cannot pickle the callable {fn!r} of a TensorDictModule: install "
                    "cloudpickle (pip install cloudpickle) to pickle lambdas and closures."
                ) from err
            self.payload, self.cloud = cloudpickle.dumps(fn), True

    def load(self) -> Any:
        return pickle.loads(self.payload)


class TensorDictModuleWrapper(TensorDictModuleBase):
    """A module around a tensordict module: calls it, and reads unknown attributes from it.

    Subclasses change what happens around the call (exploration noise, ...).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> inner = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        >>> wrapper = TensorDictModuleWrapper(inner)
        >>> wrapper.in_keys, wrapper(TensorDict(x=torch.zeros(1)))["y"]
        (['x'], tensor([1.]))
    """

    def __init__(self, td_module: TensorDictModuleBase) -> None:
        super().__init__()
        self.td_module = td_module

    @property
    def out_keys(self) -> Any:
        return self.__dict__.get("_out_keys_apparent", self.td_module.out_keys)

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self.td_module.out_keys = value
        self._out_keys_apparent = self.td_module.out_keys

    @property
    def out_keys_source(self) -> Any:
        return self.td_module.out_keys_source

    def __getattr__(self, name: str) -> Any:
        found = _find_module_attr(self, name)
        if found is not _MISSING:
            return found
        if not name.startswith("__"):
            inner = self.__dict__.get("_modules", {}).get("td_module")
            if inner is not None:
                return getattr(inner, name)
        raise AttributeError(f"attribute {name} not recognised in {type(self).__name__}")

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.td_module(*args, **kwargs)


class WrapModule(TensorDictModuleBase):
    """A function from tensordict to tensordict, as a module (for sequences).

    Args:
        func: the function.
        inplace: write the function's result into the input tensordict.
        in_keys, out_keys: the keys it reads and writes (for ``TensorDictSequential``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> module = WrapModule(lambda td: td.set("y", td["x"] * 2), in_keys=["x"], out_keys=["y"])
        >>> module(TensorDict(x=torch.ones(1)))["y"]
        tensor([2.])
    """

    in_keys: Any = []
    out_keys: Any = []

    def __init__(
        self,
        func: Callable[[TensorDictBase], TensorDictBase],
        *,
        inplace: bool = False,
        in_keys: list[NestedKey] | None = None,
        out_keys: list[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        self.func = func
        self.inplace = inplace
        if in_keys is not None:
            self.in_keys = in_keys
        if out_keys is not None:
            self.out_keys = out_keys

    def forward(self, data: TensorDictBase) -> TensorDictBase:
        result = self.func(data)
        if self.inplace and result is not data:
            return data.update(result)
        return result


class as_tensordict_module:
    """Decorator: the function (or method) becomes a tensordict module over ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> @as_tensordict_module(in_keys=["c"], out_keys=["d"])
        ... def add_one(c):
        ...     return c + 1
        >>> add_one(TensorDict(c=torch.zeros(1)))["d"]
        tensor([1.])
    """

    def __init__(
        self, *, in_keys: list[NestedKey] | NestedKey, out_keys: list[NestedKey] | NestedKey
    ) -> None:
        self.in_keys = [in_keys] if isinstance(in_keys, (str, tuple)) else in_keys
        self.out_keys = [out_keys] if isinstance(out_keys, (str, tuple)) else out_keys

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        holder: list[TensorDictModule] = []
        is_method = inspect.ismethod(func) or "self" in inspect.signature(func).parameters

        def module() -> TensorDictModule:
            if not holder:
                target = func
                if is_method:

                    def target(*args: Any, _as_tensordict_module_self: Any, **kw: Any) -> Any:
                        return func(_as_tensordict_module_self, *args, **kw)

                holder.append(
                    TensorDictModule(target, in_keys=self.in_keys, out_keys=self.out_keys)
                )
            return holder[0]

        if is_method:

            @wraps(func)
            def method_wrapper(_self: Any, *args: Any, **kwargs: Any) -> Any:
                return module()(*args, _as_tensordict_module_self=_self, **kwargs)

            return method_wrapper

        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return module()(*args, **kwargs)

        return wrapper
