"""Reading and writing entries, and the copies and conversions of a TensorDict."""

# Some tests spell membership as `key in td.keys()` on purpose (the view under test).
# ruff: noqa: SIM118

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorDict
from tensordict.errors import BatchSizeError, ShapeMismatchError, TensorDictKeyError


def make() -> TensorDict:
    return TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.ones(3)}, "s": "x"}, [3])


def snapshot(td: TensorDict) -> dict[object, object]:
    return {
        k: (v.clone() if isinstance(v, torch.Tensor) else v)
        for k, v in td.items(include_nested=True, leaves_only=True)
    }


def assert_unchanged(td: TensorDict, before: dict[object, object]) -> None:
    after = snapshot(td)
    assert list(after) == list(before)
    for k, v in before.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(after[k], v), k  # type: ignore[arg-type]


# ---------------------------------------------------------------------- get / getitem
def test_get_missing_key_returns_none() -> None:
    assert make().get("missing") is None


def test_get_missing_key_returns_default() -> None:
    assert make().get("missing", 5) == 5


def test_get_missing_nested_key_returns_default() -> None:
    assert make().get(("b", "zz"), "d") == "d"
    assert make().get(("zz", "c"), "d") == "d"


def test_getitem_missing_key_raises_key_error_listing_available_keys() -> None:
    with pytest.raises(KeyError) as info:
        make()["missing"]
    msg = str(info.value)
    assert '"missing"' in msg and "'a'" in msg and "'b'" in msg


def test_getitem_missing_key_raises_tensordict_key_error() -> None:
    with pytest.raises(TensorDictKeyError):
        make()["b", "zz"]


def test_key_error_lists_only_a_few_keys() -> None:
    td = TensorDict({f"k{i}": torch.zeros(()) for i in range(30)})
    with pytest.raises(KeyError) as info:
        td["missing"]
    assert "k0" in str(info.value) and "k29" not in str(info.value)


# ---------------------------------------------------------------------- set / set_
def test_set_returns_self() -> None:
    td = make()
    assert td.set("x", torch.zeros(3)) is td


def test_set_replaces_entry() -> None:
    td = make()
    new = torch.ones(3, 4)
    td.set("a", new)
    assert td["a"] is new


def test_set_wrong_leading_dims_raises_and_leaves_td_unchanged() -> None:
    td = make()
    before = snapshot(td)
    with pytest.raises(BatchSizeError) as info:
        td.set("x", torch.zeros(4))
    assert "'x'" in str(info.value) and "[4]" in str(info.value) and "[3]" in str(info.value)
    assert_unchanged(td, before)


def test_failed_nested_set_does_not_create_intermediate_tensordicts() -> None:
    td = make()
    with pytest.raises(BatchSizeError):
        td.set(("new", "leaf"), torch.zeros(5))
    assert "new" not in td.keys()


def test_set_dict_value_becomes_tensordict() -> None:
    td = make()
    td.set("d", {"e": torch.zeros(3)})
    assert isinstance(td["d"], TensorDict) and td["d"].batch_size == torch.Size([3])


def test_set_inplace_writes_into_existing_tensor() -> None:
    td = make()
    a = td["a"]
    td.set("a", torch.ones(3, 4), inplace=True)
    assert td["a"] is a and a.sum() == 12


def test_set_inplace_on_missing_key_creates_it() -> None:
    td = make()
    td.set("new", torch.zeros(3), inplace=True)
    assert "new" in td.keys()


def test_set__writes_in_place() -> None:
    td = make()
    c = td["b", "c"]
    td.set_(("b", "c"), torch.full((3,), 7.0))
    assert td["b", "c"] is c and c.tolist() == [7.0, 7.0, 7.0]


def test_set__broadcasts_value() -> None:
    td = make()
    td.set_("a", torch.arange(4.0))
    assert torch.equal(td["a"][2], torch.arange(4.0))


