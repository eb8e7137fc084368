"""amax/amin, cummax/cummin and logsumexp over batch dimensions (with ``out=``), and how
reductions treat unbatched entries."""

import pytest
import torch

from tensordict import TensorDict, UnbatchedTensor


def _td() -> TensorDict:
    nested = TensorDict(c=torch.randn(3, 4, 2), batch_size=[3, 4, 2])
    return TensorDict(a=torch.randn(3, 4, 5), b=nested, batch_size=[3, 4])


def test_amax_amin_match_torch_over_a_batch_dim() -> None:
    td = _td()
    assert torch.equal(td.amax(1)["a"], td["a"].amax(1))
    assert torch.equal(td.amin(0, keepdim=True)["b", "c"], td["b", "c"].amin(0, keepdim=True))
    assert td.amin(1).batch_size == (3,)


def test_amax_without_dim_reduces_each_leaf() -> None:
    td = _td()
    assert torch.equal(td.amax()["a"], td["a"].max())
    assert torch.equal(td.amin(reduce=True), torch.minimum(td["a"].min(), td["b", "c"].min()))


def test_cummax_gives_values_and_indices_of_the_same_batch_size() -> None:
    td = _td()
    result = td.cummax(1)
    assert isinstance(result, torch.return_types.cummax)
    expected = torch.cummax(td["a"], 1)
    assert torch.equal(result.values["a"], expected.values)
    assert torch.equal(result.indices["a"], expected.indices)
    assert result.values.batch_size == td.batch_size
    only_values = td.cummin(-1, return_indices=False)
    assert torch.equal(only_values["a"], torch.cummin(td["a"], 1).values)


def test_cumulative_ops_refuse_a_feature_dim() -> None:
    with pytest.raises(IndexError, match="batch dimension"):
        _td().cummin(2)


def test_logsumexp_reduces_batch_dims_and_keeps_nested_extra_dims() -> None:
    td = _td()
    out = td.logsumexp(1)
    assert torch.allclose(out["a"], td["a"].logsumexp(1))
    assert out.batch_size == (3,) and out["b"].batch_size == (3, 2)
    whole = td.logsumexp()
    assert torch.allclose(whole["a"], td["a"].logsumexp((0, 1)))
    assert td.logsumexp(-1, keepdim=True).batch_size == (3, 1)


def test_logsumexp_writes_into_out_in_place() -> None:
    td = _td()
    out = td.logsumexp(1).zero_()
    leaf = out["a"]
    assert td.logsumexp(1, out=out) is out
    assert out["a"] is leaf and torch.allclose(leaf, td["a"].logsumexp(1))
    empty = td.logsumexp(1).empty()
    assert torch.allclose(td.logsumexp(1, out=empty)["b", "c"], td["b", "c"].logsumexp(1))


def test_logsumexp_refuses_a_dim_outside_the_batch() -> None:
    with pytest.raises(ValueError, match="incompatible"):
        _td().logsumexp(2)


def test_reductions_leave_unbatched_entries_alone() -> None:
    u = torch.arange(5.0).reshape(1, 5)
    td = TensorDict(a=torch.randn(3, 4), u=UnbatchedTensor(u), batch_size=[3, 4])
    assert torch.equal(td.sum(-1)["u"], u)
    assert torch.equal(td.amin(-1)["u"], u)
    assert "u" not in td.min(-1).indices
    assert torch.equal(td.cummin(-1).values.get("a"), td["a"].cummin(1).values)
