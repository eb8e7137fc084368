"""Indexing over batch dimensions: results, views vs copies, errors."""

# Some tests spell membership as `key in td.keys()` on purpose (the view under test).
# ruff: noqa: SIM118

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import IndexingError


def make() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(24.0).reshape(4, 3, 2),
            "b": {"c": torch.arange(12).reshape(4, 3)},
            "n": TensorDict({"x": torch.arange(4 * 3 * 5).reshape(4, 3, 5)}, [4, 3, 5]),
        },
        [4, 3],
    )


INDICES: dict[str, Any] = {
    "int": 1,
    "negative int": -1,
    "slice": slice(1, 3),
    "stepped slice": slice(None, None, 2),
    "negative slice": slice(-3, -1),
    "ellipsis": Ellipsis,
    "none": None,
    "ellipsis none": (Ellipsis, None),
    "tuple int int": (1, 2),
    "tuple slice int": (slice(None), 1),
    "ellipsis int": (Ellipsis, 0),
    "int ellipsis": (2, Ellipsis),
    "none int": (None, 0),
    "empty tuple": (),
    "long tensor": torch.tensor([0, 2]),
    "negative long tensor": torch.tensor([-1, 0]),
    "list": [3, 1],
    "bool mask": torch.tensor([True, False, True, False]),
    "2d bool mask": torch.tensor([[True, False, True]] * 4),
    "list of bools": [True, False, False, True],
    "tensor pair": (torch.tensor([0, 1]), torch.tensor([1, 2])),
    "0-d tensor": torch.tensor(2),
    "slice and tensor": (slice(1, 3), torch.tensor([0, 0, 2])),
}


def leaf_index(idx: Any, feature_dims: int) -> Any:
    """Append explicit slices over the feature dims, so that ``...`` cannot reach them."""
    items = idx if isinstance(idx, tuple) else (idx,)
    items = tuple(torch.tensor(i) if isinstance(i, list) else i for i in items)
    if any(i is Ellipsis for i in items):
        # expand the ellipsis over the 2 batch dims only
        used = sum(
            (i.ndim if isinstance(i, torch.Tensor) and i.dtype == torch.bool else 1)
            for i in items
            if i is not None and i is not Ellipsis
        )
        pos = next(k for k, i in enumerate(items) if i is Ellipsis)
        items = items[:pos] + (slice(None),) * (2 - used) + items[pos + 1 :]
    return items + (slice(None),) * feature_dims if feature_dims else items


@pytest.mark.parametrize("name", list(INDICES), ids=list(INDICES))
def test_index_matches_indexing_each_leaf(name: str) -> None:
    idx = INDICES[name]
    td = make()
    out = td[idx]
    expected_a = td["a"][leaf_index(idx, 1)]
    assert torch.equal(out["a"], expected_a)
    assert torch.equal(out["b", "c"], td["b", "c"][leaf_index(idx, 0)])
    assert out.batch_size == expected_a.shape[:-1]
    assert out["b"].batch_size == out.batch_size


@pytest.mark.parametrize("name", list(INDICES), ids=list(INDICES))
def test_index_keeps_extra_batch_dims_of_nested_tensordicts(name: str) -> None:
    idx = INDICES[name]
    td = make()
    out = td[idx]
    assert out["n"].batch_size == out.batch_size + torch.Size([5])
    assert torch.equal(out["n", "x"], td["n", "x"][leaf_index(idx, 1)])


def test_ellipsis_applies_to_batch_dims_only() -> None:
    td = make()
    assert td[..., 0]["a"].shape == torch.Size([4, 2])
    assert torch.equal(td[..., 0]["a"], td["a"][:, 0])


def test_trailing_none_adds_batch_dim_before_feature_dims() -> None:
    out = make()[..., None]
    assert out.batch_size == torch.Size([4, 3, 1])
    assert out["a"].shape == torch.Size([4, 3, 1, 2])


@pytest.mark.parametrize("idx", [1, slice(1, 3), Ellipsis, None, (slice(None), 0), (None, 2)])
def test_basic_index_results_are_views(idx: Any) -> None:
    td = make()
    out = td[idx]
    out["a"].add_(100)
    out["b", "c"].add_(100)
    assert (td["a"] >= 100).any() and (td["b", "c"] >= 100).any()


