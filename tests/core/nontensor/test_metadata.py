"""MetaData: one python object for a whole batch, kept whole by stacking and indexing."""

from __future__ import annotations

import pickle

import pytest
import torch

from tensordict import MetaData, NonTensorData, TensorDict
from tensordict.errors import MetaDataTypeError


def _td(value: object) -> TensorDict:
    return TensorDict(a=torch.zeros(3), config=MetaData(value), batch_size=[3])


def test_reads_back_the_same_object() -> None:
    config = {"lr": 0.1}
    td = _td(config)
    assert td["config"] is config and type(td.get("config")) is MetaData
    assert td.get("config").batch_size == torch.Size([3])


def test_stack_of_the_same_object_stays_one_metadata() -> None:
    config = {"lr": 0.1}
    td = _td(config)
    stacked = torch.stack([td, td])
    assert type(stacked.get("config")) is MetaData and stacked["config"] is config
    assert stacked.get("config").batch_size == torch.Size([2, 3])


def test_clone_copies_the_object_so_a_stack_with_it_is_not_collapsed() -> None:
    td = _td({"lr": 0.1})
    clone = td.clone()
    assert clone["config"] == td["config"] and clone["config"] is not td["config"]
    assert type(torch.stack([td, clone]).get("config")) is not MetaData


def test_indexing_and_unsqueeze_keep_metadata() -> None:
    td = _td("x")
    assert type(td[0].get("config")) is MetaData
    assert type(td.unsqueeze(0).get("config")) is MetaData


def test_is_a_non_tensor_data() -> None:
    assert isinstance(MetaData("x"), NonTensorData)


def test_typed_metadata_checks_the_value() -> None:
    assert MetaData[str] is MetaData[str] and MetaData[str].__name__ == "MetaData[str]"
    assert MetaData[str]("ok").data == "ok"
    with pytest.raises(MetaDataTypeError, match="Expected data of type str, got int"):
        MetaData[str](1)
    assert issubclass(MetaDataTypeError, TypeError)


def test_only_metadata_itself_can_be_subscripted() -> None:
    with pytest.raises(TypeError, match="Cannot specify type"):
        MetaData[str][int]


def test_typed_metadata_pickles() -> None:
    back = pickle.loads(pickle.dumps(MetaData[str]("x", batch_size=[2])))
    assert type(back) is MetaData[str] and back.data == "x" and back.batch_size == (2,)
