"""Ragged entries: get(as_list/as_padded_tensor/as_nested_tensor), densify, to_padded_tensor."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, set_printoptions
from tensordict.errors import ShapeMismatchError


def ragged() -> LazyStackedTensorDict:
    return LazyStackedTensorDict(
        TensorDict({"x": torch.zeros(2, 2), "n": {"y": torch.zeros(1)}}),
        TensorDict({"x": torch.ones(3, 2), "n": {"y": torch.ones(2)}}),
    )


def test_get_as_list_gives_the_members_values() -> None:
    values = ragged().get("x", as_list=True)
    assert [v.shape for v in values] == [torch.Size([2, 2]), torch.Size([3, 2])]


def test_get_as_padded_tensor_pads_on_the_right() -> None:
    out = ragged().get("x", as_padded_tensor=True, padding_value=-1)
    assert out.shape == torch.Size([2, 3, 2])
    assert out[0, 2].tolist() == [-1, -1] and out[1, 2].tolist() == [1, 1]


def test_get_as_padded_tensor_pads_on_the_left() -> None:
    out = ragged().get("x", as_padded_tensor=True, padding_value=-1, padding_side="left")
    assert out[0, 0].tolist() == [-1, -1] and out[0, 1].tolist() == [0, 0]


def test_get_as_nested_tensor_is_jagged_by_default() -> None:
    out = ragged().get("x", as_nested_tensor=True)
    assert out.is_nested and out.layout == torch.jagged
    assert [t.shape[0] for t in out.unbind()] == [2, 3]


def test_get_nested_key_through_a_dense_parent() -> None:
    td = TensorDict({"inner": ragged()}, [2])
    with pytest.raises(RuntimeError, match="Failed to stack tensors"):
        td.get(("inner", "x"))
    assert isinstance(td.get(("inner", "n", "y"), as_list=True), list)
    assert td.get(("inner", "n", "y"), as_padded_tensor=True)[0].tolist() == [0, 0]


def test_get_options_on_a_lazy_stack_of_lazy_stacks() -> None:
    td = LazyStackedTensorDict(ragged(), ragged())
    assert td.get("x", as_padded_tensor=True).shape == torch.Size([2, 2, 3, 2])
    nested_lists = td.get("x", as_list=True)
    assert isinstance(nested_lists[0], list) and len(nested_lists[0]) == 2
    with pytest.raises(ShapeMismatchError, match="nested tensors themselves"):
        td.get("x", as_nested_tensor=True)


def test_get_options_of_a_missing_key_give_the_default() -> None:
    assert ragged().get("missing", as_list=True) is None
    assert ragged().get("missing", 5, as_padded_tensor=True) == 5


def test_get_options_on_a_dense_tensordict_return_the_entry() -> None:
    td = TensorDict({"a": torch.zeros(2, 3)}, [2])
    assert td.get("a", as_padded_tensor=True) is td["a"]


def test_get_nestedtensor_is_deprecated_and_strided() -> None:
    with pytest.deprecated_call():
        out = ragged().get_nestedtensor("x")
    assert out.is_nested and out.layout == torch.strided


@pytest.mark.parametrize("layout", [torch.jagged, torch.strided])
def test_densify_gives_nested_tensors_for_ragged_entries(layout: torch.layout) -> None:
    a = TensorDict(a=torch.zeros(1), b=torch.zeros(2), d=TensorDict(e=torch.zeros(())))
    b = TensorDict(b=torch.ones(1), c=torch.ones(2), d=TensorDict(e=torch.ones(())))
    out = LazyStackedTensorDict(a, b).densify(layout=layout)
    assert type(out) is TensorDict and set(out.keys()) == {"a", "b", "c", "d"}
    assert out["b"].is_nested and [t.tolist() for t in out["b"].unbind()] == [[0, 0], [1]]
    assert [t.shape[0] for t in out["a"].unbind()] == [1, 0]  # a key member 1 lacks
    assert not out["d", "e"].is_nested and out["d", "e"].tolist() == [0, 1]
    with set_printoptions(compact=False):
        assert "shape=torch.Size([2, -1])" in repr(out)
    assert "a: f32[" in repr(out)  # (the compact form)


def test_densify_of_a_lazy_stack_nested_in_a_tensordict() -> None:
    out = TensorDict({"td": ragged()}, [2]).densify(layout=torch.jagged)
    assert type(out["td"]) is TensorDict and out["td", "x"].is_nested


def test_densify_of_an_exclusive_scalar_key_raises() -> None:
    td = LazyStackedTensorDict(TensorDict(a=torch.zeros(())), TensorDict(b=torch.zeros(())))
    with pytest.raises(ShapeMismatchError, match="empty shape and exclusive keys"):
        td.densify()


def test_to_padded_tensor_pads_nested_entries() -> None:
    out = ragged().densify(layout=torch.jagged).to_padded_tensor(padding=-1)
    assert out["x"].shape == torch.Size([2, 3, 2]) and out["x"][0, 2].tolist() == [-1, -1]