def test_set__missing_key_raises_key_error() -> None:
    with pytest.raises(KeyError, match='"zz"'):
        make().set_("zz", torch.zeros(3))


def test_set__wrong_shape_raises_naming_key_and_shapes() -> None:
    td = make()
    with pytest.raises(ShapeMismatchError) as info:
        td.set_("a", torch.zeros(2))
    msg = str(info.value)
    assert "'a'" in msg and "[2]" in msg and "[3, 4]" in msg
    assert td["a"].sum() == 0


def test_set__on_tensordict_entry_updates_in_place() -> None:
    td = make()
    c = td["b", "c"]
    td.set_("b", {"c": torch.zeros(3)})
    assert td["b", "c"] is c and c.sum() == 0


def test_set_at_writes_at_index() -> None:
    td = make()
    td.set_at_(("b", "c"), 5.0, 1)
    assert td["b", "c"].tolist() == [1.0, 5.0, 1.0]


def test_set_at_missing_key_raises() -> None:
    with pytest.raises(KeyError, match='"zz"'):
        make().set_at_("zz", 1.0, 0)


def test_get_at_reads_at_index() -> None:
    td = TensorDict({"a": torch.arange(6).reshape(3, 2)}, [3])
    assert torch.equal(td.get_at("a", 1), torch.tensor([2, 3]))


def test_get_at_missing_key_returns_default_or_raises() -> None:
    td = make()
    assert td.get_at("zz", 0, default=None) is None
    with pytest.raises(KeyError, match='"zz"'):
        td.get_at("zz", 0)


# ---------------------------------------------------------------------- update / update_
def test_update_adds_and_replaces_entries() -> None:
    td = make()
    td.update({"a": torch.ones(3, 4), "x": torch.zeros(3)})
    assert td["a"].sum() == 12 and "x" in td.keys()


def test_update_merges_nested_tensordicts() -> None:
    td = make()
    td.update({"b": {"d": torch.zeros(3)}})
    assert set(td["b"].keys()) == {"c", "d"}


def test_update_from_tensordict() -> None:
    td = make()
    td.update(TensorDict({"b": {"d": torch.zeros(3)}}, [3]))
    assert ("b", "d") in td.keys(True) and ("b", "c") in td.keys(True)


def test_update_returns_self() -> None:
    td = make()
    assert td.update({}) is td


def test_update_with_clone_copies_values() -> None:
    v = torch.zeros(3)
    td = make().update({"v": v}, clone=True)
    assert td["v"] is not v and torch.equal(td["v"], v)


def test_update_keys_to_update_filters() -> None:
    td = make().update({"x": torch.zeros(3), "y": torch.zeros(3)}, keys_to_update=["x"])
    assert "x" in td.keys() and "y" not in td.keys()


def test_update_inplace_keeps_tensor_identity() -> None:
    td = make()
    a = td["a"]
    td.update({"a": torch.ones(3, 4)}, inplace=True)
    assert td["a"] is a and a.sum() == 12


def test_failed_update_leaves_td_unchanged() -> None:
    td = make()
    before = snapshot(td)
    with pytest.raises(BatchSizeError, match="'z'"):
        td.update({"a": torch.ones(3, 4), "new": {"x": torch.zeros(3)}, "z": torch.zeros(2)})
    assert_unchanged(td, before)
    assert "new" not in td.keys()


def test_failed_nested_update_leaves_td_unchanged() -> None:
    td = make()
    before = snapshot(td)
    with pytest.raises(BatchSizeError, match="'e'"):
        td.update({"b": {"d": torch.zeros(3), "e": torch.zeros(4)}})
    assert_unchanged(td, before)


def test_update__writes_in_place() -> None:
    td = make()
    a = td["a"]
    td.update_({"a": torch.ones(3, 4), "b": {"c": torch.zeros(3)}})
    assert td["a"] is a and a.sum() == 12 and td["b", "c"].sum() == 0


