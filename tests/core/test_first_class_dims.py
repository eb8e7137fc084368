"""First-class dimensions (functorch.dim) as indices, and names of lazy stacks."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, MemoryMappedTensor, TensorDict
from tensordict.errors import FirstClassDimMemmapError, LazyFirstClassDimError

ftdim = pytest.importorskip("functorch.dim")


def _td() -> TensorDict:
    return TensorDict({"a": torch.arange(24.0).view(2, 3, 4), "n": {"b": torch.ones(2, 3)}}, [2, 3])


def test_first_class_dim_binds_a_batch_dimension():
    td = _td()
    d0 = ftdim.dims(1)
    out = td[d0]
    assert out.batch_size == (3,)
    assert out["a"].dims == (d0,) and out["n", "b"].dims == (d0,)


def test_first_class_dim_drops_the_name_of_its_dimension():
    td = _td()
    td.names = ["x", "y"]
    d0 = ftdim.dims(1)
    assert td[:, d0].names == ["x"]


def test_lazy_stack_refuses_a_first_class_dim_on_its_stack_dim():
    stack = LazyStackedTensorDict(_td(), _td(), stack_dim=1)
    d0, d1 = ftdim.dims(2)
    assert stack[d0].batch_size == (2, 3)
    with pytest.raises(LazyFirstClassDimError, match="Cannot index"):
        stack[d0, d1]
    assert issubclass(LazyFirstClassDimError, ValueError)


def test_memmap_tensor_refuses_first_class_dims():
    t = MemoryMappedTensor.from_tensor(torch.zeros(2, 3))
    with pytest.raises(FirstClassDimMemmapError, match="first class dimension"):
        t[ftdim.dims(1)]


def test_lazy_stack_names_reach_members_and_survive_indexing():
    stack = LazyStackedTensorDict(_td(), _td(), stack_dim=1)
    stack.names = ["x", "s", "y"]
    assert stack.names == ["x", "s", "y"]
    assert stack.tensordicts[0].names == ["x", "y"]
    assert stack[0].names == ["s", "y"]
    assert stack[:, 0].names == ["x", "y"]
    stack.names = None
    assert stack.names == [None, None, None]


def test_h5_backed_tensordict_reads_then_binds(tmp_path):
    pytest.importorskip("h5py")
    from tensordict import PersistentTensorDict

    h5 = PersistentTensorDict.from_dict(_td(), filename=tmp_path / "x.h5")
    d0 = ftdim.dims(1)
    out = h5[d0]
    assert out.batch_size == (3,) and out["a"].dims == (d0,)


def test_module_runs_batched_over_a_first_class_dim():
    from tensordict.nn import TensorDictParams

    module = torch.nn.Linear(3, 4)
    params = TensorDict.from_module(module).expand(5).clone()
    d0 = ftdim.dims(1)
    TensorDictParams(params)[d0].to_module(module, preserve_module_state=False)
    y = module(torch.randn(2, 3))
    assert y.dims == (d0,) and y._tensor.shape[0] == 5


def test_assert_close_compares_jagged_tensors_by_value():
    from tensordict import assert_close

    def njt():
        return torch.nested.nested_tensor_from_jagged(
            torch.arange(5.0), offsets=torch.tensor([0, 2, 5])
        )

    assert_close(TensorDict(j=njt(), batch_size=[2]), TensorDict(j=njt(), batch_size=[2]))
