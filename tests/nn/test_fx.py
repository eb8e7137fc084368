"""symbolic_trace (tensordict.prototype.fx): a tensordict module as one torch.fx graph."""

from __future__ import annotations

import pytest
import torch
from torch import fx, nn

from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    TensorDictModule,
    TensorDictSequential,
)
from tensordict.prototype.fx import TDGraphModule, symbolic_trace


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.linear(x)
        return logits, logits.sigmoid()


def test_traced_module_writes_the_same_outputs_at_nested_keys():
    module = TensorDictModule(TwoHeads(), ["x"], [("out", "logits"), ("out", "probs")])
    graph_module = symbolic_trace(module)
    assert isinstance(graph_module, TDGraphModule)
    assert isinstance(graph_module.graph, fx.Graph)
    td = TensorDict(x=torch.randn(4, 3), batch_size=[4])
    expected = module(td.clone(), tensordict_out=TensorDict())
    got = graph_module(td, tensordict_out=TensorDict())
    assert set(got.keys(True, True)) == {("out", "logits"), ("out", "probs")}
    assert torch.equal(got["out", "probs"], expected["out", "probs"])
    # without tensordict_out, the input tensordict receives the outputs
    assert graph_module(td) is td and ("out", "logits") in td.keys(True, True)


def test_nested_sequences_are_flattened_and_later_writes_win():
    first = TensorDictModule(nn.Linear(3, 5), ["x"], ["h"])
    second = TensorDictModule(nn.Tanh(), ["h"], ["h"])
    third = TensorDictModule(nn.Linear(5, 1), [("h")], [("y", "value")])
    seq = TensorDictSequential(TensorDictSequential(first, second), third)
    graph_module = symbolic_trace(seq)
    td = TensorDict(x=torch.randn(2, 3), batch_size=[2])
    expected = seq(td.clone())
    got = graph_module(td.clone())
    assert torch.equal(got["h"], expected["h"]) and got["h"].abs().max() <= 1
    assert torch.equal(got["y", "value"], expected["y", "value"])
    # the input key is read from the tensordict once, the intermediate is passed along
    reads = [n for n in graph_module.graph.nodes if n.op == "call_function"]
    assert len(reads) == 1


def test_tracing_a_probabilistic_module_is_refused_clearly():
    module = ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"], out_keys=["sample"], distribution_class=torch.distributions.Normal
    )
    with pytest.raises(TypeError, match="TensorDictModule"):
        symbolic_trace(module)


def test_sequence_writes_nested_outputs_into_an_empty_tensordict_out():
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), [("in", "x")], [("mid", "x")]),
        TensorDictModule(nn.ReLU(), [("mid", "x")], [("out", "p")]),
    )
    td = TensorDict({"in": {"x": torch.randn(2, 3)}}, [2])
    out = TensorDict()
    assert seq(td, tensordict_out=out) is out
    assert set(out.keys(True, True)) == {("mid", "x"), ("out", "p")}
    assert set(td.keys(True, True)) == {("in", "x")}
