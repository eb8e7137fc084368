"""Nested keys, key views, flatten_keys / unflatten_keys."""

# Some tests spell membership as `key in td.keys()` on purpose (the view under test).
# ruff: noqa: SIM118

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, is_leaf_nontensor, unravel_key, unravel_key_list
from tensordict.errors import KeyTypeError, TensorDictKeyError


def make() -> TensorDict:
    return TensorDict(
        {"a": torch.zeros(3), "b": {"c": torch.ones(3), "d": {"e": torch.ones(3, 2)}}, "s": "x"},
        batch_size=[3],
    )


def test_getitem_tuple_key_reads_nested_leaf() -> None:
    assert make()["b", "d", "e"].shape == torch.Size([3, 2])


def test_get_tuple_key_reads_nested_leaf() -> None:
    assert make().get(("b", "c")).shape == torch.Size([3])


def test_nested_tuples_in_keys_are_flattened() -> None:
    td = make()
    assert td["b", ("d", "e")] is td["b", "d", "e"]


def test_one_element_tuple_key_is_the_string_key() -> None:
    td = make()
    assert td[("a",)] is td["a"]


def test_set_tuple_key_creates_intermediate_tensordicts() -> None:
    td = TensorDict({}, [3])
    td.set(("x", "y", "z"), torch.zeros(3))
    assert isinstance(td["x"], TensorDict) and isinstance(td["x", "y"], TensorDict)
    assert td["x", "y"].batch_size == torch.Size([3])


def test_setitem_tuple_key_creates_intermediate_tensordicts() -> None:
    td = TensorDict({}, [2])
    td["x", "y"] = torch.ones(2)
    assert torch.equal(td["x"]["y"], torch.ones(2))


def test_set_through_a_leaf_raises_key_error_and_writes_nothing() -> None:
    td = make()
    with pytest.raises(TensorDictKeyError, match="'a'"):
        td.set(("a", "x"), torch.zeros(3))
    assert isinstance(td["a"], torch.Tensor)
    assert list(td.keys()) == ["a", "b", "s"]


def test_key_of_wrong_type_raises_key_type_error() -> None:
    td = make()
    with pytest.raises(KeyTypeError, match="int"):
        td.get(1)  # type: ignore[arg-type]
    with pytest.raises(KeyTypeError, match="int"):
        td.set(1, torch.zeros(3))  # type: ignore[arg-type]


def test_tuple_key_with_non_string_part_raises_key_type_error() -> None:
    with pytest.raises(KeyTypeError, match=r"\('a', 1\)"):
        make()["a", 1]


def test_key_type_error_is_a_type_error() -> None:
    assert issubclass(KeyTypeError, TypeError)


def test_empty_tuple_key_raises() -> None:
    with pytest.raises(KeyTypeError, match="empty"):
        make().get(())


# ---------------------------------------------------------------------- key views
def test_keys_default_are_top_level_in_insertion_order() -> None:
    assert list(make().keys()) == ["a", "b", "s"]


def test_keys_include_nested_list_a_nested_tensordict_after_its_keys() -> None:
    keys = list(make().keys(include_nested=True))
    assert keys == ["a", ("b", "c"), ("b", "d", "e"), ("b", "d"), "b", "s"]


def test_items_and_values_list_a_nested_tensordict_before_its_entries() -> None:
    td = make()
    keys = ["a", "b", ("b", "c"), ("b", "d"), ("b", "d", "e"), "s"]
    assert [k for k, _ in td.items(include_nested=True)] == keys
    assert [v is td.get(k) for k, v in zip(keys, td.values(include_nested=True))] == [True] * 6


def test_keys_sort_orders_by_dotted_key() -> None:
    td = TensorDict({"b": {"a": torch.zeros(())}, "a": torch.zeros(()), "b.0": torch.zeros(())})
    assert list(td.keys(True, sort=True)) == ["a", "b", "b.0", ("b", "a")]
    assert [k for k, _ in td.items(True, sort=True)] == ["a", "b", "b.0", ("b", "a")]


def test_membership_of_a_non_key_in_a_keys_view_raises_type_error() -> None:
    with pytest.raises(TypeError, match="keys are always strings"):
        1 in make().keys(include_nested=True)  # noqa: B015


def test_keys_include_nested_leaves_only() -> None:
    keys = list(make().keys(include_nested=True, leaves_only=True))
    assert keys == ["a", ("b", "c"), ("b", "d", "e")]  # the string "s" is not a leaf, as upstream
    with_str = list(make().keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor))
    assert with_str == ["a", ("b", "c"), ("b", "d", "e"), "s"]


def test_keys_leaves_only_without_nesting() -> None:
    assert list(make().keys(leaves_only=True)) == ["a"]
    assert list(make().keys(leaves_only=True, is_leaf=is_leaf_nontensor)) == ["a", "s"]


def test_keys_view_supports_in_with_nested_keys() -> None:
    keys = make().keys(include_nested=True)
    assert ("b", "d", "e") in keys
    assert ("b", "x") not in keys
    assert "a" in keys


def test_nested_key_not_in_flat_keys_view() -> None:
    assert ("b", "c") not in make().keys()


def test_leaves_only_view_lists_no_tensordict_but_answers_in_for_them() -> None:
    keys = make().keys(include_nested=True, leaves_only=True)
    assert "b" not in list(keys)
    assert "b" in keys  # (membership asks existence, as upstream)
    assert ("b", "c") in keys


