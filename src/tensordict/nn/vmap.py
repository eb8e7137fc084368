"""``torch.vmap`` over tensordicts: a tensordict argument is batched along one of its batch dims.

``torch.vmap`` handles its arguments in three steps of ``torch._functorch.vmap``: find the batch
size of the inputs (``_process_batched_inputs``), wrap each input tensor as a batched tensor
(``_create_batched_inputs``) and unwrap the outputs (``_unwrap_batched``). Those three functions
are wrapped here (once, at import) so that a tensordict (dense, lazy stack, tensorclass,
``TensorDictParams``) is handled as one argument::

    vmap(f, in_dims=(0, None))(td, x)
      td: batch [N, B...] --in_dim 0--> inside f: batch [B...], every tensor batched at level L
      f returns td'   --out_dim 0-->  batch [N, B'...], every tensor unwrapped (unbatched ones
                                      expanded), names and device kept

Calls without any tensordict go to torch's own functions unchanged. Within the argument handling,
tensordicts are kept out of the pytree walk (see ``_exclude_td_from_pytree``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch._functorch.vmap as _vmap_impl
from torch.utils._pytree import _broadcast_to_and_flatten, tree_flatten, tree_unflatten

from tensordict.core.batch_shape import is_uninitialized
from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.serial.pytree import _exclude_td_from_pytree

__all__ = ["install_vmap_support"]

_ORIGINAL: dict[str, Callable[..., Any]] = {}
# batched views of lazy stacks vmapped along their stack dim: unwrapped back into lazy stacks
# (keyed by id: a tensordict's == is elementwise, so it cannot sit in a WeakSet)
_FROM_LAZY: dict[int, weakref.ref[Any]] = {}


def _as_td(value: Any) -> Any:
    """The tensordict behind a tensorclass, or ``value``."""
    if getattr(type(value), "_is_tensorclass", False):
        return value._tensordict
    return value


def _drop(seq: Any, dim: int) -> list[Any]:
    seq = list(seq)
    del seq[dim]
    return seq


def _insert(seq: Any, dim: int, item: Any) -> list[Any]:
    seq = list(seq)
    seq.insert(dim, item)
    return seq


def _names_without(td: Any, dim: int) -> list[str | None] | None:
    names = td._names_or_none()
    if names is None:
        return None
    out = _drop(names, dim)
    return out if any(n is not None for n in out) else None


def _add_batch_dim_td(td: Any, in_dim: int, level: int) -> Any:
    """A tensordict whose tensors are batched at ``level`` along batch dim ``in_dim``."""
    if getattr(type(td), "_is_tensorclass", False):
        inner = _add_batch_dim_td(td._tensordict, in_dim, level)
        return type(td)._from_tensordict(inner, dict(td._non_tensordict))
    if isinstance(td, LazyStackedTensorDict):
        if in_dim != td.stack_dim:
            member_dim = in_dim if in_dim < td.stack_dim else in_dim - 1
            stack_dim = td.stack_dim if in_dim > td.stack_dim else td.stack_dim - 1
            members = [_add_batch_dim_td(m, member_dim, level) for m in td.tensordicts]
            out = LazyStackedTensorDict(*members, stack_dim=stack_dim)
            return out.lock_() if td.is_locked else out
        dense = _add_batch_dim_td(td.to_tensordict(), in_dim, level)
        key = id(dense)

        def forget(_: Any) -> None:
            _FROM_LAZY.pop(key, None)

        _FROM_LAZY[key] = weakref.ref(dense, forget)
        return dense.lock_() if td.is_locked else dense
    source: dict[str, Any] = {}
    new_bs = torch.Size(_drop(td.batch_size, in_dim))
    for key, value in td._own_items():
        if is_uninitialized(value):
            # (a lazy module's, from from_modules: batched by to_module once materialized)
            value.in_dim, value.vmap_level = in_dim, level
            source[key] = value
        elif isinstance(value, torch.Tensor):
            source[key] = _vmap_impl._add_batch_dim(value, in_dim, level)
        elif isinstance(value, NonTensorData):
            source[key] = value._with_batch_size(new_bs + value.batch_size[len(td.batch_size) :])
        elif isinstance(value, NonTensorStack):
            source[key] = value[(slice(None),) * in_dim + (0,)]
        else:
            source[key] = _add_batch_dim_td(value, in_dim, level)
    names = _names_without(td, in_dim)
    return TensorDict._new_unsafe(source, new_bs, td.device, names, lock=td.is_locked)


def _remove_batch_dim_td(td: Any, level: int, batch_size: int, out_dim: int) -> Any:
    """Undo :func:`_add_batch_dim_td`: the vmapped dimension comes back at ``out_dim``."""
    if getattr(type(td), "_is_tensorclass", False):
        inner = _remove_batch_dim_td(td._tensordict, level, batch_size, out_dim)
        return type(td)._from_tensordict(inner, dict(td._non_tensordict))
    if isinstance(td, LazyStackedTensorDict):
        member_dim = out_dim if out_dim <= td.stack_dim else out_dim - 1
        stack_dim = td.stack_dim + 1 if out_dim <= td.stack_dim else td.stack_dim
        members = [_remove_batch_dim_td(m, level, batch_size, member_dim) for m in td.tensordicts]
        return LazyStackedTensorDict(*members, stack_dim=stack_dim)
    if not isinstance(td, TensorDict):
        td = td._apply_leaves(lambda t: t)
    marker = _FROM_LAZY.get(id(td))
    if marker is not None and marker() is td:
        del _FROM_LAZY[id(td)]
        dense = _remove_batch_dim_td(td, level, batch_size, out_dim)
        return LazyStackedTensorDict(*dense.unbind(out_dim), stack_dim=out_dim)
    new_bs = torch.Size(_insert(td.batch_size, out_dim, batch_size))
    source: dict[str, Any] = {}
    for key, value in td._own_items():
        if isinstance(value, torch.Tensor):
            source[key] = _vmap_impl._remove_batch_dim(value, level, batch_size, out_dim)
        elif isinstance(value, NonTensorData):
            source[key] = value._with_batch_size(new_bs + value.batch_size[len(td.batch_size) :])
        elif isinstance(value, NonTensorStack):
            source[key] = value
        else:
            source[key] = _remove_batch_dim_td(value, level, batch_size, out_dim)
    names = td._names_or_none()
    if names is not None:
        names = _insert(names, out_dim, None)
    return TensorDict._new_unsafe(source, new_bs, td.device, names)


def _leaf_shapes(td: Any) -> list[torch.Size]:
    """The shapes of every tensor leaf of a dense tensordict (nested ones included)."""
    shapes: list[torch.Size] = []
    for _, value in td._own_items():
        if isinstance(value, torch.Tensor):
            shapes.append(value.shape)
        elif isinstance(value, TensorDict):
            shapes.extend(_leaf_shapes(value))
    return shapes


def _grown(td: Any, batch_size: torch.Size) -> Any:
    """``td`` (sharing its tensors) with batch size ``batch_size``, a longer one; nested
    tensordicts with fewer batch dims are grown to it as well."""
    source = {
        key: _grown(value, batch_size)
        if isinstance(value, TensorDict) and value.batch_dims < len(batch_size)
        else value
        for key, value in td._own_items()
    }
    names = td._names_or_none()
    if names is not None:
        names = list(names) + [None] * (len(batch_size) - len(names))
    return TensorDict._new_unsafe(source, batch_size, td.device, names, lock=td.is_locked)


def _widen_for_in_dim(arg: Any, in_dim: Any) -> Any:
    """A tensordict vmapped over a dim beyond its batch dims (``jacrev`` builds such ones with
    ``batch_size=[]``) is batched along its leaves' dim, as upstream: its batch size grows to the
    leading dims all its tensors share, if there are enough of them. Otherwise ``arg`` as is."""
    if not isinstance(in_dim, int) or not isinstance(_as_td(arg), TensorDict):
        return arg
    td = _as_td(arg)
    needed = in_dim + 1 if in_dim >= 0 else -in_dim
    if needed <= td.batch_dims:
        return arg
    shapes = _leaf_shapes(td)
    if not shapes or any(len(s) < needed for s in shapes):
        return arg
    if any(s[:needed] != shapes[0][:needed] for s in shapes):
        return arg
    out = _grown(td, torch.Size(shapes[0][:needed]))
    if td is not arg:
        return type(arg)._from_tensordict(out, dict(arg._non_tensordict))
    return out


def _check_in_dim(in_dim: Any, arg: Any, func: Any, in_dims: Any) -> int | None:
    """Validate one input's ``in_dim`` like torch does, for tensors and tensordicts alike."""
    name = _vmap_impl._get_name(func)
    if in_dim is None:
        return None
    if not isinstance(in_dim, int):
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for an input "
            "but in_dim must be either an integer dimension or None."
        )
    if is_tensor_collection(arg):
        ndim = len(arg.batch_size)
        kind = f"tensordict with batch_size={list(arg.batch_size)}"
    elif isinstance(arg, torch.Tensor):
        ndim = arg.dim()
        kind = f"Tensor of dimensionality {ndim}"
    else:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for an input "
            f"but the input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, "
            "please use None as the respective in_dim"
        )
    if not -ndim <= in_dim < ndim:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for some "
            f"input, but that input is a {kind} so expected in_dim to satisfy "
            f"-{ndim} <= in_dim < {ndim}."
        )
    return in_dim % ndim


