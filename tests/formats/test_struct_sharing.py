"""numpy structured arrays: numeric fields share memory, string fields round-trip to string
dtypes, single records give plain values, tensorclasses become nested fields."""

from __future__ import annotations

import numpy as np
import torch

from tensordict import TensorClass, TensorDict

PETS = [("name", "U10"), ("age", "i4"), ("weight", "f4")]


def test_numeric_fields_view_the_array() -> None:
    pets = np.array([("Rex", 9, 81.0), ("Fido", 3, 27.0)], dtype=PETS)
    td = TensorDict.from_struct_array(pets)
    pets["age"] += 1
    assert td["age"].tolist() == [10, 4]
    back = td.to_struct_array()
    assert back.dtype.names == pets.dtype.names and back["name"].dtype.kind == "U"
    assert (back == pets).all()


def test_a_field_torch_cannot_view_is_copied() -> None:
    packed = np.zeros(3, dtype=[("flag", "i1"), ("x", "f4")])  # x at byte offset 1
    td = TensorDict.from_struct_array(packed)
    packed["x"] += 1
    assert td["x"].tolist() == [0.0, 0.0, 0.0]


def test_one_record_gives_plain_values() -> None:
    rex = np.array(("Rex", 9, 81.0), dtype=PETS)
    td = TensorDict.from_struct_array(rex)
    assert td.batch_size == () and td["name"] == "Rex"
    assert (td.to_struct_array() == rex).all()


class Tagged(TensorClass["nocast"]):
    tag: str | list[str]
    x: torch.Tensor


def test_tensorclass_entries_become_nested_fields() -> None:
    tagged = Tagged(tag=[[f"t{i}{j}" for j in range(2)] for i in range(3)], x=torch.ones(3, 2, 4))
    td = TensorDict(a=torch.arange(6).view(3, 2), c=tagged, batch_size=[3, 2])
    assert td["c"].batch_size == (3, 2)  # (grown to the parent's batch size, as upstream)
    arr = td.to_struct_array()
    assert arr.dtype["c"].names == ("tag", "x") and arr["c"]["tag"][2, 1] == "t21"
    back = TensorDict.from_struct_array(arr)
    assert torch.equal(back["c", "x"], torch.ones(3, 2, 4))
    assert back["c", "tag"][1] == ["t10", "t11"]
