"""Calls TorchRL makes into the core, upstream's private entry points included."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def nested() -> TensorDict:
    return TensorDict({"a": torch.zeros(2, 3), "n": {"b": torch.ones(2)}}, [2])


def test_to_none_keeps_the_tensordict():
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    assert td.to(None) is td
    assert td.to(device=None) is td


def test_apply_named_passes_the_key():
    seen = []
    nested().apply(lambda k, v: seen.append(k), named=True, nested_keys=True)
    assert sorted(map(str, seen)) == sorted(map(str, ["a", ("n", "b")]))


def test_fast_apply_out_writes_into_the_given_tensordict():
    td = nested()
    out = nested().zero_()
    result = td._fast_apply(lambda x: x + 5, out=out)
    assert result is out
    assert (out["n", "b"] == 6).all()


def test_fast_apply_out_self_writes_the_results_into_self():
    td = nested()
    # as upstream 0.15.3: the results replace the entries of ``out`` (no in-place copy)
    assert td._fast_apply(lambda x: x + 1, out=td) is td
    assert (td["a"] == 1).all()


def test_call_on_nested_hands_nested_tensordicts_to_fn():
    seen = []

    def fn(value):
        seen.append(type(value).__name__)
        return value

    nested()._fast_apply(fn, call_on_nested=True)
    assert sorted(seen) == ["Tensor", "TensorDict"]


def test_apply_call_on_nested_with_a_new_batch_size():
    td = nested()

    def expand(value):
        if isinstance(value, TensorDict):
            return value._apply_nest(expand, batch_size=[4, *value.shape], call_on_nested=True)
        return value.expand(4, *value.shape)

    out = td.apply(expand, batch_size=[4, 2], call_on_nested=True)
    assert out.batch_size == (4, 2) and out["n"].batch_size == (4, 2)
    assert out["a"].shape == (4, 2, 3)


def test_lerp_in_place_moves_towards_the_target():
    td = TensorDict(a=torch.zeros(2))
    td.lerp_(TensorDict(a=torch.full((2,), 4.0)), 0.25)
    assert torch.equal(td["a"], torch.ones(2))
    td.lerp_(3.0, 0.5)
    assert torch.equal(td["a"], torch.full((2,), 2.0))


@pytest.mark.parametrize("lazy", [False, True])
def test_set_str_accepts_upstream_keywords(lazy):
    td = TensorDict(a=torch.zeros(2, 1), batch_size=[2])
    if lazy:
        td = LazyStackedTensorDict.lazy_stack(list(td.unbind(0)))
    td._set_str("b", torch.ones(2, 1), validated=True, inplace=False, non_blocking=False)
    assert (td["b"] == 1).all()


def test_set_str_inplace_writes_into_the_existing_tensor():
    td = TensorDict(a=torch.zeros(2))
    ref = td["a"]
    td._set_str("a", torch.ones(2), validated=True, inplace=True)
    assert td["a"] is ref and (ref == 1).all()


def test_names_helpers_and_exclude():
    td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3], names=["x", "y"])
    assert td._has_names() and not TensorDict(a=torch.zeros(2))._has_names()
    assert td._get_names_idx((slice(None), 0)) == ["x"]
    assert list(td._exclude("a").keys()) == []


def test_lock_helpers():
    td = nested()
    td._propagate_lock()
    assert td.is_locked and td["n"].is_locked
    td._propagate_unlock()
    assert not td.is_locked
    outer = TensorDict(inner=td).lock_()
    with pytest.raises(RuntimeError):
        outer["inner"]._check_unlock()


def test_accepted_classes_cover_tensors_and_tensordicts():
    import tensordict.base

    accepted = tensordict.base._ACCEPTED_CLASSES
    assert isinstance(torch.zeros(1), accepted)
    assert isinstance(TensorDict(a=torch.zeros(1)), accepted)
    assert not isinstance([1], accepted)


def test_has_exclusive_keys_compares_the_members_nested_keys():
    # TorchRL's batched environments decide with it whether their members can be stacked
    a = TensorDict(x=torch.zeros(2), n={"y": torch.zeros(2)}, batch_size=[2])
    b = TensorDict(x=torch.zeros(2), n={"z": torch.zeros(2)}, batch_size=[2])
    assert LazyStackedTensorDict(a, b)._has_exclusive_keys
    assert not LazyStackedTensorDict(a, a.clone())._has_exclusive_keys
    assert not nested()._has_exclusive_keys


def test_new_unsafe_turns_nested_dicts_into_tensordicts():
    # TorchRL's SAC builds its target parameters as _new_unsafe({"module": {"0": ..., "1": ...}})
    inner = TensorDict(w=torch.zeros(2))
    td = TensorDict._new_unsafe({"module": {"0": inner, "1": {"b": torch.ones(1)}}}, torch.Size([]))
    assert isinstance(td["module"], TensorDict)
    assert td["module", "0"] is inner
    assert torch.equal(td["module", "1", "b"], torch.ones(1))
