"""rename / rename_ of batch dimension names, and attrs() / to(attrs)."""

import pytest
import torch

from tensordict import TensorAttrs, TensorDict, tensorclass


@tensorclass
class _Point:
    x: torch.Tensor


def test_rename_by_old_name_and_positionally() -> None:
    td = TensorDict(batch_size=[2, 3, 4], names=["a", None, "c"])
    assert td.rename(a="x").names == ["x", None, "c"] and td.names == ["a", None, "c"]
    td.rename_("p", "q", "r")
    assert td.names == ["p", "q", "r"] and td._td_dim_names == ["p", "q", "r"]


def test_rename_refuses_unknown_or_duplicate_names() -> None:
    td = TensorDict(batch_size=[2, 3], names=["a", "b"])
    with pytest.raises(ValueError, match="no batch dimension"):
        td.rename_(z="y")
    with pytest.raises(ValueError):
        td.rename_(a="b")
    assert td.names == ["a", "b"]


def test_rename_reaches_nested_tensorclasses() -> None:
    td = TensorDict(p=_Point(x=torch.zeros(2, 3), batch_size=[2, 3]), batch_size=[2, 3])
    td.rename_("u", "v")
    assert td["p"].names == ["u", "v"]


def test_attrs_and_to_attrs() -> None:
    td = TensorDict(
        {"a": torch.zeros(3), "n": {"b": torch.zeros(3, dtype=torch.int64)}, "s": "x"},
        batch_size=[3],
    )
    attrs = td.attrs()
    assert isinstance(attrs["n", "b"], TensorAttrs) and attrs["n", "b"].tgt_dtype == torch.int64
    assert td.attrs(fields=("dtype",))["a"].tgt_shape is None
    spec = TensorDict({"a": TensorAttrs(tgt_dtype=torch.int32, batch_size=())}, batch_size=[])
    out = td.to(spec)
    assert out["a"].dtype == torch.int32 and out["n", "b"].dtype == torch.int64
    with pytest.raises(TypeError, match="positional"):
        td.to(spec, "cpu")
