"""UnbatchedTensor: an entry exempt from the batch size of its tensordict."""

from __future__ import annotations

import math
import pickle

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, UnbatchedTensor
from tensordict.errors import UnbatchedMemmapError


def _td() -> TensorDict:
    return TensorDict(x=torch.zeros(3, 2), table=UnbatchedTensor(torch.arange(7.0)), batch_size=[3])


def test_wrapping_shares_storage_and_is_a_tensor() -> None:
    data = torch.randn(5, 3)
    u = UnbatchedTensor(data)
    assert isinstance(u, torch.Tensor) and u.data_ptr() == data.data_ptr()
    assert u.shape == (5, 3) and u.batch_size == torch.Size([])


def test_entry_takes_the_batch_size_of_its_tensordict() -> None:
    td = _td()
    assert isinstance(td["table"], UnbatchedTensor)
    assert td["table"].batch_size == torch.Size([3])


@pytest.mark.parametrize(
    "op",
    [
        lambda td: td[0],
        lambda td: td[1:],
        lambda td: td.reshape(1, 3),
        lambda td: td.unsqueeze(0).transpose(0, 1),
        lambda td: td.unbind(0)[1],
        lambda td: td.split([2, 1])[0],
        lambda td: td.expand(4, 3),
        lambda td: td.gather(0, torch.tensor([0, 0])),
    ],
)
def test_indexing_and_shape_ops_keep_the_storage(op) -> None:  # type: ignore[no-untyped-def]
    td = _td()
    out = op(td)
    assert out["table"].data_ptr() == td["table"].data_ptr()
    assert out["table"].shape == (7,) and out["table"].batch_size == out.batch_size


def test_stack_and_cat_keep_one_copy_with_the_new_batch_size() -> None:
    td = _td()
    stacked = torch.stack([td, td], 1)
    assert stacked["table"].batch_size == torch.Size([3, 2])
    assert stacked["table"].data_ptr() == td["table"].data_ptr()
    catted = torch.cat([td, td])
    assert catted["table"].batch_size == torch.Size([6]) and catted["table"].shape == (7,)
    assert td["table"].batch_size == torch.Size([3])  # the members are left alone


def test_lazy_stack_reads_the_shared_entry() -> None:
    td = _td()
    lazy = LazyStackedTensorDict(td, td, stack_dim=0)
    assert lazy["table"].batch_size == torch.Size([2, 3]) and lazy["table"].shape == (7,)


def test_stacking_different_data_warns() -> None:
    a = TensorDict(u=UnbatchedTensor(torch.zeros(2)), batch_size=[1])
    b = TensorDict(u=UnbatchedTensor(torch.ones(2)), batch_size=[1])
    with pytest.warns(UserWarning, match="different data storage"):
        torch.stack([a, b])


def test_elementwise_ops_reach_the_entry() -> None:
    td = _td()
    doubled = td.apply(lambda t: t * 2)
    assert torch.equal(doubled["table"], torch.arange(7.0) * 2)
    assert isinstance(doubled["table"], UnbatchedTensor)
    assert doubled["table"].batch_size == torch.Size([3])
    assert td.int()["table"].dtype == torch.int32


def test_copy_and_select_keep_the_same_object() -> None:
    td = _td()
    assert td.copy()["table"] is td["table"] and td.select("table")["table"] is td["table"]


def test_auto_batch_size_ignores_the_entry() -> None:
    td = TensorDict(a=UnbatchedTensor(0), b=torch.randn(2, 3)).auto_batch_size_()
    assert td.batch_size == torch.Size([2, 3])


def test_batch_size_can_change_around_it() -> None:
    td = _td()
    td.batch_size = []
    assert td["table"].batch_size == torch.Size([])


@pytest.mark.parametrize("fn", [str, bool, int, float, math.floor, math.ceil, lambda x: x.item()])
def test_python_conversions_answer_as_the_plain_tensor(fn) -> None:  # type: ignore[no-untyped-def]
    plain = torch.tensor(2.5)
    got = fn(UnbatchedTensor(plain))
    assert got == fn(plain) and not isinstance(got, UnbatchedTensor)


def test_repr_names_the_class() -> None:
    data = torch.tensor([1.0, 2.0])
    assert repr(UnbatchedTensor(data)) == f"UnbatchedTensor({data!r})"


def test_pickles_with_its_batch_size() -> None:
    back = pickle.loads(pickle.dumps(_td()["table"]))
    assert isinstance(back, UnbatchedTensor) and back.batch_size == torch.Size([3])
    assert torch.equal(back, torch.arange(7.0))


def test_memmap_refuses_it_and_writes_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnbatchedMemmapError, match="exclude"):
        _td().memmap_(tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert issubclass(UnbatchedMemmapError, NotImplementedError)  # as upstream


def test_clone_and_to_tensordict_keep_the_unbatched_batch_size() -> None:
    td = TensorDict(a=torch.zeros(4, 3), u=UnbatchedTensor(torch.randn(7, 11)), batch_size=[4, 3])
    copy = td.get("u").clone()
    assert isinstance(copy, UnbatchedTensor) and copy.batch_size == (4, 3)
    assert copy.data_ptr() != td.get("u").data_ptr()
    dense = td.to_tensordict()
    assert dense.get("u").batch_size == (4, 3)  # (it was [])
