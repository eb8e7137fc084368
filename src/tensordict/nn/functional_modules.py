"""The functional path: a module's parameters as a tensordict, and a tensordict put into a module.

* :func:`from_module` collects the parameters and buffers of a module (recursively, submodules as
  nested tensordicts, the tensors themselves, not copies); :func:`from_modules` stacks those of
  several modules of the same architecture along a new first dimension.
* :func:`to_module` puts the tensors of a tensordict into a module, and returns the tensors it
  replaced as a tensordict that, used as a context manager, puts them back on exit::

      with params.to_module(module):
          y = module(x)          # runs with params

  Under ``torch.vmap`` over stacked parameters (see :mod:`tensordict.nn.vmap`) the same lines
  run one module over many parameter sets.

How a tensor is placed (``preserve_module_state``, the default) keeps the module's state dict:
a parameter stays registered as a parameter (a tensor without autograd is wrapped in a new
``nn.Parameter`` with the old one's ``requires_grad``; a tensor that requires grad, or a ``vmap``
slice, is registered as it is so that gradients flow to its source), a buffer stays a buffer.
With ``preserve_module_state=False`` a plain tensor that replaces a parameter becomes a plain
module attribute: ``module.weight`` reads it, ``state_dict()``, ``parameters()`` and
``from_module`` skip it (as upstream).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn
from torch._C._functorch import is_batchedtensor
from torch._functorch.vmap import _add_batch_dim as _vmap_add_batch_dim
from torch.nn.parameter import (  # type: ignore[attr-defined]
    UninitializedBuffer,
    UninitializedParameter,
    UninitializedTensorMixin,
)

from tensordict.core.batch_shape import is_uninitialized
from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.collection import publish_as
from tensordict.core.dense import TensorDict
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.serial.pytree import (
    PYTREE_REGISTERED_LAZY_TDS,
    PYTREE_REGISTERED_TDS,
    _exclude_td_from_pytree,
)
from tensordict.errors import FromModulesError
from tensordict.memmap import MemoryMappedTensor

__all__ = [
    "PYTREE_REGISTERED_LAZY_TDS",
    "PYTREE_REGISTERED_TDS",
    "_exclude_td_from_pytree",
    "from_module",
    "from_modules",
    "to_module",
]


# ====================================================================== from_module(s)
def _collect(module: nn.Module, filter_empty: bool) -> TensorDictBase:
    param_td = getattr(module, "_param_td", None)
    if isinstance(module, TensorDictBase) and param_td is not None:
        return param_td  # a TensorDictParams: its tensordict, shared
    source: dict[str, Any] = {}
    for name, param in module._parameters.items():
        if param is not None:
            source[name] = param
    for name, buffer in module._buffers.items():
        if buffer is not None:
            source[name] = buffer
    for name, child in module._modules.items():
        if child is None:
            continue
        sub = _collect(child, filter_empty)
        if filter_empty and sub.is_empty():
            continue
        source[name] = sub
    return TensorDict._new_unsafe(source, torch.Size([]))


def _from_state_dict(module: nn.Module) -> TensorDictBase:
    out = TensorDict()
    for key, value in module.state_dict().items():
        if isinstance(value, torch.Tensor):
            out.set(tuple(key.split(".")), value)
    return out


def from_module(
    module: nn.Module,
    as_module: bool = False,
    lock: bool = True,
    use_state_dict: bool = False,
    filter_empty: bool = True,
) -> Any:
    """The parameters and buffers of ``module`` as a tensordict (the tensors themselves).

    Submodules become nested tensordicts; submodules without tensors are left out unless
    ``filter_empty=False``; a ``TensorDictParams`` submodule contributes its tensordict.

    Args:
        module: the module to read.
        as_module: return a :class:`~tensordict.nn.TensorDictParams` (to register the tensors in
            another module).
        lock: lock the result (``TensorDict.from_module`` defaults to False, as upstream).
        use_state_dict: read ``module.state_dict()`` instead (detached tensors, state-dict hooks
            applied).
        filter_empty: leave out submodules without parameters or buffers.

    Examples:
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        >>> params = TensorDict.from_module(net)
        >>> list(params.keys(include_nested=True, leaves_only=True))
        [('0', 'weight'), ('0', 'bias'), ('2', 'weight'), ('2', 'bias')]
        >>> params["0", "weight"] is net[0].weight
        True
    """
    td = _from_state_dict(module) if use_state_dict else _collect(module, filter_empty)
    if as_module:
        from tensordict.nn.params import TensorDictParams

        td = TensorDictParams(td, no_convert=True)
    if lock:
        td.lock_()
    return td


class BatchedUninitializedParameter(UninitializedParameter):
    """The uninitialized parameters of ``batch_size`` lazy modules (``from_modules``): one
    parameter, materialized with the batch dims in front of the shape the module asks for.

    Under ``torch.vmap`` it is not batched: ``in_dim`` and ``vmap_level`` record where it would
    be, and :func:`to_module` batches it once the module has materialized it (upstream's
    ``tensordict.utils._BatchedUninitializedParameter``).

    Examples:
        >>> p = BatchedUninitializedParameter()
        >>> p.batch_size = torch.Size([3])
        >>> p.materialize((4, 2))
        >>> type(p).__name__, p.shape
        ('Parameter', torch.Size([3, 4, 2]))
    """

    batch_size: torch.Size
    in_dim: int | None = None
    vmap_level: int | None = None

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        super().materialize((*self.batch_size, *shape), device=device, dtype=dtype)


class BatchedUninitializedBuffer(UninitializedBuffer):
    """:class:`BatchedUninitializedParameter` for the uninitialized buffers of lazy modules."""

    batch_size: torch.Size
    in_dim: int | None = None
    vmap_level: int | None = None

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        super().materialize((*self.batch_size, *shape), device=device, dtype=dtype)


def _batched_uninitialized(first: torch.Tensor, n: int) -> torch.Tensor:
    """One uninitialized tensor standing for the ``n`` modules' ``first``-like ones."""
    kind: Any = (
        BatchedUninitializedParameter
        if isinstance(first, nn.Parameter)
        else BatchedUninitializedBuffer
    )
    out = kind(requires_grad=first.requires_grad, device=first.device, dtype=first.dtype)
    out.batch_size = torch.Size([n])
    return out  # type: ignore[no-any-return]


