"""Upstream's shape functions over batch dims, element-wise maths, casts and small accessors,
checked against torch on the leaves."""

import collections

import pytest
import torch

from tensordict import TensorDict


def _td() -> TensorDict:
    nested = TensorDict(c=torch.randn(2, 3, 5), batch_size=[2, 3, 5])
    return TensorDict(a=torch.randn(2, 3, 4), b=nested, batch_size=[2, 3])


@pytest.mark.parametrize(
    "method, args, torch_fn",
    [
        ("movedim", (0, 1), lambda t: t.movedim(0, 1)),
        ("swapdims", (0, 1), lambda t: t.swapdims(0, 1)),
        ("narrow", (1, 1, 2), lambda t: t.narrow(1, 1, 2)),
        ("roll", (1, 0), lambda t: t.roll(1, 0)),
        ("roll", (1,), lambda t: t.reshape(6, -1).roll(1, 0).reshape(t.shape)),
        ("rot90", (), lambda t: t.rot90(1, (0, 1))),
        ("fliplr", (), lambda t: t.flip(1)),
        ("flipud", (), lambda t: t.flip(0)),
        ("tile", ((2,),), lambda t: t.tile((1, 2, 1))),
        ("broadcast_to", ((4, 2, 3),), lambda t: t.broadcast_to(4, 2, 3, t.shape[-1])),
        ("atleast_3d", (), lambda t: t.unsqueeze(0)),
    ],
)
def test_shape_functions_act_on_batch_dims(method, args, torch_fn) -> None:
    td = _td()
    out = getattr(td, method)(*args)
    assert torch.equal(out["a"], torch_fn(td["a"]))
    assert torch.equal(out["b", "c"], torch_fn(td["b", "c"]))
    assert out.batch_size == out["a"].shape[:-1]
    assert out["b"].batch_size == (*out.batch_size, 5)  # nested extra dims kept


def test_movedim_with_several_dims_is_a_permutation() -> None:
    td = TensorDict(a=torch.randn(2, 3, 4), batch_size=[2, 3, 4])
    assert torch.equal(td.movedim((0, 1), (2, 0))["a"], td["a"].movedim((0, 1), (2, 0)))


@pytest.mark.parametrize("name", ["acos", "erf", "log2", "isneginf", "isreal", "lgamma"])
def test_elementwise_functions_match_torch(name) -> None:
    td = TensorDict(a=torch.rand(3) * 0.9, batch_size=[3])
    assert torch.equal(getattr(td, name)()["a"], getattr(torch, name)(td["a"]))


def test_in_place_binary_forms() -> None:
    td = TensorDict(a=torch.tensor([1.0, 5.0]), batch_size=[2])
    other = TensorDict(a=torch.tensor([3.0, 2.0]), batch_size=[2])
    leaf = td["a"]
    assert td.maximum_(other)["a"] is leaf and leaf.tolist() == [3.0, 5.0]
    td.clamp_max_(4.0)
    assert leaf.tolist() == [3.0, 4.0]
    td.lerp_(other, 0.5)
    assert leaf.tolist() == [3.0, 3.0]
    td.addcmul_(other, other, value=2)
    assert leaf.tolist() == [21.0, 11.0]
    assert td.rsub(1)["a"].tolist() == [-20.0, -10.0]
    assert td.mod(4)["a"].tolist() == [1.0, 3.0]


def test_quantile_and_norm() -> None:
    td = TensorDict(a=torch.arange(6.0).reshape(2, 3), batch_size=[2, 3])
    assert torch.equal(td.quantile(0.5, dim=1)["a"], td["a"].quantile(0.5, dim=1))
    assert td.quantile(torch.tensor([0.1, 0.9]), dim=1).batch_size == (2, 2)
    assert td.quantile(0.5, reduce=True) == td["a"].quantile(0.5)
    assert torch.equal(td.norm()["a"], td["a"].norm())


def test_casts_and_accessors() -> None:
    td = _td()
    assert td.float16()["a"].dtype == torch.float16
    assert td.type(torch.int32)["a"].dtype == torch.int32
    assert td.depth == 1 and td.get_item_shape(("b", "c")) == (2, 3, 5)
    assert td.sorted_keys == ["a", "b"]
    assert td.data_ptr()["a"].item() == td["a"].data_ptr()
    assert not td.is_cpu and TensorDict(device="cpu").is_cpu
    assert td._check_device()


def test_to_namedtuple_nests() -> None:
    td = TensorDict(a=torch.zeros(1), n={"b": torch.ones(1)}, s="x")
    nt = td.to_namedtuple()
    assert isinstance(nt, tuple) and nt.s == "x" and torch.equal(nt.n.b, torch.ones(1))
    Point = collections.namedtuple("Point", "a n s")
    assert isinstance(td.to_namedtuple(Point), Point)


def test_copy_at_refuses_non_tensor_data_unless_not_fast() -> None:
    td = TensorDict(a=torch.zeros(4), batch_size=[4])
    src = TensorDict(a=torch.ones(2), s="x", batch_size=[2])
    with pytest.raises(RuntimeError, match="fast=True"):
        td.copy_at_(src, slice(0, 2))
    assert (td["a"] == 0).all()
    td.copy_at_(src.exclude("s"), slice(0, 2))
    assert td["a"].tolist() == [1.0, 1.0, 0.0, 0.0]


def test_movedim_out_of_range_is_an_index_error() -> None:
    with pytest.raises(IndexError, match="out of range"):
        _td().movedim(0, 7)


