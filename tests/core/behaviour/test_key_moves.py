"""unflatten_keys merges and refuses collisions; rename_key_ onto an ancestor; split_keys drops
the nested tensordicts it empties (as upstream 0.15)."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict


def _leaves(td: TensorDict) -> dict[tuple[str, ...], float]:
    return {
        (k,) if isinstance(k, str) else k: v.item()
        for k, v in td.items(include_nested=True, leaves_only=True)
    }


def test_unflatten_merges_a_flat_key_into_a_nested_tensordict() -> None:
    td = TensorDict({"a-b": torch.tensor(1), "a": {"c": torch.tensor(2)}}, [])
    out = td.unflatten_keys("-")
    assert _leaves(out) == {("a", "b"): 1, ("a", "c"): 2}


@pytest.mark.parametrize(
    "source",
    [
        {"a-b-c": 0, "a": {"b": {"c": 1}}},  # the same leaf twice
        {"a-b": 0, "a": {"b": 1}},
        {"a-b": 0, "a": {"b": {"c": 1}}},  # a leaf where a tensordict is
        {"a-b-c-d": 0, "a": {"b": {"c": 1}}},  # a path through a leaf
        {"a-b": 0, "a": 1},
    ],
)
@pytest.mark.parametrize("inplace", [False, True])
def test_unflatten_collisions_raise_a_key_error(source: dict, inplace: bool) -> None:
    td = TensorDict(source, [])
    before = _leaves(td)
    with pytest.raises(KeyError, match=r"Unflattening key.* will override an existing"):
        td.unflatten_keys("-", inplace=inplace)
    assert _leaves(td) == before


def test_flatten_collision_raises_a_key_error() -> None:
    td = TensorDict({"a-b": 0, "a": {"b": 1}}, [])
    with pytest.raises(KeyError, match="Flattening keys in tensordict causes keys"):
        td.flatten_keys("-")


def test_rename_onto_an_ancestor_replaces_it() -> None:
    td = TensorDict(a={"b": {"c": 0, "d": 1}})
    td.rename_key_(("a", "b", "c"), ("a", "b"))
    assert _leaves(td) == {("a", "b"): 0}
    td.rename_key_(("a", "b"), "a")
    assert _leaves(td) == {("a",): 0}


@pytest.mark.parametrize("inplace", [False, True])
def test_split_keys_drops_the_nested_tensordicts_it_empties(inplace: bool) -> None:
    td = TensorDict({"a": 0, "b": {"c": 1}, "d": {"e": 2, "f": 3}, "g": {"h": {"i": 4}}})
    *parts, rest = td.split_keys([("b", "c")], [("d", "e")], [("g", "h", "i")], inplace=inplace)
    assert [_leaves(p) for p in parts] == [
        {("b", "c"): 1},
        {("d", "e"): 2},
        {("g", "h", "i"): 4},
    ]
    assert list(rest.keys()) == ["a", "d"] and _leaves(rest) == {("a",): 0, ("d", "f"): 3}
    assert (rest is td) is inplace