def _stack_leaf(n: int, expand_identical: bool) -> Any:
    def stack(first: torch.Tensor, *others: torch.Tensor) -> torch.Tensor:
        if isinstance(first, UninitializedTensorMixin):  # a lazy module's: no shape yet
            return _batched_uninitialized(first, n)
        if expand_identical and all(o is first for o in others):
            # a view of the shared tensor itself: gradients reach it (as upstream)
            return first.expand(n, *first.shape)
        stacked = torch.stack([first.data, *(o.data for o in others)])
        if isinstance(first, nn.Parameter):
            return nn.Parameter(stacked, requires_grad=first.requires_grad)
        return stacked

    return stack


def from_modules(
    *modules: nn.Module,
    as_module: bool = False,
    lock: bool = True,
    use_state_dict: bool = False,
    lazy_stack: bool = False,
    expand_identical: bool = False,
) -> Any:
    """The parameters of several modules of one architecture, stacked along a new first dim.

    Parameters of the result are new leaf ``nn.Parameter`` s holding the stacked data (ready for
    ``torch.vmap`` over ``to_module``, or an ensemble); buffers are stacked tensors.

    Args:
        *modules: modules with the same parameter structure.
        as_module: return a :class:`~tensordict.nn.TensorDictParams`.
        lock: lock the result.
        use_state_dict: read each module's state dict.
        lazy_stack: keep the modules' own tensors in a lazy stack instead of stacking copies.
        expand_identical: a tensor shared by every module is expanded (no copy), not stacked.

    Raises:
        ValueError: no module was given.
        FromModulesError: ``lazy_stack`` with ``as_module``, or with lazy modules.

    Examples:
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> params = TensorDict.from_modules(nn.Linear(3, 4), nn.Linear(3, 4))
        >>> params.batch_size, params["weight"].shape
        (torch.Size([2]), torch.Size([2, 4, 3]))
    """
    if not modules:
        raise ValueError("from_modules needs at least one module, got none.")
    if lazy_stack:
        _check_lazy_stack_allowed(modules, as_module)
    tds = [from_module(m, lock=False, use_state_dict=use_state_dict) for m in modules]
    if lazy_stack:
        from tensordict.core.lazy.stack import LazyStackedTensorDict

        out: Any = LazyStackedTensorDict(*tds, stack_dim=0)
    else:
        n = len(tds)
        out = tds[0]._apply_leaves(
            _stack_leaf(n, expand_identical), *tds[1:], batch_size=[n, *tds[0].batch_size]
        )
    if as_module:
        from tensordict.nn.params import TensorDictParams

        out = TensorDictParams(out, no_convert=True)
    if lock:
        out.lock_()
    return out


