"""The TensorDict API on a tensorclass: results come back as the same tensorclass."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict.core.behaviour.combine import cat, stack
from tensordict.errors import ShapeMismatchError
from tensordict.tensorclass.builder import API_NAMES
from tests.tensorclass.classes import Pair, Sample


def sample(n: int = 4) -> Sample:
    return Sample(
        obs=torch.arange(n * 2.0).reshape(n, 2), reward=torch.arange(float(n)), batch_size=[n]
    )


# ---------------------------------------------------------------------- indexing


def test_slice_returns_the_same_class() -> None:
    s = sample()[1:3]
    assert type(s) is Sample and s.batch_size == torch.Size([2])


def test_int_index_selects_one_element() -> None:
    assert torch.equal(sample()[2].obs, torch.tensor([4.0, 5.0]))


def test_index_keeps_non_tensor_fields() -> None:
    s = Sample(obs=torch.zeros(3), label="cat", batch_size=[3])
    assert s[0].label == "cat" and s[0].reward is None


def test_index_tensor_along_a_later_dim() -> None:
    s = Sample(obs=torch.arange(12.0).reshape(3, 4), batch_size=[3, 4])
    out = s[(slice(None), torch.tensor([0, 3]))]
    assert type(out) is Sample and torch.equal(out.obs, s.obs[:, [0, 3]])


def test_tuple_of_slices_and_ints_indexes_several_dims() -> None:
    s = Sample(obs=torch.arange(12.0).reshape(3, 4), batch_size=[3, 4])
    assert torch.equal(s[1:, 2].obs, torch.tensor([6.0, 10.0]))


def test_index_of_a_nested_tensorclass_indexes_its_fields() -> None:
    p = Pair(left=sample(), right=torch.zeros(4), batch_size=[4])
    assert torch.equal(p[1:3].left.obs, sample().obs[1:3])


def test_setitem_with_another_instance_writes_in_place() -> None:
    s = sample()
    s[1:3] = Sample(obs=torch.full((2, 2), -1.0), reward=torch.zeros(2), batch_size=[2])
    assert torch.equal(s.obs[1:3], torch.full((2, 2), -1.0)) and s.obs[0, 0] == 0


def test_setitem_that_does_not_fit_changes_nothing() -> None:
    s = sample()
    before = s.obs.clone()
    with pytest.raises(ShapeMismatchError):
        s[0] = Sample(obs=torch.zeros(5), reward=torch.zeros(()))
    assert torch.equal(s.obs, before)


def test_iteration_yields_instances_along_dim_0() -> None:
    items = list(sample(3))
    assert len(items) == 3 and all(type(i) is Sample for i in items)


def test_len_is_the_first_batch_dim() -> None:
    assert len(sample(5)) == 5


# ---------------------------------------------------------------------- shape and combine


@pytest.mark.parametrize(
    ("op", "shape"),
    [
        (lambda s: s.reshape(2, 2), [2, 2]),
        (lambda s: s.view(2, 2), [2, 2]),
        (lambda s: s.unsqueeze(0), [1, 4]),
        (lambda s: s.unsqueeze(0).squeeze(0), [4]),
        (lambda s: s.expand(3, 4), [3, 4]),
        (lambda s: s.reshape(2, 2).permute(1, 0), [2, 2]),
        (lambda s: s.reshape(2, 2).flatten(), [4]),
        (lambda s: s.unflatten(0, [2, 2]), [2, 2]),
    ],
)
def test_shape_operations_return_the_same_class(op: Any, shape: list[int]) -> None:
    out = op(sample())
    assert type(out) is Sample and out.batch_size == torch.Size(shape)


def test_shape_operation_reaches_a_nested_tensorclass() -> None:
    p = Pair(left=sample(), right=torch.zeros(4), batch_size=[4])
    assert p.reshape(2, 2).left.obs.shape == torch.Size([2, 2, 2])


def test_torch_stack_returns_the_same_class() -> None:
    out = torch.stack([sample(), sample()], 1)
    assert type(out) is Sample and out.obs.shape == torch.Size([4, 2, 2])


def test_torch_cat_returns_the_same_class() -> None:
    out = torch.cat([sample(2), sample(3)], 0)
    assert type(out) is Sample and out.batch_size == torch.Size([5])


def test_torch_stack_of_nested_tensorclasses_stacks_the_nested_fields() -> None:
    p = Pair(left=sample(), right=torch.zeros(4), batch_size=[4])
    out = torch.stack([p, p])
    assert type(out.left) is Sample and out.left.batch_size == torch.Size([2, 4])


def test_core_stack_of_instances_returns_the_same_class() -> None:
    assert type(stack([sample(), sample()])) is Sample


def test_core_cat_of_instances_returns_the_same_class() -> None:
    assert type(cat([sample(), sample()])) is Sample


def test_class_stack_returns_the_same_class() -> None:
    assert type(Sample.stack([sample(), sample()])) is Sample


def test_lazy_stack_wraps_a_lazy_stacked_tensordict() -> None:
    out = Sample.lazy_stack([sample(), sample()])
    assert type(out) is Sample and isinstance(out._tensordict, LazyStackedTensorDict)


def test_maybe_dense_stack_of_instances_that_differ_stacks_them_lazily() -> None:
    members = [
        Sample(obs=torch.zeros(3), batch_size=[3]),
        Sample(obs=torch.zeros(3, 2), batch_size=[3]),
    ]
    out = Sample.maybe_dense_stack(members)
    assert type(out) is Sample and isinstance(out._tensordict, LazyStackedTensorDict)
    with pytest.raises(ShapeMismatchError):
        Sample.stack(members)  # (the strict one refuses them, as upstream)


@pytest.mark.parametrize("name", ["stack", "cat", "lazy_stack", "maybe_dense_stack"])
def test_class_stack_and_cat_refuse_keywords_upstream_refuses(name: str) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        getattr(Sample, name)([sample(), sample()], 0, foo=1)


def test_lazy_stack_of_instances_takes_the_lazy_stack_options() -> None:
    out = Sample.lazy_stack([sample(), sample()], 0, stack_dim_name="env", strict_shape=True)
    assert out._tensordict.names[0] == "env"


def test_split_returns_instances() -> None:
    parts = sample(5).split(2)
    assert [type(p) for p in parts] == [Sample] * 3 and parts[-1].batch_size == torch.Size([1])


def test_torch_split_returns_instances() -> None:
    assert all(type(p) is Sample for p in torch.split(sample(), 2))


def test_unbind_returns_instances_without_the_dim() -> None:
    parts = sample(3).unbind(0)
    assert len(parts) == 3 and parts[0].batch_size == torch.Size([])


def test_chunk_of_a_locked_instance_gives_locked_instances() -> None:
    assert all(p.is_locked for p in sample().lock_().chunk(2))


# ---------------------------------------------------------------------- maths and the tree walk


def test_apply_returns_the_same_class() -> None:
    out = sample().apply(lambda t: t * 0)
    assert type(out) is Sample and out.obs.sum() == 0


def test_apply_keeps_unset_fields_unset() -> None:
    out = Sample(obs=torch.zeros(2), batch_size=[2]).apply(lambda t: t + 1)
    assert out.reward is None


def test_apply_with_another_instance_pairs_the_fields() -> None:
    s = sample()
    out = s.apply(lambda a, b: a + b, s)
    assert torch.equal(out.obs, s.obs * 2)


def test_arithmetic_returns_the_same_class() -> None:
    s = sample()
    out = (s + 1) * 2 - s
    assert type(out) is Sample and torch.equal(out.obs, s.obs + 2)


def test_reflected_arithmetic_returns_the_same_class() -> None:
    s = sample()
    assert type(1 - s) is Sample


def test_in_place_arithmetic_keeps_the_instance() -> None:
    s = sample()
    obs = s.obs
    s += 1
    assert type(s) is Sample and s.obs is obs and obs[0, 0] == 1


def test_equality_gives_an_instance_of_bools() -> None:
    s = sample()
    eq = s == s.clone()
    assert type(eq) is Sample and eq.obs.dtype == torch.bool and eq.all()


def test_inequality_detects_a_difference() -> None:
    s = sample()
    other = s.clone()
    other.obs[0, 0] = 100
    assert (s != other).any()


def test_reduction_over_a_dim_returns_the_same_class() -> None:
    out = sample().sum(dim=0)
    assert type(out) is Sample and out.batch_size == torch.Size([])


def test_all_without_dim_returns_a_bool() -> None:
    assert sample().apply(lambda t: t + 1).all() is True


def test_clone_copies_the_tensors() -> None:
    s = sample()
    c = s.clone()
    assert type(c) is Sample and c.obs is not s.obs and torch.equal(c.obs, s.obs)


def test_clone_keeps_non_tensor_fields() -> None:
    s = Sample(obs=torch.zeros(2), label="cat", batch_size=[2])
    assert s.clone().label == "cat"


def test_to_dtype_returns_the_same_class() -> None:
    out = sample().to(torch.float64)
    assert type(out) is Sample and out.obs.dtype == torch.float64


def test_to_device_sets_the_device() -> None:
    assert sample().to("cpu").device == torch.device("cpu")


def test_empty_has_the_batch_size_and_no_data() -> None:
    e = sample().empty()
    assert type(e) is Sample and e.batch_size == torch.Size([4]) and e.obs is None


def test_select_returns_the_same_class_with_other_fields_unset() -> None:
    out = sample().select("obs")
    assert type(out) is Sample and out.reward is None


# ---------------------------------------------------------------------- in place and state


def test_in_place_methods_return_the_instance() -> None:
    s = sample()
    assert s.zero_() is s and s.obs.sum() == 0


def test_update_returns_the_instance_and_writes() -> None:
    s = sample()
    assert s.update({"reward": torch.ones(4)}) is s and torch.equal(s.reward, torch.ones(4))


def test_lock_and_unlock_return_the_instance() -> None:
    s = sample()
    assert s.lock_() is s and s.is_locked and s.unlock_() is s and not s.is_locked


def test_unlock_as_a_context_manager_relocks() -> None:
    s = sample().lock_()
    with s.unlock_():
        s.reward = torch.ones(4)
    assert s.is_locked and torch.equal(s.reward, torch.ones(4))


def test_update_of_a_nested_tensorclass_writes_in_place() -> None:
    p = Pair(left=sample(), right=torch.zeros(4), batch_size=[4])
    obs = p.left.obs
    p.update_(Pair(left=sample().apply(lambda t: t * 0), right=torch.ones(4), batch_size=[4]))
    assert p.left.obs is obs and obs.sum() == 0


def test_nested_keys_walk_into_a_tensorclass_field() -> None:
    td = TensorDict({"s": sample()}, [4])
    assert ("s", "obs") in list(td.keys(include_nested=True, leaves_only=True))


def test_zero_reaches_a_tensorclass_inside_a_tensordict() -> None:
    td = TensorDict({"s": sample()}, [4])
    td.zero_()
    assert td["s"].obs.sum() == 0


def test_properties_come_from_the_inner_tensordict() -> None:
    s = sample()
    assert (s.shape, s.batch_dims, s.ndim, s.numel()) == (torch.Size([4]), 1, 1, 4)


# ---------------------------------------------------------------------- the forwarding table


def test_every_public_tensordict_method_is_answered() -> None:
    public = {n for n in dir(TensorDictBase) if not n.startswith("_")}
    not_meaningful = {
        "fromkeys",  # builds an unbatched TensorDict from keys, not an instance
        "from_module",  # builds a TensorDict of a module's parameters, not an instance
        "from_modules",
        "data",  # a field name tensorclasses may use (as upstream allows)
    }
    assert public - API_NAMES - not_meaningful == set()


@pytest.mark.parametrize("locked", [False, True])
def test_update_in_place_writes_only_the_fields_the_instance_holds(locked: bool) -> None:
    from tensordict import tensorclass

    @tensorclass
    class Obs:
        text: str
        value: torch.Tensor

    buffer = Obs(None, torch.zeros(2), batch_size=[2])  # (a batched env's shared buffer)
    if locked:
        buffer.lock_()
    buffer.update_(Obs("7", torch.ones(2), batch_size=[2]))
    assert buffer.text is None and buffer.value.tolist() == [1.0, 1.0]
    outer = TensorDict(tc=Obs(None, torch.zeros(2), batch_size=[2]), batch_size=[2])
    if locked:
        outer.lock_()
    outer.update_(TensorDict(tc=Obs("5", torch.ones(2), batch_size=[2]), batch_size=[2]))
    assert outer["tc"].text is None and outer["tc"].value.tolist() == [1.0, 1.0]