def _process_batched_inputs(in_dims: Any, args: tuple[Any, ...], func: Any) -> Any:
    with _exclude_td_from_pytree():
        flat_args, args_spec = tree_flatten(args)
        if not any(is_tensor_collection(a) for a in flat_args):
            return _ORIGINAL["_process_batched_inputs"](in_dims, args, func)
        flat_in_dims = _broadcast_to_and_flatten(in_dims, args_spec)
    if flat_in_dims is None:
        raise ValueError(
            f"vmap({_vmap_impl._get_name(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is "
            f"not compatible with the structure of `inputs` ({args_spec})."
        )
    flat_args = [_widen_for_in_dim(a, d) for d, a in zip(flat_in_dims, flat_args)]
    flat_in_dims = [_check_in_dim(d, a, func, in_dims) for d, a in zip(flat_in_dims, flat_args)]
    sizes = [
        (a.batch_size if is_tensor_collection(a) else a.shape)[d]
        for d, a in zip(flat_in_dims, flat_args)
        if d is not None
    ]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension"
        )
    return sizes[0], flat_in_dims, flat_args, args_spec


def _create_batched_inputs(
    flat_in_dims: list[int | None], flat_args: list[Any], vmap_level: int, args_spec: Any
) -> Any:
    if not any(is_tensor_collection(a) for a in flat_args):
        return _ORIGINAL["_create_batched_inputs"](flat_in_dims, flat_args, vmap_level, args_spec)
    batched = []
    for in_dim, arg in zip(flat_in_dims, flat_args):
        if in_dim is None:
            batched.append(arg)
        elif is_tensor_collection(arg):
            batched.append(_add_batch_dim_td(_params_td(arg), in_dim, vmap_level))
        else:
            batched.append(_vmap_impl._add_batch_dim(arg, in_dim, vmap_level))
    with _exclude_td_from_pytree():
        return tree_unflatten(batched, args_spec)


