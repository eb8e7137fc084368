"""assert_close / assert_allclose_td and check_recursive_properties."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, assert_allclose_td, assert_close, lazy_stack, tensorclass
from tensordict.utils import _check_recursive_properties, _TensorDictPropertyError


@tensorclass
class Holder:
    tensor: torch.Tensor
    nested: TensorDict


def tree() -> TensorDict:
    td = TensorDict(
        tensor=torch.zeros(3, 2),
        nested=TensorDict(value=torch.ones(3, 4), batch_size=[3]),
        batch_size=[3],
    )
    td["metadata"] = "value"
    return td


def test_assert_close_accepts_close_values_and_returns_true() -> None:
    a = tree()
    assert assert_close(a, a.clone()) is True
    b = a.clone()
    b["tensor"] += 0.01
    assert assert_allclose_td(a, b, atol=0.1, rtol=0)


def test_assert_close_names_the_key_that_differs() -> None:
    a = tree()
    b = a.clone()
    b["nested", "value"] += 1
    with pytest.raises(AssertionError, match=r"key \('nested', 'value'\) does not match"):
        assert_close(a, b)


def test_assert_close_key_sets_and_intersection() -> None:
    a = TensorDict(x=torch.zeros(2), y=torch.zeros(2))
    b = TensorDict(x=torch.zeros(2))
    with pytest.raises(KeyError, match="different keys"):
        assert_close(a, b)
    assert assert_close(a, b, intersection=True)


def test_assert_close_rejects_non_tensordicts() -> None:
    with pytest.raises(TypeError, match="tensordicts or tensorclasses"):
        assert_close(torch.zeros(2), torch.zeros(2))


def test_assert_close_compares_tensorclasses_and_lazy_stacks() -> None:
    h = Holder(
        tensor=torch.zeros(3), nested=TensorDict(v=torch.ones(3), batch_size=[3]), batch_size=[3]
    )
    assert assert_close(h, h.clone())
    stacked = lazy_stack([tree(), tree()])
    assert assert_close(stacked, stacked.clone())


@pytest.mark.parametrize(
    "make",
    [
        tree,
        lambda: lazy_stack([tree(), tree()]),
        lambda: Holder(
            tensor=torch.zeros(3),
            nested=TensorDict(v=torch.ones(3), batch_size=[3]),
            batch_size=[3],
        ),
        lambda: tree().lock_(),
    ],
    ids=["nested", "lazy", "tensorclass", "locked"],
)
def test_check_recursive_properties_valid_trees(make) -> None:
    assert _check_recursive_properties(make()) is True


def test_check_recursive_properties_device_mismatch() -> None:
    td = TensorDict(tensor=torch.zeros(3), batch_size=[3])
    td._device = torch.device("meta")
    with pytest.raises(_TensorDictPropertyError, match="Device mismatch: parent device=meta"):
        _check_recursive_properties(td)
    assert _check_recursive_properties(td, device=False)


def test_check_recursive_properties_lock_mismatch() -> None:
    td = tree().lock_()
    td.get("nested")._is_locked = False
    with pytest.raises(_TensorDictPropertyError, match=r"Lock mismatch.*'nested'"):
        _check_recursive_properties(td)
    assert _check_recursive_properties(td, raise_exception=False) is False


def test_check_recursive_properties_batch_size_mismatch() -> None:
    td = tree()
    td.get("nested")._batch_size = torch.Size([5])
    with pytest.raises(_TensorDictPropertyError, match=r"Batch-size mismatch.*'nested'"):
        _check_recursive_properties(td)


def test_check_recursive_properties_names_mismatch() -> None:
    td = TensorDict(
        nested=TensorDict(v=torch.ones(3), batch_size=[3]), batch_size=[3], names=["batch"]
    )
    td.get("nested")._names = ["other"]
    with pytest.raises(_TensorDictPropertyError, match=r"Names mismatch.*'nested'"):
        _check_recursive_properties(td)


def test_check_recursive_properties_rejects_non_collections() -> None:
    with pytest.raises(TypeError, match="tensordict or tensorclass"):
        _check_recursive_properties(torch.zeros(2))


def test_check_recursive_properties_unbatched_entry_follows_the_holder() -> None:
    from tensordict import UnbatchedTensor

    td = TensorDict(t=torch.zeros(3), u=UnbatchedTensor(torch.ones(())), batch_size=[3])
    assert _check_recursive_properties(td)
    assert _check_recursive_properties(lazy_stack([td, td]))
    td.get("u")._batch_size = torch.Size([])  # stale: not the holder's batch size
    with pytest.raises(_TensorDictPropertyError, match=r"Batch-size mismatch.*'u'"):
        _check_recursive_properties(td)
    assert _check_recursive_properties(td, include_unbatched=False)
