"""from_namedtuple / from_tuple / from_any."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest
import torch

from tensordict import TensorDict, from_any, from_namedtuple, from_tuple

Pair = namedtuple("Pair", "a b")


@dataclasses.dataclass
class Sample:
    x: torch.Tensor
    label: str


def test_from_namedtuple_nests_and_keeps_field_names() -> None:
    td = from_namedtuple(Pair(a=torch.zeros(3, 4), b=Pair(a=torch.ones(3), b=torch.ones(3, 2))))
    assert td.batch_size == torch.Size([])
    assert set(td.keys(True, True)) == {"a", ("b", "a"), ("b", "b")}
    assert torch.equal(td["b", "a"], torch.ones(3))


def test_from_namedtuple_batch_options() -> None:
    nt = Pair(a=torch.zeros(3, 4), b=torch.ones(3, 4, 2))
    assert from_namedtuple(nt, auto_batch_size=True).batch_size == torch.Size([3, 4])
    assert from_namedtuple(nt, auto_batch_size=True, batch_dims=1).batch_size == torch.Size([3])
    assert from_namedtuple(nt, batch_size=[3]).batch_size == torch.Size([3])
    with pytest.raises(ValueError, match="not both"):
        from_namedtuple(nt, batch_size=[3], auto_batch_size=True)
    with pytest.raises(TypeError, match="namedtuple"):
        from_namedtuple((1, 2))


def test_from_tuple_uses_positions_as_keys() -> None:
    td = from_tuple((torch.zeros(3), (torch.ones(3, 2), torch.ones(3))), auto_batch_size=True)
    assert set(td.keys(True, True)) == {"0", ("1", "0"), ("1", "1")}
    assert td.batch_size == torch.Size([3])
    with pytest.raises(TypeError, match="tuple"):
        from_tuple([1, 2])


def test_from_any_converts_containers_recursively() -> None:
    td = from_any({"obs": torch.zeros(3, 4), "pair": (torch.zeros(3), 1), "nt": Pair(1, 2)})
    assert set(td.keys(True, True)) == {
        "obs",
        ("pair", "0"),
        ("pair", "1"),
        ("nt", "a"),
        ("nt", "b"),
    }
    assert td["pair", "1"].item() == 1


def test_from_any_dataclass_and_struct_array() -> None:
    td = from_any(Sample(x=torch.zeros(2), label="cat"))
    assert type(td) is TensorDict and td["label"] == "cat"
    arr = np.zeros(3, dtype=[("x", "f4"), ("y", "i8")])
    out = from_any(arr)
    assert out.batch_size == torch.Size([3]) and out["y"].dtype == torch.int64


def test_from_any_returns_tensors_and_collections_as_they_are() -> None:
    t = torch.zeros(2)
    td = TensorDict(a=t)
    assert from_any(t) is t and from_any(td) is td
    assert from_any("text") == "text"


def test_from_any_dict_batch_size_wins() -> None:
    d = {"a": torch.zeros(3, 4)}
    assert from_any(d, batch_size=[3], auto_batch_size=True).batch_size == torch.Size([3])


def test_from_pytree_round_trips_containers_and_types() -> None:
    from tensordict import from_pytree

    tree = {"a": [torch.zeros(2), (torch.ones(2),)], "b": Pair(torch.zeros(2), 3), "c": 1.5}
    td = from_pytree(tree)
    assert td["_pytree_type"] is dict and td["a", "_pytree_type"] is list
    back = td.to_pytree()
    assert set(back) == {"a", "b", "c"}
    assert isinstance(back["a"], list) and isinstance(back["a"][1], tuple)
    assert isinstance(back["b"], Pair) and back["b"].b.item() == 3
    assert torch.equal(back["a"][1][0], torch.ones(2))


def test_from_pytree_batch_options_and_leaves() -> None:
    from tensordict import from_pytree

    t = torch.zeros(2)
    assert from_pytree(t) is t
    assert from_pytree([torch.zeros(3, 2), torch.zeros(3)], auto_batch_size=True).shape == (3,)
    assert from_pytree({"a": torch.zeros(3, 2)}, batch_size=[3]).batch_size == torch.Size([3])
    with pytest.raises(NotImplementedError, match="NoneType"):
        from_pytree({"a": None})


def test_to_pytree_of_a_plain_tensordict_is_itself() -> None:
    td = TensorDict(a=torch.zeros(2))
    assert td.to_pytree() is td