def test_update__missing_key_with_no_match_raises_and_writes_nothing() -> None:
    td = make()
    before = snapshot(td)
    with pytest.raises(KeyError, match="'zz'"):
        td.update_({"zz": torch.ones(3), "b": {"zz": torch.ones(3)}})
    with pytest.raises(KeyError, match="'zz'"):
        td.update_({"a": torch.ones(3, 4), "zz": torch.ones(3)}, keys_to_update=["a", "zz"])
    assert_unchanged(td, before)


def test_update__skips_missing_keys_when_another_matches() -> None:
    # as upstream: TorchRL's collector workers update_ a locked buffer from a richer tensordict
    td = make().lock_()
    a = td["a"]
    td.update_(TensorDict({"a": torch.ones(3, 4), "zz": torch.ones(3)}, [3]))
    assert td["a"] is a and a.sum() == 12 and "zz" not in td.keys()
    td.update_({"a": torch.zeros(3, 4), "new": {"c": torch.ones(3)}})
    assert a.sum() == 0 and "new" not in td.keys()


def test_update__wrong_shape_raises_and_writes_nothing() -> None:
    td = make()
    before = snapshot(td)
    with pytest.raises(ShapeMismatchError) as info:
        td.update_({"a": torch.ones(3, 4), "b": {"c": torch.ones(4)}})
    assert "('b', 'c')" in str(info.value) and "[4]" in str(info.value)
    assert_unchanged(td, before)


def test_copy__copies_values_in_place() -> None:
    td = make()
    a = td["a"]
    src = make()
    src["a"] += 2
    td.copy_(src)
    assert td["a"] is a and a.sum() == 24


# ---------------------------------------------------------------------- pop / del / rename
def test_pop_removes_and_returns() -> None:
    td = make()
    a = td["a"]
    assert td.pop("a") is a and "a" not in td.keys()


def test_pop_nested_key() -> None:
    td = make()
    td.pop(("b", "c"))
    assert list(td["b"].keys()) == []


def test_pop_missing_returns_default() -> None:
    assert make().pop("zz", 3) == 3


def test_pop_missing_without_default_raises() -> None:
    with pytest.raises(KeyError, match='"zz"'):
        make().pop("zz")


def test_del_removes_key() -> None:
    td = make()
    del td["a"]
    assert "a" not in td.keys()


def test_del_nested_key() -> None:
    td = make()
    del td["b", "c"]
    assert ("b", "c") not in td.keys(True)


def test_del_missing_key_raises() -> None:
    with pytest.raises(KeyError, match='"zz"'):
        del make()["zz"]


def test_rename_key_moves_entry() -> None:
    td = make()
    a = td["a"]
    td.rename_key_("a", "z")
    assert td["z"] is a and "a" not in td.keys()


def test_rename_key_to_nested_key() -> None:
    td = make()
    td.rename_key_(("b", "c"), ("b", "cc"))
    assert set(td["b"].keys()) == {"cc"}


def test_rename_key_missing_raises() -> None:
    with pytest.raises(KeyError, match='"zz"'):
        make().rename_key_("zz", "q")


def test_rename_key_safe_refuses_to_overwrite() -> None:
    td = make()
    with pytest.raises(KeyError, match="'b'"):
        td.rename_key_("a", "b", safe=True)
    assert "a" in td.keys()


# ---------------------------------------------------------------------- select / exclude
def test_select_keeps_only_given_keys_sharing_tensors() -> None:
    td = make()
    out = td.select("a", ("b", "c"))
    assert list(out.keys(True, True)) == ["a", ("b", "c")]
    assert out["a"] is td["a"]


def test_select_missing_key_strict_raises() -> None:
    with pytest.raises(KeyError, match='"zz"'):
        make().select("zz")


def test_select_missing_key_not_strict_skips() -> None:
    assert list(make().select("a", "zz", strict=False).keys()) == ["a"]