def test_reshape_takes_size_keyword() -> None:
    td = TensorDict(a=torch.zeros(6, 2), batch_size=[6])
    assert td.reshape(size=(2, 3)).batch_size == (2, 3)


def test_new_tensor_copies_a_tensor_or_tensordict() -> None:
    td = TensorDict(a=torch.ones(3, dtype=torch.int64), batch_size=[3])
    out = td.new_tensor(torch.tensor([1.5, 2.5]))
    assert out.batch_size == (2,) and out["a"].dtype == torch.int64
    other = TensorDict(a=torch.zeros(3), batch_size=[3])
    assert torch.equal(td.new_tensor(other)["a"], torch.zeros(3, dtype=torch.int64))


def test_empty_like_on_another_device() -> None:
    out = torch.empty_like(TensorDict(a=torch.zeros(3), batch_size=[3]), device="meta")
    assert out.device == torch.device("meta") and out["a"].is_meta


def test_from_namedtuple_classmethod_round_trips() -> None:
    td = TensorDict(a=torch.zeros(2), n={"b": torch.ones(2)}, batch_size=[2])
    back = TensorDict.from_namedtuple(td.to_namedtuple())
    assert torch.equal(back["n", "b"], td["n", "b"])


def test_update_with_nested_keys_to_update_copies_missing_subtrees() -> None:
    td = TensorDict(x=torch.zeros(2), batch_size=[2])
    nested = {"f": {"w": torch.ones(2), "a": torch.ones(2)}, "r": torch.ones(2)}
    other = TensorDict({"m": nested, "s": torch.ones(2)}, batch_size=[2])
    td.update(other, keys_to_update=[("m", ("f",), "w")])
    assert ("m", "f", "a") in td.keys(True) and "s" not in td
    other["m", "r"] = torch.full((2,), 5.0)
    td.update(other, keys_to_update=[("m", "r")])
    assert (td["m", "r"] == 5).all()


def test_memmap_return_early_with_threads_gives_a_future(tmp_path) -> None:
    td = TensorDict(a=torch.arange(3), batch_size=[3])
    future = td.memmap(tmp_path, num_threads=2, return_early=True)
    assert torch.equal(future.result()["a"], td["a"])


def test_apply_in_place_that_returns_nothing_gives_none_as_upstream() -> None:
    td = TensorDict(a=torch.zeros(2), n={"b": torch.zeros(2)}, batch_size=[2])
    assert td.apply(lambda x: None, filter_empty=True, inplace=True) is None
    assert td.apply(lambda x: x.add_(1), filter_empty=True, inplace=True) is td
    with_text = td.clone().set("s", "x")
    assert with_text.apply(lambda x: None, filter_empty=True, inplace=True) is with_text


def test_pad_roll_and_repeat_interleave_in_place() -> None:
    td = TensorDict(a=torch.arange(3), n={"b": torch.ones(3, 2)}, batch_size=[3])
    assert td.pad([1, 1], value=-1)["a"].tolist() == [-1, 0, 1, 2, -1]
    nested = td["n"]
    assert td.roll(1, inplace=True) is td and td["a"].tolist() == [2, 0, 1]
    assert td.repeat_interleave(2, 0, inplace=True) is td and td.batch_size == (6,)
    assert td["n"] is nested and td["n"].batch_size == (6,)


def test_tolist_without_converting_nodes_gives_element_tensordicts() -> None:
    td = TensorDict(a=torch.arange(2), batch_size=[2])
    rows = td.tolist(convert_nodes=False)
    assert [type(r) for r in rows] == [TensorDict, TensorDict] and rows[1]["a"].item() == 1


def test_torch_shape_functions_dispatch_to_tensordicts() -> None:
    td = TensorDict(a=torch.zeros(2, 3, 4), batch_size=[2, 3])
    assert torch.movedim(td, 0, 1).batch_size == (3, 2)
    assert torch.roll(td, 1, 0).batch_size == (2, 3)
    assert torch.tile(td, (2,)).batch_size == (2, 6)
    assert torch.atleast_3d(td).batch_size == (1, 2, 3)
    assert torch.narrow(td, 1, 0, 2)["a"].shape == (2, 2, 4)


def test_values_list_follows_sorting_keys() -> None:
    td = TensorDict(a=torch.zeros(2), n={"b": torch.zeros(2), "c": torch.ones(2)}, batch_size=[2])
    assert len(td._values_list(True, True)) == 3
    assert (td._values_list(sorting_keys=[("n", "c")])[0] == 1).all()


def test_lerp_with_tensordict_end_and_weight_in_place_and_through_torch() -> None:
    # TorchRL's VecNorm: loc.lerp_(end=mean, weight=n / count), count a tensordict
    td = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(2)}}, [])
    end = td.apply(lambda x: x + 4)
    weight = TensorDict({"a": torch.full((3,), 0.25), "n": {"b": torch.full((2,), 0.5)}}, [])
    a = td["a"]
    assert td.lerp_(end=end, weight=weight) is td and td["a"] is a
    assert td["a"].tolist() == [1.0] * 3 and td["n", "b"].tolist() == [2.0] * 2
    out = torch.lerp(td, end, weight)
    assert out["a"].tolist() == [1.75] * 3 and out["n", "b"].tolist() == [3.0] * 2
    assert td.lerp_(torch.tensor(5.0), 1.0)["n", "b"].tolist() == [5.0] * 2