def _check_lazy_stack_allowed(modules: tuple[nn.Module, ...], as_module: bool) -> None:
    if any(isinstance(p, UninitializedTensorMixin) for m in modules for p in m.parameters()):
        raise FromModulesError(
            "from_modules: lasy_stack=True is not compatible with lazy modules. Their "
            "parameters have no shape yet: run the modules once first, or drop lazy_stack."
        )
    if as_module:
        raise FromModulesError(
            "from_modules(lazy_stack=True, as_module=True): the parameters of a lazy stack "
            "cannot be registered within a TensorDictParams (they stay the modules' own). Drop "
            "one of the two."
        )


# ====================================================================== to_module
def _kind(module: nn.Module, name: str) -> str:
    if name in module._parameters:
        return "parameter"
    if name in module._buffers:
        return "buffer"
    return "attribute"


def _current(module: nn.Module, name: str) -> Any:
    for store in (module._parameters, module._buffers):
        if name in store:
            return store[name]
    return module.__dict__.get(name)


def _tracks_gradients(value: torch.Tensor) -> bool:
    """A new leaf ``nn.Parameter`` around ``value`` would cut its gradients off."""
    return not isinstance(value, nn.Parameter) and (value.requires_grad or is_batchedtensor(value))


def _placed(value: torch.Tensor, kind: str, current: Any, preserve: bool) -> tuple[str, Any]:
    """Where (``parameter``/``buffer``/``attribute``) and what to store for ``value``."""
    if preserve and kind == "parameter" and current is not None:
        if isinstance(value, nn.Parameter) and value.requires_grad == current.requires_grad:
            return "parameter", value
        if _tracks_gradients(value):  # registered as it is (as torch.func.functional_call)
            return "parameter", value
        if isinstance(value, MemoryMappedTensor):
            value = value.as_subclass(torch.Tensor)
        return "parameter", nn.Parameter(value, requires_grad=current.requires_grad)
    if isinstance(value, nn.Parameter):
        if kind == "buffer" and preserve:
            return "buffer", value.data
        return "parameter", value
    if kind == "buffer":
        return "buffer", value
    return "attribute", value  # a plain module attribute: out of state_dict and parameters()


def _store(module: nn.Module, name: str, where: str, value: Any) -> None:
    was_buffer = name in module._buffers
    module._parameters.pop(name, None)
    module._buffers.pop(name, None)
    module.__dict__.pop(name, None)
    if where == "parameter":
        module._parameters[name] = value
    elif where == "buffer":
        module._buffers[name] = value
    else:
        if was_buffer:
            module._non_persistent_buffers_set.discard(name)
        module.__dict__[name] = value


def _to_params_module(
    target: Any, td: TensorDictBase, inplace: bool, swap: TensorDictBase | None
) -> None:
    """``to_module`` into a ``TensorDictParams``: swap the tensors of the tensordict it wraps."""
    inner = target._param_td
    for key, value in td.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
        if not isinstance(value, torch.Tensor):
            continue
        old = inner.get(key)
        path = (key,) if isinstance(key, str) else key
        if inplace:
            if swap is not None:
                swap.set(path, old.detach().clone())
            with torch.no_grad():
                old.copy_(value)
            continue
        if swap is not None:
            swap.set(path, old)
        parent = inner._parent_for_write(path, create=False)
        parent._set_str(path[-1], value, validated=True)


def _swap_into(
    module: nn.Module,
    td: TensorDictBase,
    *,
    inplace: bool,
    preserve: bool,
    swap: TensorDictBase | None,
    memo: dict[int, Any],
) -> None:
    if id(module) in memo:  # a module reached twice (shared layer): set once
        if swap is not None and memo[id(module)] is not None:
            swap.update(memo[id(module)])
        return
    memo[id(module)] = swap
    if isinstance(module, TensorDictBase):
        _to_params_module(module, td, inplace, swap)
        return
    for key, value in td._own_items():
        if isinstance(value, TensorDictBase) or getattr(type(value), "_is_tensorclass", False):
            child = module._modules.get(key)
            if child is None:
                raise KeyError(
                    f"to_module: the tensordict has an entry {key!r} with nested entries, but "
                    f"{type(module).__name__} has no submodule {key!r} (submodules: "
                    f"{list(module._modules)}). Build the tensordict with from_module(module)."
                )
            sub_swap = None
            if swap is not None:
                sub_swap = TensorDict()
                swap._set_str(key, sub_swap, validated=True)
            _swap_into(
                child,
                _params_of(value),
                inplace=inplace,
                preserve=preserve,
                swap=sub_swap,
                memo=memo,
            )
        elif isinstance(value, torch.Tensor) or type(value).__module__.startswith("functorch.dim"):
            # (a first-class-dim tensor, from td[dim], is set as a plain attribute)
            _swap_leaf(module, key, value, inplace, preserve, swap)


