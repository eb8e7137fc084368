"""Tables under hostile input: nulls never become plausible values (floats NaN, as upstream;
integers, booleans, structs and lists a mask on request or a clear error), and every column
arrives or the call raises naming the clash."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import FormatValueError
from tensordict.formats.tables import from_arrow

COLUMNS = {
    "i": pa.array([1, None, 3]),
    "f": pa.array([1.0, None, 3.0]),
    "b": pa.array([True, None, False]),
    "s": pa.array([{"q": 1}, None, {"q": 3}]),
    "sf": pa.array([{"r": 1.5}, None, {"r": 3.5}]),
    "l": pa.array([[1, 2], None, [3]]),
    "fl": pa.array([[1, 2], None, [3, 4]], type=pa.list_(pa.int64(), 2)),
    "txt": pa.array(["a", None, "c"]),
}


@pytest.fixture
def parquet(tmp_path) -> str:
    path = str(tmp_path / "nulls.parquet")
    pq.write_table(pa.table(COLUMNS), path)
    return path


def test_float_nulls_are_nan_and_string_nulls_none_as_upstream(parquet):
    td = TensorDict.from_parquet(parquet, columns=["f", "sf", "txt"])
    assert td["f"][0] == 1 and torch.isnan(td["f"][1]) and td["f"][2] == 3
    assert torch.isnan(td["sf", "r"][1]) and td["sf", "r"][2] == 3.5  # the null struct's field
    assert td["txt"].tolist() == ["a", None, "c"]


@pytest.mark.parametrize("column", ["i", "b", "s", "l", "fl"])
def test_nulls_of_other_columns_raise_naming_the_column(parquet, column):
    with pytest.raises(
        FormatValueError, match=rf"column '{column}(\.q)?' has 1 null.*nulls='mask'"
    ):
        TensorDict.from_parquet(parquet, columns=[column])
    with pytest.raises(ValueError):  # what upstream code catches for bad values
        from_arrow(pa.table({column: COLUMNS[column]}))


def test_mask_fills_and_marks_each_null(parquet):
    td = TensorDict.from_parquet(parquet, nulls="mask")
    valid = torch.tensor([True, False, True])
    for key in ["i", "f", "b", ("s", "q"), ("sf", "r"), "l", "fl", "txt"]:
        assert torch.equal(td["_mask", key], valid), key
    assert td["i"].tolist() == [1, 0, 3] and td["b"].tolist() == [True, False, False]
    assert td["s", "q"].tolist() == [1, 0, 3]  # zeros under the null struct, masked
    assert td["l"].offsets().tolist() == [0, 2, 2, 3]  # the null list is empty, masked
    assert torch.isnan(td["f"][1])


def test_nulls_inside_lists_are_never_zeros(parquet, tmp_path):
    table = pa.table({"l": pa.array([[1, None], [3]]), "lf": pa.array([[1.5, None], [3.0]])})
    for nulls in ("raise", "nan", "mask"):
        with pytest.raises(FormatValueError, match=r"'l' has 1 null value\(s\) inside its lists"):
            from_arrow(table, nulls=nulls)
    floats = from_arrow(table.select(["lf"]), nulls="nan")["lf"]
    assert torch.isnan(floats.values()[1])
    assert from_arrow(table, nulls="fill")["l"].values().tolist() == [1, 0, 3]  # on request


def test_bad_null_policy_is_refused():
    with pytest.raises(ValueError, match="nulls must be one of"):
        from_arrow(pa.table({"x": [1.0]}), nulls="zero")


# ====================================================================== column names
@pytest.mark.parametrize(
    ("frame", "separator", "clash"),
    [
        (pd.DataFrame({"a.b": [1, 2], "a": [3, 4]}), ".", r"'a\.b' and 'a'|'a' and 'a\.b'"),
        (pd.DataFrame({"a..b": [1, 2], "a": [3, 4]}), ".", r"'a' and 'a\.\.b'"),  # a..b was lost
        (pd.DataFrame({1: [1, 2], "1": [3, 4]}), None, r"1 and '1'"),
        (pd.DataFrame([[1, 2]], columns=["x", "x"]), None, r"'x' and 'x'"),
    ],
)
def test_clashing_columns_raise_naming_both(frame, separator, clash):
    with pytest.raises(FormatValueError, match=clash):
        TensorDict.from_pandas(frame, separator=separator)


def test_clashing_csv_columns_raise(tmp_path):
    (tmp_path / "t.csv").write_text("a.b,a\n1,2\n")
    with pytest.raises(FormatValueError, match="clash"):
        TensorDict.from_csv(tmp_path / "t.csv", separator=".")


def test_every_column_arrives_even_with_empty_parts(tmp_path):
    frame = pd.DataFrame({"a..b": [1, 2], "a.c": [3, 4], "d": [5, 6]})
    td = TensorDict.from_pandas(frame, separator=".")
    assert set(td.keys(True, True)) == {("a", "", "b"), ("a", "c"), "d"}
    assert list(td.to_pandas(separator=".").columns) == ["a..b", "a.c", "d"]


def test_a_struct_and_a_flat_column_merge_or_clash(tmp_path):
    table = pa.table({"p": pa.array([{"q": 1}]), "p.r": pa.array([2]), "x": pa.array([0])})
    pq.write_table(table, tmp_path / "m.parquet")
    td = TensorDict.from_parquet(tmp_path / "m.parquet", separator=".")
    assert td["p", "q"].tolist() == [1] and td["p", "r"].tolist() == [2]
    clash = pa.table({"p": pa.array([{"q": 1}]), "p.q": pa.array([2])})
    pq.write_table(clash, tmp_path / "c.parquet")
    with pytest.raises(FormatValueError, match=r"'p' and 'p\.q'"):
        TensorDict.from_parquet(tmp_path / "c.parquet", separator=".")


def test_an_arrow_table_repeating_a_name_is_refused():
    table = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["x", "x"])
    with pytest.raises(FormatValueError, match="'x' and 'x'"):
        from_arrow(table)