@pytest.mark.parametrize(
    "idx", [torch.tensor([0, 2]), [0, 2], torch.tensor([True, False, True, False])]
)
def test_advanced_index_results_are_copies(idx: Any) -> None:
    td = make()
    out = td[idx]
    out["a"].add_(100)
    out["b", "c"].add_(100)
    assert (td["a"] < 100).all() and (td["b", "c"] < 100).all()


def test_adding_key_to_index_result_does_not_reach_parent() -> None:
    td = make()
    row = td[0]
    row["new"] = torch.zeros(3)
    row["b", "new"] = torch.zeros(3)
    assert "new" not in td.keys() and ("b", "new") not in td.keys(True)


def test_view_of_view_holds_the_right_rows() -> None:
    td = TensorDict({"x": torch.arange(100)}, [100])
    out = td[10:][5:25]
    assert out["x"].tolist() == list(range(15, 35))


def test_view_of_view_writes_through() -> None:
    td = TensorDict({"x": torch.arange(100)}, [100])
    td[10:][5:25]["x"].zero_()
    assert td["x"][15:35].sum() == 0 and td["x"][14] == 14 and td["x"][35] == 35


def test_index_of_0d_batch_with_int_raises() -> None:
    td = TensorDict({"a": torch.zeros(3)}, [])
    with pytest.raises(IndexingError, match=r"batch_size=\[\]"):
        td[0]


@pytest.mark.parametrize("idx", [4, -5])
def test_int_out_of_range_raises_naming_index_dim_and_size(idx: int) -> None:
    with pytest.raises(IndexingError) as info:
        make()[idx]
    msg = str(info.value)
    assert str(idx) in msg and "dimension 0" in msg and "[4, 3]" in msg


def test_int_out_of_range_on_second_dim_raises() -> None:
    with pytest.raises(IndexingError, match="dimension 1 of size 3"):
        make()[:, 3]


def test_tensor_index_out_of_range_raises() -> None:
    with pytest.raises(IndexingError, match="index 7"):
        make()[torch.tensor([0, 7])]


def test_too_many_indices_raise_naming_batch_size() -> None:
    with pytest.raises(IndexingError) as info:
        make()[0, 0, 0]
    assert "too many indices" in str(info.value) and "[4, 3]" in str(info.value)


def test_mask_of_wrong_shape_raises_naming_shapes() -> None:
    with pytest.raises(IndexingError) as info:
        make()[torch.tensor([True, False])]
    msg = str(info.value)
    assert "[2]" in msg and "[4]" in msg


def test_two_ellipses_raise() -> None:
    with pytest.raises(IndexingError, match="ellipsis"):
        make()[..., ...]


def test_float_index_raises() -> None:
    with pytest.raises(IndexingError, match="float"):
        make()[1.5]


def test_float_tensor_index_raises() -> None:
    with pytest.raises(IndexingError, match="float"):
        make()[torch.tensor([0.0, 1.0])]


def test_negative_step_raises() -> None:
    with pytest.raises(IndexingError, match="step"):
        make()[::-1]


def test_indexing_error_is_an_index_error() -> None:
    with pytest.raises(IndexError):
        make()[10]


def test_index_keeps_dim_names() -> None:
    td = TensorDict({"a": torch.zeros(4, 3)}, [4, 3], names=["x", "y"])
    assert td[0].names == ["y"]
    assert td[None].names == [None, "x", "y"]
    assert td[1:3].names == ["x", "y"]


def test_non_tensor_data_is_indexed_with_the_batch() -> None:
    td = TensorDict({"s": "label", "a": torch.zeros(4)}, [4])
    assert td[1:3].get("s").batch_size == torch.Size([2])
    assert td[0]["s"] == "label"


def test_iteration_yields_rows() -> None:
    td = make()
    rows = list(td)
    assert len(rows) == 4 and rows[2].batch_size == torch.Size([3])
    assert torch.equal(rows[2]["a"], td["a"][2])


def test_empty_mask_gives_empty_batch() -> None:
    out = make()[torch.zeros(4, dtype=torch.bool)]
    assert out.batch_size == torch.Size([0, 3]) and out["a"].shape == torch.Size([0, 3, 2])
