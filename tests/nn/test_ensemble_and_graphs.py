"""EnsembleModule, CudaGraphModule (eager without CUDA) and tensorclass-typed modules."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from tensordict import TensorClass, TensorDict
from tensordict.nn import (
    CudaGraphModule,
    EnsembleModule,
    TensorClassModuleBase,
    TensorDictModule,
    TensorDictSequential,
)


def linear_module() -> TensorDictModule:
    return TensorDictModule(nn.Linear(2, 3), in_keys=["x"], out_keys=["y"])


def test_ensemble_copies_are_initialised_apart():
    torch.manual_seed(0)
    ensemble = EnsembleModule(linear_module(), num_copies=3)
    weights = ensemble.params_td["module", "weight"]
    assert weights.shape == (3, 3, 2)
    assert not torch.allclose(weights[0], weights[1])


def test_ensemble_outputs_gain_an_ensemble_dimension_and_train():
    ensemble = EnsembleModule(linear_module(), num_copies=3)
    out = ensemble(TensorDict(x=torch.randn(5, 2), batch_size=[5]))
    assert out["y"].shape == (3, 5, 3)
    out["y"].sum().backward()
    assert ensemble.params_td["module", "weight"].grad.shape == (3, 3, 2)


def test_chained_ensembles_map_copy_to_copy():
    first = EnsembleModule(linear_module(), num_copies=2)
    second = EnsembleModule(
        TensorDictModule(nn.Linear(3, 1), in_keys=["y"], out_keys=["z"]),
        num_copies=2,
        expand_input=False,
    )
    out = TensorDictSequential(first, second)(TensorDict(x=torch.randn(4, 2), batch_size=[4]))
    assert out["z"].shape == (2, 4, 1)


def test_ensemble_needs_parameters_to_reset():
    ensemble = EnsembleModule(linear_module(), num_copies=2)
    with pytest.raises(ValueError, match="functional"):
        ensemble.reset_parameters_recursive()


def test_cuda_graph_module_runs_eagerly_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("the eager path is the one without CUDA")
    with pytest.warns(UserWarning, match="without CUDA"):
        graphed = CudaGraphModule(linear_module(), warmup=1)
    assert graphed.in_keys == ["x"]
    for _ in range(3):
        out = graphed(TensorDict(x=torch.ones(2)))
        assert out["y"].shape == (3,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doubled = CudaGraphModule(lambda t: t * 2)
    assert torch.equal(doubled(torch.ones(2)), torch.full((2,), 2.0))


def test_cuda_graph_module_rejects_a_bad_warmup():
    with pytest.raises(ValueError, match="warmup"):
        CudaGraphModule(linear_module(), warmup=0)


class Pair(TensorClass):
    a: torch.Tensor
    b: torch.Tensor


class Sums(TensorClass):
    plus: torch.Tensor
    minus: torch.Tensor


class Nested(TensorClass):
    inputs: Pair
    result: Sums


class AddSub(TensorClassModuleBase[Pair, Sums]):
    def forward(self, x: Pair) -> Sums:
        return Sums(plus=x.a + x.b, minus=x.a - x.b, batch_size=x.batch_size)


class Both(TensorClassModuleBase[Pair, Nested]):
    def __init__(self) -> None:
        super().__init__()
        self.inner = AddSub()

    def forward(self, x: Pair) -> Nested:
        return Nested(inputs=x, result=self.inner(x), batch_size=x.batch_size)


def test_tensorclass_module_types_and_tensordict_form():
    assert AddSub.input_type is Pair and AddSub.output_type is Sums
    out = AddSub()(Pair(a=torch.ones(2), b=torch.ones(2), batch_size=[2]))
    assert torch.equal(out.plus, torch.full((2,), 2.0))
    wrapper = Both().as_td_module()
    assert set(wrapper.in_keys) == {"a", "b"}
    assert ("result", "minus") in wrapper.out_keys
    td = wrapper(TensorDict(a=torch.ones(1), b=torch.ones(1), batch_size=[1]))
    assert td["result", "minus"] == 0


def test_tensor_typed_modules_cannot_become_tensordict_modules():
    class Plain(TensorClassModuleBase[torch.Tensor, torch.Tensor]):
        def forward(self, x):
            return x

    with pytest.raises(ValueError, match="both input and output type as TensorClass"):
        Plain().as_td_module()


def test_cuda_graph_module_records_whether_a_function_returns_its_input() -> None:
    def in_place(td: TensorDict) -> TensorDict:
        return td.set("y", td["x"] + 1)

    def copying(td: TensorDict) -> TensorDict:
        return td.copy().set("y", td["x"] + 1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no CUDA here: runs eagerly
        same = CudaGraphModule(in_place, in_keys=[], out_keys=[])
        other = CudaGraphModule(copying, in_keys=[], out_keys=[])
    assert same._out_matches_in is None and other._out_matches_in is None
    same(TensorDict(x=torch.zeros(())))
    other(TensorDict(x=torch.zeros(())))
    assert same._out_matches_in is True and other._out_matches_in is False
