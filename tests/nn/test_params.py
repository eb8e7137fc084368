"""TensorDictParams: the tensordict's tensors are the module's parameters and buffers."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn

from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictParams


def make_params() -> TensorDictParams:
    td = TensorDict(
        {"a": torch.zeros(3), "b": {"c": torch.ones(3, 2)}, "i": torch.zeros(3, dtype=torch.long)},
        [3],
    )
    return TensorDictParams(td)


def test_is_a_tensordict_and_a_module():
    params = make_params()
    assert isinstance(params, TensorDictBase)
    assert isinstance(params, nn.Module)
    assert params.batch_size == torch.Size([3])


def test_float_tensors_become_parameters_and_others_buffers():
    params = make_params()
    assert isinstance(params["a"], nn.Parameter)
    assert isinstance(params["b", "c"], nn.Parameter)
    assert not isinstance(params["i"], nn.Parameter)
    assert [n for n, _ in params.named_parameters()] == ["a", "b.c"]
    assert [n for n, _ in params.named_buffers()] == ["i"]


def test_the_given_tensordict_shares_the_parameters():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    params = TensorDictParams(td)
    assert td["a"] is params["a"]


def test_parameters_registered_in_an_enclosing_module():
    module = nn.Module()
    module.params = make_params()
    assert [n for n, _ in module.named_parameters()] == ["params.a", "params.b.c"]
    assert list(module.state_dict()) == ["params.a", "params.b.c", "params.i"]


def test_written_tensors_are_registered():
    params = make_params()
    params["new"] = torch.zeros(3)
    params["nested", "x"] = torch.zeros(3)
    names = [n for n, _ in params.named_parameters()]
    assert "new" in names and "nested.x" in names
    del params["new"]
    assert "new" not in [n for n, _ in params.named_parameters()]


def test_no_convert_keeps_plain_tensors_as_buffers():
    params = TensorDictParams(TensorDict(a=torch.zeros(2)), no_convert=True)
    params["p"] = nn.Parameter(torch.zeros(2))
    assert [n for n, _ in params.named_buffers()] == ["a"]
    assert [n for n, _ in params.named_parameters()] == ["p"]


def test_buffer_marked_tensor_stays_a_buffer():
    params = TensorDictParams(TensorDict(a=torch.zeros(2)))
    params["b"] = nn.Buffer(torch.zeros(2))
    assert [n for n, _ in params.named_buffers()] == ["b"]


def test_dict_and_keyword_construction():
    from_dict = TensorDictParams({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}})
    from_kwargs = TensorDictParams(a=torch.zeros(2))
    assert isinstance(from_dict["b", "c"], nn.Parameter)
    assert isinstance(from_kwargs["a"], nn.Parameter)


def test_bad_input_type_raises_type_error():
    with pytest.raises(TypeError, match="tensordict or a dict"):
        TensorDictParams([torch.zeros(2)])  # type: ignore[arg-type]


def test_storing_itself_raises():
    params = make_params()
    with pytest.raises(ValueError, match="inside itself"):
        params["me"] = params


def test_state_dict_round_trip():
    params = make_params()
    state = {k: v + 1 for k, v in params.state_dict().items()}
    params.load_state_dict(state)
    assert (params["a"] == 1).all()
    assert isinstance(params["a"], nn.Parameter)


def test_load_state_dict_accepts_nested_mapping():
    params = make_params()
    params.load_state_dict({"a": torch.ones(3), "b": {"c": torch.zeros(3, 2)}, "i": torch.ones(3)})
    assert (params["b", "c"] == 0).all()
    assert (params["i"] == 1).all()


def test_module_conversion_keeps_parameter_identity():
    module = nn.Module()
    module.params = make_params()
    weight = module.params["a"]
    module.double()
    assert module.params["a"] is weight
    assert weight.dtype == torch.float64
    assert module.params["i"].dtype == torch.int64


def test_module_conversion_keeps_buffer_identity():
    # TorchRL's LossModule test_module_cast compares the leaves' identities before/after .to()
    td = TensorDict({"w": nn.Parameter(torch.zeros(3)), "buf": torch.ones(3)}, [])
    td["n", "q"] = torch.ones(2).expand(2, 2)  # an expanded buffer too
    module = nn.Module()
    module.params = TensorDictParams(td, no_convert=True)
    before = dict(module.params.items(True, True))
    module.to(torch.float64)
    after = dict(module.params.items(True, True))
    assert all(after[k] is before[k] for k in before)
    assert all(v.dtype == torch.float64 for v in after.values())
    assert {id(b) for b in module.buffers()} == {id(before["buf"]), id(before["n", "q"])}


def test_optimizer_step_updates_the_tensordict():
    params = make_params()
    optim = torch.optim.SGD(params.parameters(), lr=1.0)
    (params["a"].sum() + params["b", "c"].sum()).backward()
    optim.step()
    assert (params["a"] == -1).all()


def test_in_place_data_writes_run_without_autograd():
    params = make_params()
    params.zero_()
    params.apply_(lambda x: x + 2)
    params.update_({"a": torch.full((3,), 5.0)})
    assert (params["b", "c"] == 2).all()
    assert (params["a"] == 5).all()
    assert isinstance(params["a"], nn.Parameter)


def test_clone_makes_new_leaf_parameters():
    params = make_params()
    cloned = params.clone()
    assert isinstance(cloned, TensorDictParams)
    assert cloned["a"] is not params["a"]
    assert isinstance(cloned["a"], nn.Parameter) and cloned["a"].is_leaf
    shallow = params.clone(recurse=False)
    assert shallow["a"] is params["a"]


def test_results_of_tensordict_operations_are_plain_tensordicts():
    params = make_params()
    assert type(params.apply(lambda x: x * 2)) is TensorDict
    assert type(params[:2]) is TensorDict
    assert type(params.select("a")) is TensorDict
    assert not params.data["a"].requires_grad


def test_to_dtype_returns_params_of_the_new_dtype():
    moved = make_params().to(torch.float64)
    assert isinstance(moved, TensorDictParams)
    assert isinstance(moved["a"], nn.Parameter)
    assert moved["a"].dtype == torch.float64


def test_grad_collects_the_gradients():
    params = make_params()
    params["a"].sum().backward()
    grads = params.grad
    assert (grads["a"] == 1).all()
    assert "b" not in grads.keys()  # noqa: SIM118 (`in td` is ambiguous)


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda p: pickle.loads(pickle.dumps(p))])
def test_copies_keep_parameters_registered(copier):
    params = make_params()
    other = copier(params)
    assert isinstance(other, TensorDictParams)
    assert other["a"] is not params["a"]
    assert [n for n, _ in other.named_parameters()] == ["a", "b.c"]


def test_enclosing_module_load_state_dict_reaches_nested_parameters():
    module = nn.Module()
    module.params = make_params()
    state = {k: torch.full_like(v, 7) for k, v in module.state_dict().items()}
    module.load_state_dict(state)
    assert (module.params["b", "c"] == 7).all()
    with pytest.raises(RuntimeError, match="Unexpected"):
        module.load_state_dict({**state, "params.zz": torch.zeros(1)})


def test_attributes_of_the_dense_class_are_read_from_the_wrapped_tensordict():
    params = make_params()
    assert params._tensordict is params._param_td._tensordict
    with pytest.raises(AttributeError):
        _ = params.no_such_attribute


def test_in_place_apply_with_autograd_is_refused_with_a_hint():
    from tensordict.errors import ParamsWriteError

    params = make_params()
    with pytest.raises(ParamsWriteError, match="Failed to update"):
        params.apply(lambda x: x + 1, inplace=True)
    assert (params["a"] == 0).all()


def test_memmap_in_place_is_refused(tmp_path):
    from tensordict.errors import MemmapParamsError

    with pytest.raises(MemmapParamsError, match="Cannot build a memmap TensorDict in-place"):
        make_params().memmap_(tmp_path)


def test_get_post_hook_applies_to_every_read_of_a_tensor():
    params = make_params()
    seen: list[torch.Size] = []

    def hook(owner: TensorDictParams, tensor: torch.Tensor) -> torch.Tensor:
        assert owner is params
        seen.append(tensor.shape)
        return tensor.data

    params.register_get_post_hook(hook)
    reads = [
        params["a"],
        params.get(("b", "c")),
        params["b", "c"],
        *params.values(True, True),
        *(value for _, value in params.items(True, True)),
    ]
    assert all(not t.requires_grad for t in reads)
    assert len(seen) == len(reads)
    # the stored parameters are untouched and still share memory with what was read
    assert params._param_td["a"].requires_grad
    assert reads[0].data_ptr() == params._param_td["a"].data_ptr()
    # nested tensordicts are handed out as they are
    assert isinstance(params["b"], TensorDictBase)


def test_get_post_hook_returning_none_keeps_the_tensor_and_non_callables_are_refused():
    params = make_params()
    params.register_get_post_hook(lambda owner, tensor: None)
    assert params["a"].requires_grad
    with pytest.raises(ValueError, match="callable"):
        params.register_get_post_hook("not a hook")  # type: ignore[arg-type]


def test_a_nested_entry_reads_as_a_submodule_on_the_same_tensors():
    # torch.export and state-dict loading reach "params.b.c" through getattr(params, "b")
    params = make_params()
    sub = params.b
    assert isinstance(sub, TensorDictParams) and sub["c"] is params["b", "c"]
    sub._parameters["c"] = torch.zeros(3, 2)  # (what torch.export's swap does)
    assert params["b", "c"] is not sub["c"]  # a copy of the structure: the swap stays there
    with pytest.raises(AttributeError):
        _ = params.a_missing_entry


def _grad_params() -> TensorDictParams:
    return TensorDictParams(
        TensorDict(a=torch.randn(4, 3), c=torch.ones(4, dtype=torch.long), batch_size=[4])
    )


def test_masked_fill_computes_a_tensordict_and_leaves_the_parameters() -> None:
    p = _grad_params()
    before = p["a"].detach().clone()
    out = p.masked_fill(torch.tensor([True, False, True, False]), -10.0)
    assert type(out) is TensorDict and out["a"].requires_grad and not out["a"].is_leaf
    assert (out["a"][0] == -10).all() and torch.equal(p["a"].detach(), before)


def test_named_apply_in_place_with_autograd_is_refused_clearly() -> None:
    from tensordict.errors import ParamsWriteError

    p = _grad_params()
    with pytest.raises(ParamsWriteError, match="Failed to update"):
        p.named_apply(lambda name, x: x + 1 if name == "a" else None, inplace=True)
    assert issubclass(ParamsWriteError, ValueError)


def test_cast_to_an_integer_dtype_gives_plain_tensors() -> None:
    q = _grad_params().to(torch.int)
    assert type(q) is TensorDictParams
    assert all(type(v) is torch.Tensor and not v.requires_grad for v in q.values())


@pytest.mark.parametrize("op", ["stack", "cat"])
def test_stack_and_cat_write_into_parameters_without_autograd(op) -> None:
    p = _grad_params()
    rows = [TensorDict(a=torch.ones(3), c=torch.tensor(2)) for _ in range(4)]
    if op == "stack":
        out = torch.stack(rows, 0, out=p)
    else:
        out = torch.cat([torch.stack(rows[:2]), torch.stack(rows[2:])], 0, out=p)
    assert out is p and isinstance(p["a"], nn.Parameter) and (p["a"] == 1).all()
    assert (p["c"] == 2).all()


def test_zeroing_a_tensordict_zeroes_its_nested_parameters_without_autograd() -> None:
    td = TensorDict(parent=_grad_params(), batch_size=[4])
    td.zero_()
    assert isinstance(td["parent", "a"], nn.Parameter) and (td["parent", "a"] == 0).all()


def test_legacy_shape_views_of_parameters_are_parameters_over_the_view() -> None:
    from tensordict import set_lazy_legacy

    p = TensorDictParams(TensorDict(a=torch.randn(2, 3, 4), batch_size=[2, 3]))
    with pytest.warns(DeprecationWarning), set_lazy_legacy(True):
        view = p.permute(1, 0)
        back = view.permute(1, 0)
    assert type(view) is TensorDictParams and view.batch_size == (3, 2)
    assert type(back) is TensorDictParams and back._param_td is p._param_td
    assert p.squeeze() is p


def test_parameters_have_no_source_attribute_as_upstream() -> None:
    # user code (upstream's own tests among it) tells views from wrappers by
    # hasattr(td, "_source") and then assigns td._source: TensorDictParams is no view
    p = TensorDictParams(TensorDict(a=torch.randn(3, 4), batch_size=[3]))
    assert not hasattr(p, "_source")
    assert p.mean().batch_size == () and isinstance(p["a"], nn.Parameter)
    p["b"] = torch.zeros(3)  # written through to the wrapped tensordict
    assert "b" in p._param_td.keys() and isinstance(p["b"], nn.Parameter)  # noqa: SIM118
