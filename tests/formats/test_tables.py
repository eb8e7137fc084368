"""Arrow, Parquet, pandas, CSV and JSON: conversions checked against the libraries themselves."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from tensordict import NonTensorStack, TensorDict, from_arrow, to_arrow
from tensordict.errors import FormatValueError


@pytest.fixture
def td() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(3),
            "f": torch.rand(3),
            "obs": {"x": torch.ones(3)},
            "s": NonTensorStack.from_array(np.array(["u", "v", "w"], dtype=object)),
        },
        [3],
    )


def test_to_arrow_types(td):
    table = to_arrow(td.set("img", torch.zeros(3, 2, 2)))
    assert table.schema.field("a").type == pa.int64()
    assert pa.types.is_struct(table.schema.field("obs").type)
    assert table.column("s").to_pylist() == ["u", "v", "w"]
    assert isinstance(table.schema.field("img").type, pa.FixedShapeTensorType)


def test_arrow_round_trip(td):
    back = from_arrow(to_arrow(td.set("img", torch.rand(3, 2, 2))))
    assert torch.equal(back["img"], td["img"]) and torch.equal(back["obs", "x"], td["obs", "x"])
    assert back["s"] == ["u", "v", "w"]


def test_arrow_nulls_raise_fill_or_mask():
    table = pa.table({"y": pa.array([1.0, None, 3.0])})
    with pytest.raises(ValueError, match="null"):
        from_arrow(table)
    assert torch.isnan(from_arrow(table, nulls="fill")["y"][1])
    masked = from_arrow(table, nulls="mask")
    assert masked["_mask", "y"].tolist() == [True, False, True]


def test_arrow_list_columns_become_jagged_tensors():
    td = from_arrow(pa.table({"ids": pa.array([[1, 2], [3], []])}))
    assert [t.tolist() for t in td["ids"].unbind(0)] == [[1, 2], [3], []]


def test_parquet_written_here_reads_in_pyarrow_and_pandas(tmp_path, td):
    td.to_parquet(tmp_path / "t.parquet")
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.column("a").to_pylist() == [0, 1, 2]
    assert pd.read_parquet(tmp_path / "t.parquet")["s"].tolist() == ["u", "v", "w"]
    back = TensorDict.from_parquet(tmp_path / "t.parquet", columns=["a", "obs"])
    assert set(back.keys()) == {"a", "obs"}


def test_pandas_round_trip_with_separator(td):
    df = td.to_pandas(separator=".")
    assert list(df.columns) == ["a", "f", "obs.x", "s"]
    back = TensorDict.from_pandas(df, separator=".")
    assert torch.equal(back["obs", "x"], td["obs", "x"]) and back["s"] == ["u", "v", "w"]


def test_pandas_needs_a_separator_and_one_value_per_row(td):
    with pytest.raises(ValueError, match="separator"):
        td.to_pandas()
    with pytest.raises(ValueError, match="Cannot convert tensor"):
        TensorDict({"m": torch.ones(3, 2)}, [3]).to_pandas()
    with pytest.raises(FormatValueError, match="one batch dimension"):
        TensorDict({"m": torch.ones(3, 2)}, [3, 2]).to_pandas()


def test_pandas_categoricals_and_dtypes():
    df = pd.DataFrame(
        {"c": pd.Categorical(["a", "b", "a"]), "i": [1, 2, 3], "b": [True, False, True]}
    )
    td = TensorDict.from_pandas(df, dtype=torch.float32)
    assert td["c"].tolist() == [0.0, 1.0, 0.0] and td["i"].dtype == torch.float32
    with pytest.raises(TypeError, match="Conflicting"):
        TensorDict.from_pandas(df, auto_batch_size=True, batch_size=[3])


def test_csv_and_json_are_the_pandas_files(tmp_path, td):
    flat = td.exclude("s")
    flat.to_csv(tmp_path / "t.csv", separator=".")
    assert pd.read_csv(tmp_path / "t.csv")["obs.x"].tolist() == [1.0, 1.0, 1.0]
    assert torch.equal(TensorDict.from_csv(tmp_path / "t.csv", separator=".")["a"], td["a"])
    td.to_json(tmp_path / "t.jsonl", lines=True, separator=".")
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [r["s"] for r in lines] == ["u", "v", "w"]
    back = TensorDict.from_json(tmp_path / "t.jsonl", lines=True, separator=".")
    assert back["s"] == ["u", "v", "w"] and np.allclose(back["f"].numpy(), td["f"].numpy())


def test_from_any_reads_a_dataframe_as_from_pandas():
    from tensordict import from_any

    df = pd.DataFrame({"a": [1, 2, 3], "s": ["x", "y", "z"]})
    for td in (TensorDict.from_any(df), from_any(df, device="cpu")):
        assert td.batch_size == (3,)
        assert torch.equal(td["a"], torch.tensor([1, 2, 3]))
        assert td[1]["s"] == "y"


def test_a_string_column_reads_back_as_a_list_with_tolist():
    names = TensorDict.from_pandas(pd.DataFrame({"name": ["alice", "bob"]}))["name"]
    assert names.tolist() == ["alice", "bob"] and type(names.tolist()) is list