def test_keys_view_len() -> None:
    td = make()
    assert len(td.keys()) == 3
    assert len(td.keys(include_nested=True)) == 6
    assert len(td.keys(include_nested=True, leaves_only=True)) == 3
    assert len(td.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)) == 4


def test_keys_view_is_live() -> None:
    td = make()
    keys = td.keys()
    td["new"] = torch.zeros(3)
    assert "new" in keys and len(keys) == 4


def test_values_follow_key_order() -> None:
    td = make()
    values = list(td.values(include_nested=True, leaves_only=True))
    assert values[0] is td["a"] and values[1] is td["b", "c"]


def test_items_pairs_keys_and_values() -> None:
    td = make()
    items = dict(td.items(include_nested=True, leaves_only=True))
    assert items["b", "d", "e"] is td["b", "d", "e"]


@pytest.mark.parametrize(
    ("key", "present"),
    [("a", True), ("b", True), (("b", "c"), True), (("b", ("d", "e")), True), (("b",), True)]
    + [("z", False), (("b", "z"), False), (("a", "x"), False)],
)
def test_in_answers_key_membership_with_nested_keys(key: object, present: bool) -> None:
    assert (key in make()) is present


@pytest.mark.parametrize("key", [1, None, (), ("b", 1), torch.zeros(2)])
def test_in_with_something_that_is_not_a_key_raises(key: object) -> None:
    with pytest.raises(RuntimeError, match="NestedKey"):
        key in make()  # noqa: B015


# ---------------------------------------------------------------------- flatten / unflatten
def test_flatten_keys_joins_with_separator() -> None:
    flat = make().flatten_keys("/")
    assert list(flat.keys()) == ["a", "b/c", "b/d/e", "s"]


def test_flatten_keys_shares_tensors() -> None:
    td = make()
    assert td.flatten_keys()["b.c"] is td["b", "c"]


def test_flatten_keys_default_separator_is_dot() -> None:
    assert "b.d.e" in make().flatten_keys().keys()


def test_unflatten_keys_inverts_flatten_keys() -> None:
    td = make()
    back = td.flatten_keys("/").unflatten_keys("/")
    assert list(back.keys(True, True)) == list(td.keys(True, True))
    assert back["b", "d"].batch_size == torch.Size([3])


def test_flatten_keys_collision_raises_naming_the_key() -> None:
    td = TensorDict({"a.b": torch.zeros(()), "a": {"b": torch.zeros(())}})
    with pytest.raises(TensorDictKeyError, match=r"'a\.b'"):
        td.flatten_keys()


def test_flatten_keys_inplace() -> None:
    td = make()
    assert td.flatten_keys(inplace=True) is td
    assert "b.c" in td.keys()


# ---------------------------------------------------------------------- helpers
def test_unravel_key() -> None:
    assert unravel_key(("a",)) == "a"
    assert unravel_key(("a", ("b", "c"))) == ("a", "b", "c")
    assert unravel_key("a") == "a"


def test_unravel_key_list() -> None:
    assert unravel_key_list([("a",), ("b", ("c",))]) == ["a", ("b", "c")]


def test_sorted_keys() -> None:
    td = TensorDict({"b": torch.zeros(()), "a": torch.zeros(())})
    assert td.sorted_keys() == ["a", "b"]


def test_entries_set_inside_a_flatten_keys_block_reach_the_tensordict() -> None:
    td = make()
    with td.flatten_keys(",") as flat:
        flat["new,x"] = torch.ones(3)
        with flat.unflatten_keys(",") as nested:
            nested["other", "y"] = torch.zeros(3)
    assert torch.equal(td["new", "x"], torch.ones(3)) and torch.equal(
        td["other", "y"], torch.zeros(3)
    )


@pytest.mark.parametrize("index", [(0, slice(3, 4)), ("a", 0), (), ("a", ()), ("a", None)])
def test_public_unravel_key_answers_an_empty_tuple_for_a_tuple_that_is_not_a_key(index) -> None:
    # TorchRL tells an index from a key this way (rb[0, 3:4] = td)
    import tensordict
    import tensordict.utils

    assert tensordict.unravel_key(index) == () and tensordict.utils.unravel_key(index) == ()


def test_public_unravel_key_still_flattens_keys_and_refuses_non_tuples() -> None:
    import tensordict

    assert tensordict.unravel_key(("a", ("b",))) == ("a", "b")
    assert tensordict.unravel_key((("a",),)) == "a"
    with pytest.raises(RuntimeError):
        tensordict.unravel_key(3)


def test_membership_in_leaves_view_asks_existence_as_upstream() -> None:
    # client code (TorchRL) writes ``("next", "agents") in td.keys(True, True)`` for a nested
    # tensordict: upstream answers whether the key exists, not whether it is a leaf
    td = TensorDict({"n": {"m": {"x": torch.zeros(2)}}, "y": torch.zeros(2)}, [2])
    leaves = td.keys(True, True)
    assert ("n", "m") in leaves and "n" in leaves and ("n", "m", "x") in leaves
    assert ("n", "m") not in list(leaves)
    assert ("n", "z") not in leaves and ("y", "x") not in leaves and "z" not in leaves
    assert ("n", "m") not in td.keys()  # nested keys stay out of a view without nesting
