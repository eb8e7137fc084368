"""Shape operations over the batch dimensions."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import BatchSizeError


def make() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(24.0).reshape(4, 3, 2),
            "b": {"c": torch.arange(12).reshape(4, 3)},
            "n": TensorDict({"x": torch.arange(60.0).reshape(4, 3, 5)}, [4, 3, 5]),
            "s": "label",
        },
        [4, 3],
    )


def assert_leaves(out: TensorDict, fn: object) -> None:
    """Every tensor leaf of ``out`` equals ``fn`` applied to the source leaf."""
    src = make()
    for key, value in src.items(True, True):
        if isinstance(value, torch.Tensor):
            assert torch.equal(out[key], fn(value)), key  # type: ignore[operator]


def test_reshape() -> None:
    out = make().reshape(2, 6)
    assert out.batch_size == torch.Size([2, 6])
    assert_leaves(out, lambda t: t.reshape(2, 6, *t.shape[2:]))
    assert out["n"].batch_size == torch.Size([2, 6, 5])


def test_reshape_with_minus_one_and_tuple() -> None:
    assert make().reshape((-1,)).batch_size == torch.Size([12])


def test_reshape_invalid_raises_naming_batch_size() -> None:
    with pytest.raises(BatchSizeError, match=r"\[4, 3\].*\[5\]"):
        make().reshape(5)


def test_view_shares_memory() -> None:
    td = make()
    out = td.view(12)
    assert out["a"].data_ptr() == td["a"].data_ptr()
    out["a"].zero_()
    assert td["a"].sum() == 0


def test_view_invalid_raises() -> None:
    with pytest.raises(BatchSizeError, match=r"\[4, 3\]"):
        make().view(7)


def test_permute() -> None:
    out = make().permute(1, 0)
    assert out.batch_size == torch.Size([3, 4])
    assert_leaves(out, lambda t: t.permute(1, 0, *range(2, t.ndim)))
    assert out["n"].batch_size == torch.Size([3, 4, 5])


def test_permute_negative_dims_and_list() -> None:
    assert make().permute([-1, -2]).batch_size == torch.Size([3, 4])


def test_permute_wrong_length_raises() -> None:
    with pytest.raises(BatchSizeError, match=r"\[4, 3\]"):
        make().permute(0)


def test_permute_repeated_dim_raises() -> None:
    with pytest.raises(BatchSizeError, match="permutation"):
        make().permute(0, 0)


def test_transpose() -> None:
    out = make().transpose(0, -1)
    assert_leaves(out, lambda t: t.transpose(0, 1))


def test_transpose_out_of_range_raises_naming_dim_and_batch_size() -> None:
    with pytest.raises(BatchSizeError) as info:
        make().transpose(0, 2)
    assert "0 and 2" in str(info.value) and "[4, 3]" in str(info.value)


def test_unsqueeze() -> None:
    out = make().unsqueeze(1)
    assert out.batch_size == torch.Size([4, 1, 3])
    assert_leaves(out, lambda t: t.unsqueeze(1))


def test_unsqueeze_negative_dim_inserts_before_feature_dims() -> None:
    out = make().unsqueeze(-1)
    assert out.batch_size == torch.Size([4, 3, 1]) and out["a"].shape == torch.Size([4, 3, 1, 2])


def test_unsqueeze_out_of_range_raises() -> None:
    with pytest.raises(BatchSizeError, match="dim 4"):
        make().unsqueeze(4)


def test_squeeze_dim() -> None:
    out = make().unsqueeze(0).squeeze(0)
    assert out.batch_size == torch.Size([4, 3])
    assert_leaves(out, lambda t: t)


def test_squeeze_all_size_one_batch_dims_only() -> None:
    td = TensorDict({"a": torch.zeros(1, 3, 1)}, [1, 3])
    out = td.squeeze()
    assert out.batch_size == torch.Size([3]) and out["a"].shape == torch.Size([3, 1])


def test_squeeze_dim_not_of_size_one_is_noop() -> None:
    assert make().squeeze(0).batch_size == torch.Size([4, 3])


def test_squeeze_out_of_range_raises_naming_dim() -> None:
    with pytest.raises(BatchSizeError, match="dim 2"):
        make().squeeze(2)


def test_expand() -> None:
    out = make().expand(5, 4, 3)
    assert out.batch_size == torch.Size([5, 4, 3])
    assert_leaves(out, lambda t: t.expand(5, *t.shape))


def test_expand_shares_memory() -> None:
    td = make()
    assert td.expand(2, 4, 3)["a"].data_ptr() == td["a"].data_ptr()


def test_expand_incompatible_raises() -> None:
    with pytest.raises(BatchSizeError, match=r"\[4, 3\]"):
        make().expand(4, 5)


def test_expand_too_short_raises() -> None:
    with pytest.raises(BatchSizeError, match=r"\[4, 3\]"):
        make().expand(3)


def test_flatten() -> None:
    out = make().flatten(0, 1)
    assert out.batch_size == torch.Size([12])
    assert_leaves(out, lambda t: t.flatten(0, 1))
    assert out["n"].batch_size == torch.Size([12, 5])


def test_flatten_negative_dims() -> None:
    assert make().flatten(0, -1).batch_size == torch.Size([12])


def test_flatten_start_after_end_raises() -> None:
    with pytest.raises(BatchSizeError):
        make().flatten(1, 0)


def test_unflatten() -> None:
    out = make().flatten(0, 1).unflatten(0, (4, 3))
    assert out.batch_size == torch.Size([4, 3])
    assert_leaves(out, lambda t: t)


def test_unflatten_negative_dim() -> None:
    out = make().unflatten(-1, (3, 1))
    assert out.batch_size == torch.Size([4, 3, 1]) and out["a"].shape == torch.Size([4, 3, 1, 2])


def test_unflatten_wrong_sizes_raises() -> None:
    with pytest.raises(BatchSizeError, match=r"\[4, 3\]"):
        make().unflatten(0, (3, 3))


def test_gather() -> None:
    index = torch.tensor([[0, 1, 2], [3, 3, 3]])
    out = make().gather(0, index)
    assert out.batch_size == torch.Size([2, 3])
    expected = make()["a"][index, torch.arange(3)]
    assert torch.equal(out["a"], expected)


def test_gather_index_with_more_dims_than_the_batch_raises() -> None:
    with pytest.raises(BatchSizeError, match=r"\[4, 3\]"):
        make().gather(0, torch.zeros(4, 3, 2, dtype=torch.long))


def test_shape_ops_carry_non_tensor_data() -> None:
    out = make().reshape(12)
    assert out["s"] == "label" and out.get("s").batch_size == torch.Size([12])


def test_shape_ops_are_views_where_torch_gives_views() -> None:
    td = make()
    for out in (td.unsqueeze(0), td.permute(1, 0), td.transpose(0, 1), td.reshape(12)):
        out["a"].add_(1)
    assert td["a"][0, 0, 0] == 4


def test_permute_carries_names() -> None:
    td = TensorDict({"a": torch.zeros(4, 3)}, [4, 3], names=["x", "y"])
    assert td.permute(1, 0).names == ["y", "x"]
    assert td.unsqueeze(0).names == [None, "x", "y"]


def test_shape_op_on_0d_raises_naming_dim() -> None:
    with pytest.raises(BatchSizeError, match=r"batch_size=\[\]"):
        TensorDict({}, []).squeeze(0)


@pytest.mark.parametrize(
    "shape,target",
    [
        ((), (3,)),
        ((1,), (3,)),
        ((4,), (3, 4)),
        ((3, 1), (2, 3, 4)),
        ((3, 2), (3, 4)),
        ((2, 3), (3,)),
        ((0,), (0,)),
        ((1,), (0,)),
    ],
)
def test_broadcasts_to_agrees_with_torch(shape, target):
    from tensordict.core.behaviour.shape import broadcasts_to

    try:
        expected = torch.broadcast_shapes(shape, target) == torch.Size(target)
    except RuntimeError:
        expected = False
    assert broadcasts_to(shape, target) == expected


def test_in_place_writes_do_not_import_sympy():
    import subprocess
    import sys

    code = (
        "import sys, torch; from tensordict import TensorDict; "
        "td = TensorDict({'a': torch.zeros(4, 3)}, [4]); "
        "td.update_({'a': torch.ones(3)}); td[1:3] = TensorDict({'a': torch.ones(2, 3)}, [2]); "
        "print('sympy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_view_to_the_same_batch_size_is_the_tensordict_and_a_view_back_is_its_source() -> None:
    td = TensorDict({"a": torch.randn(3, 4)}, [3, 4])
    assert td.view(3, -1) is td and td.view(-1).view(-1, 4) is td
    assert td.view(-1, 12).shape == (1, 12)


def test_expand_as_a_tensordict_expands_each_entry_to_the_matching_entry() -> None:
    td0 = TensorDict({"a": torch.ones(3, 1, 4), "b": {"c": torch.ones(3, 2, 1, 4)}}, [3])
    td1 = TensorDict({"a": torch.zeros(2, 3, 5, 4), "b": {"c": torch.zeros(2, 3, 2, 6, 4)}}, [2, 3])
    out = td0.expand_as(td1)
    assert out.batch_size == (2, 3) and out["b", "c"].shape == (2, 3, 2, 6, 4)


def test_repeat_interleave_repeats_along_a_batch_dim() -> None:
    td = TensorDict(a=torch.arange(6).reshape(2, 3), batch_size=[2, 3])
    assert torch.equal(td.repeat_interleave(2, dim=1)["a"], td["a"].repeat_interleave(2, dim=1))
    assert td.repeat_interleave(torch.tensor([1, 2]), dim=0).batch_size == (3, 3)
    assert td.repeat_interleave(2).batch_size == (12,)  # no dim: the flattened batch


def test_tensor_split_gives_views_like_torch() -> None:
    td = TensorDict(a=torch.arange(6), batch_size=[6])
    parts = td.tensor_split((1, 4))
    assert [p.batch_size[0] for p in parts] == [1, 3, 2]
    assert torch.equal(parts[1]["a"], torch.arange(1, 4))
    assert [p.batch_size[0] for p in torch.tensor_split(td, 3)] == [2, 2, 2]


def test_from_list_stacks_dicts() -> None:
    td = TensorDict.from_list([{"a": 1, "s": "x"}, {"a": 2, "s": "y"}])
    assert td.batch_size == (2,) and td["s"] == ["x", "y"]
    assert torch.equal(td["a"], torch.tensor([1, 2]))


def test_squeeze_with_nothing_to_squeeze_returns_the_tensordict_itself() -> None:
    td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3])
    assert td.squeeze() is td and td.squeeze(0) is td