def _with_empty_and_full_subs() -> TensorDict:
    d = TensorDict(x=torch.zeros(2), y=torch.ones(2), batch_size=[2])
    return TensorDict(a=torch.zeros(2), d=d, e=TensorDict(batch_size=[2]), batch_size=[2])


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ([("d", "missing")], ["d"]),  # the sub-tensordict on the way stays, empty
        ([("d", "missing"), "a"], ["a", "d"]),
        ([("d", "x", "deeper")], ["d"]),  # ... up to the last tensordict the path goes through
        ([("a", "deeper")], []),  # a tensor is not a tensordict: nothing kept
        ([("nope", "missing")], []),
        ([("e", "missing")], ["e"]),
    ],
)
def test_select_missing_nested_key_not_strict_keeps_the_tensordicts_on_the_way(
    keys: list, expected: list
) -> None:
    td = _with_empty_and_full_subs()
    out = td.select(*keys, strict=False)
    assert sorted(out.keys()) == expected
    for key in set(expected) - {"a"}:
        assert out[key].batch_size == td[key].batch_size and list(out[key].keys()) == []
    lazy = torch.stack([td, td.clone()]).select(*keys, strict=False)
    assert sorted(lazy.keys()) == expected
    inplace = td.clone(False)
    assert inplace.select(*keys, strict=False, inplace=True) is inplace
    assert sorted(inplace.keys()) == expected


def test_select_missing_nested_key_not_strict_on_lazy_stacks_and_tensorclasses() -> None:
    from tensordict import LazyStackedTensorDict, tensorclass

    td = _with_empty_and_full_subs()
    lazy = LazyStackedTensorDict(td, td.clone(), stack_dim=0).select(("d", "z"), strict=False)
    assert list(lazy.keys()) == ["d"] and list(lazy["d"].keys()) == []

    @tensorclass
    class Holder:
        a: torch.Tensor
        d: TensorDict

    tc = Holder(a=torch.zeros(2), d=TensorDict(x=torch.zeros(2), batch_size=[2]), batch_size=[2])
    out = tc.select(("d", "z"), strict=False)
    assert out.a is None and isinstance(out.d, TensorDict) and list(out.d.keys()) == []


def test_select_does_not_modify_source() -> None:
    td = make()
    td.select("a")
    assert list(td.keys()) == ["a", "b", "s"]


def test_exclude_drops_given_keys() -> None:
    td = make()
    out = td.exclude("a", ("b", "c"))
    assert list(out.keys(True)) == ["b", "s"]
    assert list(td.keys()) == ["a", "b", "s"]


def test_select_inplace() -> None:
    td = make()
    assert td.select("a", inplace=True) is td
    assert list(td.keys()) == ["a"]


# ---------------------------------------------------------------------- setdefault / fromkeys
def test_setdefault_sets_missing_key() -> None:
    td = make()
    v = td.setdefault("x", torch.ones(3))
    assert torch.equal(v, torch.ones(3)) and "x" in td.keys()


def test_setdefault_keeps_existing_key() -> None:
    td = make()
    a = td["a"]
    assert td.setdefault("a", torch.ones(3, 4)) is a


def test_fromkeys_sets_every_key_to_value() -> None:
    td = TensorDict.fromkeys(["a", ("b", "c")], 0)
    assert td["a"].item() == 0 and td["b", "c"].item() == 0


# ---------------------------------------------------------------------- copies
def test_clone_copies_tensors() -> None:
    td = make()
    c = td.clone()
    assert c["a"] is not td["a"] and torch.equal(c["a"], td["a"])
    c["b", "c"] += 1
    assert td["b", "c"].sum() == 3


def test_clone_keeps_structure_batch_size_and_non_tensor() -> None:
    td = make()
    c = td.clone()
    assert list(c.keys(True)) == list(td.keys(True))
    assert c.batch_size == td.batch_size and c["s"] == "x"