def _params_of(value: Any) -> Any:
    if getattr(type(value), "_is_tensorclass", False):
        return value._tensordict
    inner = getattr(value, "_param_td", None)
    return inner if inner is not None else value


def _swap_leaf(
    module: nn.Module,
    name: str,
    value: torch.Tensor,
    inplace: bool,
    preserve: bool,
    swap: TensorDictBase | None,
) -> None:
    current = _current(module, name)
    if inplace and isinstance(current, torch.Tensor):
        if swap is not None:
            swap._set_str(name, current.detach().clone(), validated=True)
        with torch.no_grad():
            current.copy_(value)
        return
    if swap is not None and current is not None:
        swap._set_str(name, current, validated=True)
    where, stored = _placed(value, _kind(module, name), current, preserve)
    _store(module, name, where, stored)
    if getattr(value, "vmap_level", None) is not None and is_uninitialized(value):
        module.register_forward_pre_hook(_BatchOnceMaterialized(name, value))


class _BatchOnceMaterialized:
    """A forward pre-hook, run after the lazy module's own (which materializes its tensors):
    replace the tensor ``name``, now materialized with the batch dims in front, by its batched
    view at the vmap level it was given to (then the hook removes itself)."""

    def __init__(self, name: str, value: torch.Tensor) -> None:
        self.name, self.value = name, value

    def __call__(self, module: nn.Module, args: Any) -> None:
        for key, hook in list(module._forward_pre_hooks.items()):
            if hook is self:
                del module._forward_pre_hooks[key]
        value: Any = self.value
        if not is_uninitialized(value):
            batched = _vmap_add_batch_dim(value, value.in_dim, value.vmap_level)
            _store(module, self.name, "attribute", batched)


def to_module(
    td: TensorDictBase,
    module: nn.Module,
    *,
    inplace: bool | None = None,
    return_swap: bool = True,
    swap_dest: TensorDictBase | None = None,
    use_state_dict: bool = False,
    non_blocking: bool = False,
    preserve_module_state: bool = True,
    memo: dict[int, Any] | None = None,
) -> Any:
    """Put the tensors of ``td`` into ``module`` (the structure of :func:`from_module`).

    Args:
        td: the tensordict of parameters and buffers.
        module: the module to write into.
        inplace: copy the data into the module's tensors instead of replacing them.
        return_swap: return the replaced tensors (as a tensordict usable as a context manager
            that puts them back on exit); with False, return None.
        swap_dest: a tensordict to write the replaced tensors into.
        use_state_dict: load through ``module.load_state_dict`` (state-dict hooks apply).
        non_blocking: accepted for compatibility (copies are synchronous here).
        preserve_module_state: keep the module's state dict (see the module documentation).
        memo: internal: modules already visited.

    Raises:
        KeyError: a nested entry names a submodule that ``module`` does not have.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> net = nn.Linear(2, 1)
        >>> zeros = TensorDict.from_module(net).data.clone().zero_()
        >>> with zeros.to_module(net):
        ...     net(torch.ones(2)).tolist()
        [0.0]
        >>> bool((net.weight == 0).all())
        False
    """
    if use_state_dict:
        return _to_module_state_dict(td, module, bool(inplace), return_swap)
    swap = None
    if return_swap:
        swap = swap_dest if swap_dest is not None else TensorDict()
    _swap_into(
        module,
        _params_of(td),
        inplace=bool(inplace),
        preserve=preserve_module_state,
        swap=swap,
        memo={} if memo is None else memo,
    )
    if swap is None:
        return None

    def restore() -> None:
        swap.to_module(
            module, return_swap=False, inplace=bool(inplace), preserve_module_state=False
        )

    swap._last_op = ("restore", restore)  # type: ignore[assignment,misc]
    return swap


def _to_module_state_dict(
    td: TensorDictBase, module: nn.Module, inplace: bool, return_swap: bool
) -> Any:
    swap = from_module(module, use_state_dict=True).clone() if return_swap else None
    flat = {
        ".".join(k) if isinstance(k, tuple) else k: v
        for k, v in td.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module.load_state_dict(flat, strict=False, assign=not inplace)
    if swap is None:
        return None

    def restore() -> None:
        _to_module_state_dict(swap, module, inplace, False)

    swap._last_op = ("restore", restore)  # type: ignore[assignment,misc]
    return swap


publish_as("tensordict._td", from_module, from_modules)  # upstream's path
