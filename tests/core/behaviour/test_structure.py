"""clear, popitem, create_nested, split_keys, replace, update_at_, non-tensor accessors, tolist."""

from __future__ import annotations

import pytest
import torch

from tensordict import NonTensorData, TensorDict, is_leaf_nontensor
from tensordict.errors import LockedError, ShapeMismatchError, TensorDictKeyError


def make() -> TensorDict:
    return TensorDict(
        {"a": torch.zeros(3, 2), "b": {"c": torch.arange(3)}, "s": "label"}, batch_size=[3]
    )


def test_clear_and_popitem() -> None:
    td = make()
    assert td.popitem()[0] == "s" and list(td.keys()) == ["a", "b"]
    assert td.clear() is td and list(td.keys()) == []
    with pytest.raises(TensorDictKeyError, match="empty"):
        td.popitem()
    with pytest.raises(LockedError):
        make().lock_().clear()


def test_create_nested_uses_the_batch_size_of_its_parent() -> None:
    td = make()
    td.create_nested("n")
    td.create_nested(("b", "m"))
    assert td["n"].batch_size == (3,) and list(td["n"].keys()) == []
    assert td["b", "m"].batch_size == td["b"].batch_size
    with pytest.raises(LockedError):
        make().lock_().create_nested("x")


def test_split_keys() -> None:
    td = make()
    first, second, rest = td.split_keys(["a"], [("b", "c")])
    assert list(first.keys()) == ["a"] and ("b", "c") in list(second.keys(True))
    assert list(rest.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)) == [
        "s"
    ]
    assert "a" in list(td.keys())  # not in place
    with pytest.raises(TensorDictKeyError, match='"zz"'):
        td.split_keys(["zz"])
    only, _ = td.split_keys(["a", "zz"], strict=False)
    assert list(only.keys()) == ["a"]
    filled, _ = td.split_keys(["zz"], default=torch.ones(3))
    assert torch.equal(filled["zz"], torch.ones(3))
    part, same = td.split_keys(["a"], inplace=True)
    assert same is td and "a" not in list(td.keys()) and list(part.keys()) == ["a"]


def test_replace_is_a_shallow_copy_with_new_entries() -> None:
    td = make()
    new = td.replace({"a": torch.ones(3, 2)}, s="other")
    assert new is not td and new["a"].sum() == 6 and new["s"] == "other"
    assert td["a"].sum() == 0 and td["s"] == "label"
    assert new["b", "c"] is td["b", "c"]  # shallow: untouched entries are shared


def test_update_at_writes_at_an_index_and_checks_everything_first() -> None:
    td = make()
    td.update_at_({"a": torch.ones(2), ("b", "c"): torch.tensor(9)}, 1)
    assert td["a"][1].tolist() == [1.0, 1.0] and td["b", "c"].tolist() == [0, 9, 2]
    src = TensorDict(
        {"a": torch.full((2, 2), 5.0), "b": {"c": torch.zeros(2, dtype=torch.long)}}, [2]
    )
    td.update_at_(src, slice(0, 2), keys_to_update=["a"])
    assert td["a"][:, 0].tolist() == [5.0, 5.0, 0.0] and td["b", "c"].tolist() == [0, 9, 2]
    before = td.clone()
    with pytest.raises((ShapeMismatchError, RuntimeError)):
        td.update_at_({"a": torch.ones(2), ("b", "c"): torch.ones(7)}, 0)
    assert (td == before).all()


def test_non_tensor_accessors() -> None:
    td = make()
    assert td.get_non_tensor("s") == "label"
    assert torch.equal(td.get_non_tensor("a"), td["a"])  # tensors come back as they are
    assert td.get_non_tensor("missing", None) is None
    with pytest.raises(TensorDictKeyError):
        td.get_non_tensor("missing")
    td.set_non_tensor(("b", "meta"), {"k": 1})
    assert isinstance(td["b"]._get_str("meta", None), NonTensorData)
    assert td.get_non_tensor(("b", "meta")) == {"k": 1}
    assert td.non_tensor_items() == [("s", "label")]
    assert dict(td.non_tensor_items(include_nested=True)) == {"s": "label", ("b", "meta"): {"k": 1}}


def test_tolist_gives_a_dict_per_batch_element() -> None:
    td = TensorDict({"x": torch.arange(4).reshape(2, 2), "n": {"y": torch.ones(2, 2)}}, [2, 2])
    out = td.tolist(convert_tensors=True)
    assert out == [
        [{"x": 0, "n": {"y": 1.0}}, {"x": 1, "n": {"y": 1.0}}],
        [{"x": 2, "n": {"y": 1.0}}, {"x": 3, "n": {"y": 1.0}}],
    ]
    assert isinstance(td.tolist()[0][0]["x"], torch.Tensor)