def _params_td(arg: Any) -> Any:
    """A ``TensorDictParams`` is batched through the tensordict it wraps."""
    inner = getattr(arg, "_param_td", None)
    return inner if isinstance(arg, TensorDictBase) and inner is not None else arg


def _flat_out_dims(outputs: Any, out_dims: Any, spec: Any, func: Any) -> list[Any]:
    if isinstance(outputs, torch.Tensor) or is_tensor_collection(outputs):
        if isinstance(out_dims, int) or out_dims is None:
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        flat = None
    else:
        with _exclude_td_from_pytree():
            flat = _broadcast_to_and_flatten(out_dims, spec)
    if flat is None:
        raise ValueError(
            f"vmap({_vmap_impl._get_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims "
            f"is not compatible with the structure of `outputs` ({spec})."
        )
    return flat


def _unwrap_batched(
    batched_outputs: Any, out_dims: Any, vmap_level: int, batch_size: int, func: Any
) -> Any:
    with _exclude_td_from_pytree():
        flat_outputs, spec = tree_flatten(batched_outputs)
    if not any(is_tensor_collection(o) for o in flat_outputs):
        return _ORIGINAL["_unwrap_batched"](batched_outputs, out_dims, vmap_level, batch_size, func)
    flat_out_dims = _flat_out_dims(batched_outputs, out_dims, spec, func)
    name = _vmap_impl._get_name(func)
    unwrapped = []
    for out, out_dim in zip(flat_outputs, flat_out_dims):
        if is_tensor_collection(out) and out_dim is not None:
            out_dim = out_dim % (len(out.batch_size) + 1)
            unwrapped.append(_remove_batch_dim_td(out, vmap_level, batch_size, out_dim))
        elif is_tensor_collection(out):
            unwrapped.append(out)
        else:
            unwrapped.append(
                _vmap_impl._maybe_remove_batch_dim(name, out, vmap_level, batch_size, out_dim)
            )
    with _exclude_td_from_pytree():
        return tree_unflatten(unwrapped, spec)


def install_vmap_support() -> None:
    """Wrap torch's vmap argument handling so that tensordicts can be vmapped (idempotent).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(6.0).reshape(3, 2)}, [3])
        >>> out = torch.vmap(lambda t: t.set("b", t["a"].sum()))(td)
        >>> out.batch_size, out["b"]
        (torch.Size([3]), tensor([1., 5., 9.]))
    """
    if _ORIGINAL:
        return
    for name, fn in (
        ("_process_batched_inputs", _process_batched_inputs),
        ("_create_batched_inputs", _create_batched_inputs),
        ("_unwrap_batched", _unwrap_batched),
    ):
        _ORIGINAL[name] = getattr(_vmap_impl, name)
        setattr(_vmap_impl, name, fn)