def test_clone_without_recurse_shares_tensors_but_not_structure() -> None:
    td = make()
    c = td.clone(recurse=False)
    assert c["a"] is td["a"]
    c["new"] = torch.zeros(3)
    c["b", "new"] = torch.zeros(3)
    assert "new" not in td.keys() and ("b", "new") not in td.keys(True)


def test_empty_has_same_batch_size_and_device_and_no_keys() -> None:
    td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.zeros(3)}}, [3], device="cpu")
    e = td.empty()
    assert e.batch_size == td.batch_size and e.device == td.device
    assert len(e.keys()) == 0


def test_empty_recurse_keeps_nested_structure_without_leaves() -> None:
    e = make().empty(recurse=True)
    assert sorted(e.keys(True)) == ["b", "s"]  # (non-tensor entries stay, as upstream)
    assert e["b"].batch_size == torch.Size([3])


def test_empty_then_set() -> None:
    td = make()
    e = td.empty()
    e.set("y", torch.zeros(3))
    assert "y" not in td.keys()


def test_zero_fills_zeros_in_place() -> None:
    td = make()
    c = td["b", "c"]
    assert td.zero_() is td
    assert c.sum() == 0


def test_to_dtype_casts_floating_leaves() -> None:
    out = make().to(torch.float64)
    assert out["a"].dtype == torch.float64 and out["b", "c"].dtype == torch.float64


def test_to_device_sets_device() -> None:
    out = TensorDict({"a": torch.zeros(2)}, [2]).to("cpu")
    assert out.device == torch.device("cpu")


def test_cpu_returns_cpu_tensordict() -> None:
    assert make().cpu().device == torch.device("cpu")


def test_to_with_unsupported_argument_raises() -> None:
    with pytest.raises(TypeError, match="to\\(\\)"):
        make().to(object())


def test_contiguous_makes_leaves_contiguous() -> None:
    td = TensorDict({"a": torch.zeros(4, 3).t()}, [3])
    assert not td["a"].is_contiguous()
    assert td.contiguous()["a"].is_contiguous()


def test_to_tensordict_is_a_copy() -> None:
    td = make()
    out = td.to_tensordict()
    assert type(out) is TensorDict and out["a"] is not td["a"]
    assert torch.equal(out["a"], td["a"])


def test_to_dict_gives_nested_dicts() -> None:
    d = make().to_dict()
    assert set(d) == {"a", "b", "s"}
    assert isinstance(d["b"], dict) and isinstance(d["b"]["c"], torch.Tensor)
    assert d["s"] == "x"


def test_from_dict_round_trips_to_dict() -> None:
    td = make()
    back = TensorDict.from_dict(td.to_dict(), batch_size=[3])
    assert (back == td).all()


def test_from_dict_auto_batch_size() -> None:
    td = TensorDict.from_dict(
        {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 2)}}, auto_batch_size=True
    )
    assert td.batch_size == torch.Size([3, 4])


def test_detach_drops_grad() -> None:
    x = torch.zeros(3, requires_grad=True)
    out = TensorDict({"x": x * 2}, [3]).detach()
    assert not out["x"].requires_grad


def test_non_tensor_data_is_kept_by_clone() -> None:
    assert isinstance(make().clone().get("s"), NonTensorData)


def test_share_memory_moves_leaves_to_shared_memory_and_locks() -> None:
    td = make().share_memory_()
    assert td.is_shared() and td.is_locked
    assert td["b", "c"].is_shared()


def test_is_shared_false_for_regular_tensors() -> None:
    assert not make().is_shared()


def test_is_empty() -> None:
    assert TensorDict({"a": {}}, []).is_empty()
    assert not make().is_empty()


def test_failed_rename_key_keeps_the_entry() -> None:
    td = make()
    with pytest.raises(TensorDictKeyError, match=r"\('b', 'c'\)"):
        td.rename_key_("a", ("b", "c", "x"))
    assert "a" in td.keys() and td["b", "c"].shape == torch.Size([3])


def test_rename_key_to_itself_is_a_no_op() -> None:
    td = make()
    a = td["a"]
    td.rename_key_("a", "a")
    assert td["a"] is a