def test_filter_empty_removes_empty_nested_tensordicts() -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"m": {}}, "k": {"x": torch.ones(2), "e": {}}}, [2])
    assert td.filter_empty_() is td
    assert list(td.keys(include_nested=True)) == ["a", ("k", "x"), "k"]
    locked = TensorDict({"n": {}}, [2]).lock_()
    with pytest.raises(LockedError):
        locked.filter_empty_()


def test_load_reads_a_saved_tensordict_into_this_one(tmp_path) -> None:
    TensorDict({"a": torch.arange(3), "n": {"b": torch.ones(3)}}, [3]).memmap(tmp_path)
    td = TensorDict({"z": torch.zeros(3)}, [3])
    assert td.load_(tmp_path) is td
    assert set(td.keys(include_nested=True, leaves_only=True)) == {"z", "a", ("n", "b")}
    assert td["a"].tolist() == [0, 1, 2]


# ---------------------------------------------------------------------- from the second review
def test_split_keys_in_place_is_all_or_nothing() -> None:
    td = make()
    with pytest.raises(TensorDictKeyError):
        td.split_keys(["a"], ["zz"], inplace=True)
    assert "a" in list(td.keys())
    _, second, same = td.split_keys(["a"], ["a", "s"], inplace=True)  # a key twice: fine
    assert same is td and list(td.keys()) == ["b"] and list(second.keys()) == ["a", "s"]


def test_separates_accepts_strict_and_drops_what_it_emptied() -> None:
    td = TensorDict({"n": {"x": torch.zeros(2), "y": torch.ones(2)}, "k": {}}, [2])
    part = td.separates(("n", "x"), ("n", "y"))
    assert list(td.keys()) == []  # (as upstream: every nested tensordict without leaves goes)
    assert set(part.keys(include_nested=True, leaves_only=True)) == {("n", "x"), ("n", "y")}
    assert list(td.separates("zz", strict=False).keys()) == []
    td = TensorDict({"n": {"x": torch.zeros(2)}, "k": {}}, [2])
    td.separates(("n", "x"), filter_empty=False)
    assert list(td.keys()) == ["n", "k"] and not td["n"].keys()


def test_update_at_with_nested_dicts_tensorclasses_and_keys_to_update() -> None:
    from tests.tensorclass.classes import Sample

    td = TensorDict({"a": torch.zeros(3), "n": {"x": torch.zeros(3)}}, [3])
    td.update_at_(
        {"n": {"x": torch.tensor(5.0)}, "a": torch.tensor(1.0)}, 1, keys_to_update=[("n", "x")]
    )
    assert td["n", "x"].tolist() == [0.0, 5.0, 0.0] and td["a"].tolist() == [0.0, 0.0, 0.0]
    samples = TensorDict({"obs": torch.zeros(3)}, [3])
    samples.update_at_(Sample(obs=torch.tensor(9.0), batch_size=[]), 2, keys_to_update=["obs"])
    assert samples["obs"].tolist() == [0.0, 0.0, 9.0]


def test_setitem_merges_nested_keys_given_both_ways_and_leaves_the_callers_dict_alone() -> None:
    td = TensorDict({"b": {"c": torch.zeros(3), "d": torch.zeros(3)}}, [3])
    td[0] = {("b", "c"): torch.tensor(1.0), "b": {"d": torch.tensor(2.0)}}
    assert td["b", "c"][0] == 1.0 and td["b", "d"][0] == 2.0
    user = {"d": torch.tensor(3.0)}
    td[1] = {"b": user, ("b", "c"): torch.tensor(4.0)}
    assert list(user) == ["d"] and td["b", "c"][1] == 4.0 and td["b", "d"][1] == 3.0


def test_update_at_writes_non_tensor_entries_into_the_tensordict_itself() -> None:
    td = TensorDict({"val": NonTensorData(data=0, batch_size=[10])}, [10])
    td.update_at_(
        TensorDict({"val": NonTensorData(data=1, batch_size=[5])}, [5]), slice(1, None, 2)
    )
    assert td.get("val").tolist() == [0, 1] * 5
    td = TensorDict({"a": torch.zeros(4), "s": "x"}, [4])
    td.update_at_({"s": "y"}, 1)
    assert td["s"] == ["x", "y", "x", "x"]


def test_update_at_refuses_a_key_the_tensordict_lacks() -> None:
    td = TensorDict({"a": torch.zeros(4)}, [4])
    with pytest.raises(KeyError):
        td.update_at_({"b": torch.tensor(1.0)}, 1)
    assert list(td.keys()) == ["a"]


def test_select_of_a_nested_key_keeps_the_nested_batch_size_and_names() -> None:
    nested = TensorDict({"a": torch.zeros(2, 3, 4), "b": torch.zeros(2, 3)}, [2, 3])
    td = TensorDict({"a": torch.zeros(2), "nested": nested}, [2], names=["x"])
    out = td.select("a", ("nested", "a"))
    assert out["nested"].batch_size == (2, 3) and out["nested"].names == ["x", None]
    assert list(out["nested"].keys()) == ["a"]
    assert td.exclude(("nested", "b"))["nested"].batch_size == (2, 3)
