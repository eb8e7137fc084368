"""from_module / from_modules / to_module, and to_module under torch.vmap."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tensordict
from tensordict import TensorDict
from tensordict.nn import TensorDictParams


def net() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.BatchNorm1d(3))


def test_from_module_holds_the_module_tensors_in_its_structure():
    module = net()
    params = TensorDict.from_module(module)
    assert sorted(params.keys()) == ["0", "2"]  # the ReLU has no tensors: left out
    assert params["0", "weight"] is module[0].weight
    assert params["2", "running_mean"] is module[2].running_mean
    assert not params.is_locked


def test_from_module_keeps_empty_submodules_on_request():
    params = TensorDict.from_module(net(), filter_empty=False)
    assert sorted(params.keys()) == ["0", "1", "2"]
    assert params["1"].is_empty()


def test_top_level_from_module_locks_by_default():
    assert tensordict.from_module(net()).is_locked
    assert not tensordict.from_module(net(), lock=False).is_locked


def test_from_module_as_module_gives_params():
    params = TensorDict.from_module(net(), as_module=True)
    assert isinstance(params, TensorDictParams)
    assert isinstance(params["0", "weight"], nn.Parameter)
    assert not isinstance(params["2", "running_mean"], nn.Parameter)


def test_from_module_with_state_dict_detaches():
    module = net()
    params = TensorDict.from_module(module, use_state_dict=True)
    assert params["0", "weight"] is not module[0].weight
    assert torch.equal(params["0", "weight"], module[0].weight)


def test_from_modules_stacks_new_leaf_parameters():
    a, b = nn.Linear(3, 4), nn.Linear(3, 4)
    params = TensorDict.from_modules(a, b)
    assert params.batch_size == torch.Size([2])
    assert params.is_locked
    weight = params["weight"]
    assert isinstance(weight, nn.Parameter) and weight.is_leaf
    assert torch.equal(weight[1], b.weight)


def test_from_modules_expand_identical_shares_storage():
    shared = nn.Linear(3, 4)
    params = TensorDict.from_modules(shared, shared, expand_identical=True)
    assert params["weight"].stride(0) == 0


def test_from_modules_without_modules_raises():
    with pytest.raises(ValueError, match="at least one module"):
        TensorDict.from_modules()


def test_to_module_swaps_and_returns_the_old_tensors():
    module = nn.Linear(2, 2)
    old_weight = module.weight
    zeros = TensorDict.from_module(module).data.clone().zero_()
    swap = zeros.to_module(module)
    assert swap["weight"] is old_weight
    assert (module.weight == 0).all()
    # preserve_module_state (default): still a registered parameter
    assert isinstance(module.weight, nn.Parameter)
    assert set(module.state_dict()) == {"weight", "bias"}
    swap.to_module(module)
    assert module.weight is old_weight


def test_to_module_as_context_manager_restores_on_exit():
    module = nn.Linear(2, 2)
    old = TensorDict.from_module(module)
    zeros = old.data.clone().zero_()
    with zeros.to_module(module):
        assert (module(torch.ones(2)) == 0).all()
    assert module.weight is old["weight"]
    assert module.bias is old["bias"]


def test_to_module_restores_even_when_the_block_raises():
    module = nn.Linear(2, 2)
    weight = module.weight
    zeros = TensorDict.from_module(module).data.clone().zero_()
    with pytest.raises(ZeroDivisionError), zeros.to_module(module):
        raise ZeroDivisionError
    assert module.weight is weight


def test_to_module_tensor_with_history_lets_gradients_through():
    module = nn.Linear(2, 1, bias=False)
    source = torch.ones(1, 2, requires_grad=True)
    with TensorDict(weight=source * 3).to_module(module):
        module(torch.ones(2)).sum().backward()
    assert torch.equal(source.grad, torch.full((1, 2), 3.0))


def test_to_module_without_preserving_state_holds_plain_tensors():
    module = nn.Linear(2, 2)
    params = TensorDict.from_module(module).data.clone()
    params.to_module(module, preserve_module_state=False)
    assert not isinstance(module.weight, nn.Parameter)
    assert "weight" not in module.state_dict()
    assert [n for n, _ in module.named_parameters()] == []


def test_to_module_registers_a_tensor_with_history_as_a_parameter_slot():
    # the state dict keeps its keys, and gradients still reach the source (as upstream)
    module = nn.Linear(2, 1, bias=False)
    source = torch.ones(1, 2, requires_grad=True)
    TensorDict(weight=source * 2).to_module(module)
    assert "weight" in module._parameters and module.weight.grad_fn is not None
    assert list(module.state_dict()) == ["weight"]
    module(torch.ones(2)).sum().backward()
    assert torch.equal(source.grad, torch.full((1, 2), 2.0))


def test_to_module_without_preserving_state_plain_tensors_are_attributes():
    module = nn.Linear(2, 2)
    TensorDict.from_module(module).data.clone().to_module(module, preserve_module_state=False)
    assert "weight" in module.__dict__
    assert TensorDict.from_module(module).is_empty()
    # the restored parameters are registered again
    module2 = nn.Linear(2, 2)
    weight = module2.weight
    with (
        TensorDict.from_module(module2).data.clone().to_module(module2, preserve_module_state=False)
    ):
        assert "weight" not in module2._parameters
    assert module2._parameters["weight"] is weight and "weight" not in module2.__dict__


def test_to_module_keeps_a_non_persistent_buffer_out_of_the_state_dict():
    module = nn.Module()
    module.register_buffer("buf", torch.ones(3), persistent=False)
    TensorDict(buf=torch.zeros(3)).to_module(module)
    assert module.buf.sum() == 0
    assert "buf" not in module.state_dict()


def test_to_module_keeps_buffers_buffers():
    module = nn.Module()
    module.register_buffer("buf", torch.ones(3))
    TensorDict(buf=nn.Parameter(torch.zeros(3))).to_module(module)
    assert "buf" in dict(module.named_buffers())
    assert not isinstance(module.buf, nn.Parameter)


def test_to_module_inplace_copies_into_the_module_tensors():
    module = nn.Linear(2, 2)
    weight = module.weight
    before = weight.detach().clone()
    zeros = TensorDict.from_module(module).data.clone().zero_()
    with zeros.to_module(module, inplace=True):
        assert module.weight is weight
        assert (weight == 0).all()
    assert torch.equal(weight, before)


def test_to_module_shared_layer_is_restored_once():
    layer = nn.Linear(2, 2)
    module = nn.Sequential(layer, nn.Sequential(layer))
    weight = layer.weight
    params = TensorDict.from_module(module).data.clone().zero_()
    with params.to_module(module, preserve_module_state=False):
        assert (layer.weight == 0).all()
    assert layer.weight is weight


def test_to_module_unknown_submodule_raises_key_error():
    with pytest.raises(KeyError, match="no submodule 'missing'"):
        TensorDict({"missing": {"w": torch.zeros(1)}}).to_module(nn.Linear(1, 1))


def test_to_module_return_swap_false_returns_none():
    module = nn.Linear(2, 2)
    assert TensorDict.from_module(module).to_module(module, return_swap=False) is None


def test_to_module_into_a_params_module_swaps_its_tensors():
    params = TensorDict.from_module(nn.Linear(2, 2), as_module=True)
    zeros = params.data.clone().zero_()
    with zeros.to_module(params):
        assert (params["weight"] == 0).all()
    assert not (params["weight"] == 0).all()


def test_from_module_sees_a_params_submodule_as_nested_entries():
    holder = nn.Module()
    holder.params = TensorDict.from_module(nn.Linear(2, 2), as_module=True)
    params = TensorDict.from_module(holder)
    assert params["params", "weight"] is holder.params["weight"]


def test_vmap_over_stacked_parameters_runs_each_copy():
    copies = [nn.Linear(3, 2) for _ in range(4)]
    params = TensorDict.from_modules(*copies, as_module=True)
    template = nn.Linear(3, 2)

    def call(p, x):
        with p.to_module(template, preserve_module_state=False):
            return template(x)

    x = torch.randn(5, 3)
    out = torch.vmap(call, (0, None))(params, x)
    assert out.shape == (4, 5, 2)
    torch.testing.assert_close(out[2], copies[2](x))
    out.sum().backward()
    assert params["weight"].grad.shape == (4, 2, 3)
    # the template got its own parameters back
    assert isinstance(template.weight, nn.Parameter)


def test_reset_parameters_recursive_writes_into_a_copy():
    from tensordict.nn import TensorDictModule

    module = TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"])
    params = TensorDict.from_module(module)
    before = params.data.clone()
    fresh = module.reset_parameters_recursive(params.data.clone())
    assert not (fresh == before).all()
    assert (TensorDict.from_module(module) == before).all()


@pytest.mark.parametrize("as_module", [False, True])
def test_from_modules_expand_identical_keeps_the_shared_parameter_in_the_graph(as_module):
    shared = nn.Linear(3, 3)
    modules = [nn.Sequential(shared, nn.Linear(3, 4)) for _ in range(2)]
    params = TensorDict.from_modules(*modules, as_module=as_module, expand_identical=True)
    weight = params["0", "weight"]
    assert not isinstance(weight, nn.Parameter)
    assert weight.data_ptr() == shared.weight.data_ptr()
    weight.sum().backward()
    assert torch.equal(shared.weight.grad, torch.full((3, 3), 2.0))


def test_from_modules_refuses_lazy_stack_with_as_module_or_lazy_modules():
    from tensordict.errors import FromModulesError

    with pytest.raises(RuntimeError, match="within a TensorDictParams"):
        TensorDict.from_modules(nn.Linear(2, 2), nn.Linear(2, 2), as_module=True, lazy_stack=True)
    with pytest.raises(FromModulesError, match="not compatible with lazy modules"):
        TensorDict.from_modules(nn.LazyLinear(2), nn.LazyLinear(2), lazy_stack=True)


def test_from_modules_of_lazy_modules_gives_batched_uninitialized_parameters():
    from torch.nn.parameter import UninitializedTensorMixin

    params = TensorDict.from_modules(*(nn.LazyLinear(4) for _ in range(3)))
    assert params.batch_size == (3,)
    assert all(isinstance(v, UninitializedTensorMixin) for v in params.values())
    with pytest.raises(RuntimeError, match="not compatible with lazy modules"):
        TensorDict.from_modules(nn.LazyLinear(4), nn.LazyLinear(4), lazy_stack=True)


def test_a_vmapped_call_materializes_them_with_the_batch_dims_and_trains_them():
    modules = [nn.LazyLinear(4) for _ in range(3)]
    params = TensorDict.from_modules(*modules)
    optim = torch.optim.SGD(list(params.values(True, True)), lr=0.1)
    empty = nn.LazyLinear(4, device="meta")

    def call(p, x):
        with p.to_module(empty, preserve_module_state=False):
            return empty(x)

    y = torch.vmap(call, (0, None), randomness="same")(params, torch.ones(2))
    assert y.shape == (3, 4)
    assert type(params["weight"]) is nn.Parameter and params["weight"].shape == (3, 4, 2)
    before = params["weight"].detach().clone()
    bias = params["bias"].detach().clone()
    y.sum().backward()
    optim.step()
    assert params["weight"].grad is not None and not torch.equal(params["weight"], before)
    assert all(p.grad is None for p in modules[0].parameters())
    # each row is one module's: row k of y uses weight[k]
    expected = torch.einsum("koi,i->ko", before, torch.ones(2)) + bias
    assert torch.allclose(y.detach(), expected)