def test_rename_key_into_itself_nests_the_entry() -> None:
    td = make()
    c = td["b", "c"]
    td.rename_key_("b", ("b", "inner"))
    assert td["b", "inner", "c"] is c


def test_setting_a_tensordict_with_fewer_batch_dims_gives_it_the_parents_batch_size() -> None:
    td = TensorDict({"a": torch.zeros(4, 3)}, [4, 3])
    inner = TensorDict({"x": torch.randn(4, 3, 1)}, [])
    td["inner"] = inner
    assert td["inner"].batch_size == (4, 3) and inner.batch_size == ()  # a shallow copy
    assert td["inner", "x"] is inner["x"]
    with pytest.raises(RuntimeError, match="batch size"):
        td["bad"] = TensorDict({"x": torch.zeros(4, 1)}, [4])  # its leaves do not allow [4, 3]


def test_to_accepts_other_and_upstreams_transfer_keywords() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    assert td.to(other=torch.zeros(1, dtype=torch.float64))["a"].dtype == torch.float64
    assert td.to(torch.float16, non_blocking_pin=False, num_threads=2)["a"].dtype == torch.float16


def test_set_at_accepts_a_numpy_array_and_to_takes_a_tensordicts_dtype() -> None:
    td = TensorDict({"a": torch.zeros(3, 2, dtype=torch.float64)}, [3])
    td.set_at_("a", np.ones(2), 1)
    assert td["a"][1].tolist() == [1.0, 1.0]
    like = TensorDict({"x": torch.zeros(1, dtype=torch.float16)}, [])
    assert td.to(like)["a"].dtype == torch.float16


def test_lists_become_tensors_or_per_element_non_tensor_stacks_as_upstream() -> None:
    from tensordict import NonTensorData, NonTensorStack, set_list_to_stack

    td = TensorDict(batch_size=[2])
    td["n"] = [1, 2]
    td["t"] = [torch.zeros(3), torch.ones(3)]
    td["s"] = ["x", "y"]
    assert torch.equal(td["n"], torch.tensor([1, 2])) and td["t"].shape == (2, 3)
    assert isinstance(td.get("s"), NonTensorStack) and td[1]["s"] == "y"
    with pytest.warns(DeprecationWarning), set_list_to_stack(False):
        td["o"] = ["x", "y"]
    assert isinstance(td.get("o"), NonTensorData)


def test_update_and_update_take_entries_as_keywords() -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3])
    td.update({"a": torch.full((3,), 2.0)}, a=torch.full((3,), 7.0), b=torch.ones(3))
    assert td["a"].tolist() == [7.0] * 3 and td["b"].tolist() == [1.0] * 3
    ref = td["a"]
    assert td.update_(a=torch.zeros(3)) is td and td["a"] is ref and td["a"].sum() == 0
    with pytest.raises(KeyError, match="was not found"):
        td.update_(c=torch.ones(3))
    assert td.update() is td


def test_select_and_exclude_inside_a_nested_tensorclass_keep_its_class() -> None:
    from tensordict import tensorclass

    @tensorclass
    class Obs:
        text: str
        value: torch.Tensor

    td = TensorDict(tc=Obs("0", torch.zeros(())), observation=torch.zeros(1))
    both = td.select(("tc", "text"), ("tc", "value"), "observation")
    assert type(both.get("tc")) is Obs and both.get("tc").text == "0"
    one = td.select(("tc", "value"))
    assert type(one.get("tc")) is Obs and one.get("tc").text is None
    assert one.get("tc").value is td.get("tc").value
    missing = td.select(("tc", "nope"), strict=False)
    assert type(missing.get("tc")) is Obs and missing.get("tc").value is None
    excluded = td.exclude(("tc", "text"))
    assert type(excluded.get("tc")) is Obs and excluded.get("tc").text is None
    assert td.get("tc").text == "0"  # (the source keeps its fields)
