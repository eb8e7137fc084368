"""consolidate(): every leaf a view of one storage; pickling and files keep it that way."""

from __future__ import annotations

import pickle

import pytest
import torch

import tensordict
from tensordict import LazyStackedTensorDict, TensorDict, tensorclass
from tensordict.errors import InplaceNotSupportedError, MemmapFormatError


def _td() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(6).view(2, 3), "n": {"b": torch.ones(2, dtype=torch.float64)}, "s": "x"},
        batch_size=[2],
    )


@tensorclass
class Pair:
    x: torch.Tensor
    label: str


def _same_storage(td) -> bool:
    ptr = td._consolidated["storage"].untyped_storage().data_ptr()
    members = td.tensordicts if isinstance(td, LazyStackedTensorDict) else [td]
    return all(
        t.untyped_storage().data_ptr() == ptr
        for m in members
        for t in m.values(include_nested=True, leaves_only=True)
        if isinstance(t, torch.Tensor)
    )


def test_leaves_view_the_one_storage():
    td = _td()
    c = td.consolidate()
    assert c.is_consolidated() and not td.is_consolidated()
    assert (c == td).all() and c["s"] == "x"
    assert _same_storage(c)
    c._consolidated["storage"].zero_()
    assert (c["a"] == 0).all() and (td["a"] != 0).any()


def test_lazy_stack_stays_a_lazy_stack():
    stack = LazyStackedTensorDict(*_td().unbind(0), stack_dim=0)
    c = stack.consolidate()
    assert type(c) is LazyStackedTensorDict and c.is_consolidated()
    assert (c == stack).all()


@pytest.mark.parametrize("make", [_td, lambda: LazyStackedTensorDict(*_td().unbind(0))])
def test_pickling_keeps_one_storage(make):
    c = make().consolidate()
    back = pickle.loads(pickle.dumps(c))
    assert back.is_consolidated() and type(back) is type(c)
    assert (back == c).all()
    assert _same_storage(back)


def test_jagged_leaves_round_trip():
    njt = torch.nested.nested_tensor_from_jagged(
        torch.arange(10.0),
        offsets=torch.tensor([0, 2, 5, 8, 10]),
        lengths=torch.tensor([2, 3, 3, 2]),
    )
    c = TensorDict(j=njt, batch_size=[4]).consolidate()
    back = pickle.loads(pickle.dumps(c))
    for x, y in zip(njt.unbind(), back["j"].unbind()):
        assert torch.equal(x, y)
    assert back["j"]._lengths is not None


def test_file_round_trip(tmp_path):
    path = tmp_path / "td.mmap"
    c = _td().consolidate(filename=path)
    assert c.device == torch.device("cpu")
    back = tensordict.from_consolidated(path)
    assert back.is_consolidated() and (back == c).all() and back["s"] == "x"
    assert TensorDict.from_consolidated(path)["n", "b"].dtype == torch.float64


def test_file_that_is_not_consolidated_is_refused(tmp_path):
    path = tmp_path / "junk"
    path.write_bytes(b"\xff" * 16)
    with pytest.raises(MemmapFormatError, match="consolidate"):
        tensordict.from_consolidated(path)


def test_tensorclass_consolidates():
    p = Pair(x=torch.arange(3.0), label="l", batch_size=[3]).consolidate()
    assert p.is_consolidated() and p.label == "l"
    back = pickle.loads(pickle.dumps(p))
    assert torch.equal(back.x, torch.arange(3.0))


def test_inplace_is_refused_clearly():
    with pytest.raises(InplaceNotSupportedError, match="inplace=True"):
        _td().consolidate(inplace=True)
