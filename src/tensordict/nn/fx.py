"""``symbolic_trace``: a tensordict module as one ``torch.fx`` graph (``tensordict.prototype.fx``).

The graph takes the tensordict as its only input. It reads each input key once (``td[key]``),
calls the traced ``nn.Module`` of every :class:`~tensordict.nn.TensorDictModule` in execution
order (a :class:`~tensordict.nn.TensorDictSequential` is flattened), feeds the values a module
writes to the modules after it without going through the tensordict, and returns one tensor per
output key. :class:`TDGraphModule` runs that graph and writes the tensors at the output keys.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

from torch import fx, nn

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.keys import NestedKey, unravel_key_to_tuple
from tensordict.nn.common import TensorDictModule, TensorDictModuleBase
from tensordict.nn.sequence import TensorDictSequential

__all__ = ["TDGraphModule", "symbolic_trace"]


class TDGraphModule(nn.Module):
    """What :func:`symbolic_trace` returns: an FX graph that reads and writes a tensordict.

    Calling it reads the input keys from ``tensordict``, runs the graph and writes the results at
    ``out_keys`` into ``tensordict_out`` (the input tensordict when None), which it returns.
    ``graph`` and ``code`` are those of the underlying :class:`torch.fx.GraphModule`.

    Args:
        graph_module: the traced graph (input: the tensordict; output: a tuple of tensors).
        out_keys: where the outputs are written, in the order of the graph's outputs.
    """

    def __init__(self, graph_module: fx.GraphModule, out_keys: list[NestedKey]) -> None:
        super().__init__()
        self._gm = graph_module
        self.out_keys = [unravel_key_to_tuple(key) for key in out_keys]

    def forward(
        self, tensordict: TensorDictBase, tensordict_out: TensorDictBase | None = None
    ) -> TensorDictBase:
        outputs = self._gm(tensordict)
        dest = tensordict if tensordict_out is None else tensordict_out
        for key, value in zip(self.out_keys, outputs, strict=True):
            dest.set(key, value)
        return dest

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("_gm"), name)


def _steps(module: nn.Module) -> Iterator[TensorDictModule]:
    if isinstance(module, TensorDictSequential):
        for child in module.module:
            yield from _steps(child)
    elif isinstance(module, TensorDictModule) and getattr(module, "_kwargs", None) is None:
        yield module
    else:
        raise TypeError(
            "symbolic_trace traces TensorDictModule (with a list of in_keys) and "
            f"TensorDictSequential of them, got {type(module).__name__}. Trace its inner "
            "nn.Module with torch.fx.symbolic_trace instead."
        )


def _returns_tuple(traced: fx.GraphModule) -> bool:
    output = next(node for node in traced.graph.nodes if node.op == "output")
    return isinstance(output.args[0], (tuple, list))


def symbolic_trace(td_module: TensorDictModuleBase) -> TDGraphModule:
    """Trace a :class:`~tensordict.nn.TensorDictModule` or a sequence of them with ``torch.fx``.

    Raises:
        TypeError: a module that is not a TensorDictModule / TensorDictSequential.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> from tensordict.prototype.fx import symbolic_trace
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(nn.Linear(3, 4), ["x"], ["h"]),
        ...     TensorDictModule(nn.ReLU(), ["h"], ["y"]),
        ... )
        >>> graph_module = symbolic_trace(seq)
        >>> out = graph_module(TensorDict(x=torch.randn(2, 3), batch_size=[2]))
        >>> sorted(out.keys()), bool((out["y"] >= 0).all())
        (['h', 'x', 'y'], True)
    """
    root = nn.Module()
    graph = fx.Graph()
    tensordict = graph.placeholder("tensordict")
    values: dict[tuple[str, ...], fx.Node] = {}
    for index, step in enumerate(_steps(td_module)):
        traced = fx.symbolic_trace(step.module)
        name = f"module_{index}"
        root.add_module(name, traced)
        args = []
        for key in step.in_keys:
            path = unravel_key_to_tuple(key)
            if path not in values:
                values[path] = graph.call_function(operator.getitem, (tensordict, path))
            args.append(values[path])
        result = graph.call_module(name, tuple(args))
        outs = (
            [graph.call_function(operator.getitem, (result, i)) for i in range(len(step.out_keys))]
            if _returns_tuple(traced)
            else [result]
        )
        for key, node in zip(step.out_keys, outs, strict=False):
            values[unravel_key_to_tuple(key)] = node
    out_keys = [key for key in td_module.out_keys if unravel_key_to_tuple(key) in values]
    graph.output(tuple(values[unravel_key_to_tuple(key)] for key in out_keys))
    return TDGraphModule(fx.GraphModule(root, graph), out_keys)
