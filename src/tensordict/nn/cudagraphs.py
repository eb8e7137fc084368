"""CudaGraphModule: record a module's CUDA kernels once, replay them on new inputs.

On a machine without CUDA (as here) the module runs eagerly at every call, with the same
interface: this is how upstream behaves on CPU too.

The CUDA path (documented, untested here):

1. the first ``warmup`` calls run eagerly on a side stream (kernels and allocators settle);
2. the next call clones the inputs into static buffers and captures the module's kernels in a
   ``torch.cuda.CUDAGraph``;
3. later calls copy their inputs into the static buffers, replay the graph and return a clone
   of the static outputs. Shapes, devices and the set of input keys must stay those of the
   capture.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.keys import NestedKey, leaf_or_non_tensor
from tensordict.nn.keyword_dispatch import dispatch

__all__ = ["CudaGraphModule"]


class CudaGraphModule:
    """Wrap a module (tensordict module or tensor function) to replay it as a CUDA graph.

    Args:
        module: the module or function.
        warmup: eager calls before capture (>= 1). Defaults to 2.
        in_keys, out_keys: the keys, for a callable that has none (a tensordict module's own
            keys win).
        device: the CUDA device of the streams.

    Raises:
        ValueError: ``warmup`` is not a positive int.

    Examples:
        >>> import torch, warnings
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")  # no CUDA here: runs eagerly
        ...     graphed = CudaGraphModule(module)
        >>> graphed(TensorDict(x=torch.zeros(2)))["y"]
        tensor([1., 1.])
    """

    _REQUIRES_GRAD_ERROR = (
        "CudaGraphModule cannot be part of a graph (or leaves variables). If you need tensors to "
        "require gradients, pass them as constant inputs to the module instead."
    )

    def __init__(
        self,
        module: Callable[..., Any],
        warmup: int = 2,
        in_keys: list[NestedKey] | None = None,
        out_keys: list[NestedKey] | None = None,
        device: torch.device | None = None,
    ) -> None:
        if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 1:
            raise ValueError(f"warmup must be an integer greater than 0, got {warmup!r}.")
        self._has_cuda = torch.cuda.is_available()
        if not self._has_cuda:
            warnings.warn(
                "This module is instantiated on a machine without CUDA device available. We "
                "permit this usage, but calls to this instance will just pass through it and "
                "execute the provided function without additional performance gain.",
                stacklevel=2,
            )
        self.module = module
        self.counter = 0
        self._warmup = warmup
        self.device = device
        self.in_keys = getattr(module, "in_keys", in_keys)
        self.out_keys = getattr(
            module,
            "out_keys",
            out_keys if out_keys is not None else ([] if self.in_keys is not None else None),
        )
        self._is_tensordict_module = self.in_keys is not None
        self.graph: Any = None
        self._static_in: Any = None
        self._static_out: Any = None
        if self._has_cuda:
            self._warmup_stream = torch.cuda.Stream(device)
        if self._is_tensordict_module:
            keys_in: list[Any] = list(self.in_keys or [])
            keys_out: list[Any] = list(self.out_keys or [])
            wrap = dispatch(source=keys_in, dest=keys_out, auto_batch_size=False)
            self._call = wrap(self._call_td)
        else:
            self._call = self._call_tensors

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        module = self.__dict__.get("module")
        if module is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(module, name)

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(module={self.module}, warmup={self._warmup}, counter={self.counter})"

    # ------------------------------------------------------------------ tensordict modules
    def _call_td(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> Any:
        if not self._has_cuda:
            return self.module(tensordict, *args, **kwargs)
        if self.counter < self._warmup:
            self.counter += 1
            return self._eager(tensordict, *args, **kwargs)
        if self.graph is None:
            return self._capture_td(tensordict, *args, **kwargs)
        if tensordict.batch_size != self._static_in.batch_size:
            raise ValueError(
                f"{type(self).__name__} was captured with batch_size={self._static_in.batch_size} "
                f"but got batch_size={tensordict.batch_size}. CUDA graphs replay fixed shapes."
            )
        self._static_in.update_(
            tensordict.select(
                *self._static_in.keys(True, True, is_leaf=leaf_or_non_tensor), strict=False
            )
        )
        self.graph.replay()
        out = self._static_out
        return out.clone() if is_tensor_collection(out) else out

    def _eager(self, *args: Any, **kwargs: Any) -> Any:
        self._warmup_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._warmup_stream):
            out = self.module(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(self._warmup_stream)
        return out

    def _capture_td(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> Any:
        if any(
            t.requires_grad
            for t in tensordict.values(True, True, is_leaf=leaf_or_non_tensor)
            if isinstance(t, torch.Tensor)
        ):
            raise RuntimeError(self._REQUIRES_GRAD_ERROR)
        self._static_in = tensordict.clone()
        torch.cuda.synchronize(self.device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            out = self.module(self._static_in, *args, **kwargs)
        if out is not None and not is_tensor_collection(out):
            raise RuntimeError(
                "The output of the function must be a tensordict, a tensorclass or None. Got "
                f"{type(out)}."
            )
        self._static_out = out
        self.counter += 1
        return self._call_td(tensordict, *args, **kwargs)

    # ------------------------------------------------------------------ tensor functions
    def _call_tensors(self, *args: Any, **kwargs: Any) -> Any:
        if not self._has_cuda:
            return self.module(*args, **kwargs)
        if self.counter < self._warmup:
            self.counter += 1
            return self._eager(*args, **kwargs)
        flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))
        if self.graph is None:
            self._static_in = [t.clone() if isinstance(t, torch.Tensor) else t for t in flat]
            s_args, s_kwargs = torch.utils._pytree.tree_unflatten(self._static_in, spec)
            torch.cuda.synchronize(self.device)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._static_out = self.module(*s_args, **s_kwargs)
            self.counter += 1
        for src, dest in zip(flat, self._static_in):
            if isinstance(dest, torch.Tensor):
                dest.copy_(src)
        self.graph.replay()
        return torch.utils._pytree.tree_map(
            lambda t: t.clone() if isinstance(t, torch.Tensor) else t, self._static_out
        )
