"""Tables in and out: Arrow tables, Parquet files, pandas frames, CSV and JSON files.

A table is a tensordict with one batch dimension (the rows) and one entry per column:

* numeric and boolean columns are tensors (pandas categoricals: their integer codes);
* Arrow ``fixed_size_list`` / ``fixed_shape_tensor`` columns are tensors with trailing
  dimensions, ``list`` columns of numbers jagged nested tensors, ``struct`` columns nested
  tensordicts;
* every other column (strings above all) is a :class:`~tensordict.NonTensorStack` of the python
  values.

Nested keys become ``struct`` columns in Arrow and Parquet, and ``"a.b"``-style column names
with ``separator=`` (pandas, CSV and JSON have no nesting: they need a separator). Reading
splits column names on ``separator`` into nested keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import FormatValueError
from tensordict.formats.deps import require, require_file

__all__ = [
    "from_arrow",
    "from_csv",
    "from_json",
    "from_pandas",
    "from_parquet",
    "to_arrow",
    "to_csv",
    "to_json",
    "to_pandas",
    "to_parquet",
]


def _pa() -> Any:
    return require("pyarrow", "arrow", "converting Arrow tables and Parquet files")


def _pd() -> Any:
    return require("pandas", "pandas", "converting pandas frames, CSV and JSON files")


# ====================================================================== building the result
def _finish(
    columns: dict[str, Any],
    n_rows: int,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
) -> TensorDict:
    """The tensordict of ``columns`` (name -> tensor, nested dict or non-tensor stack)."""
    if auto_batch_size and batch_size is not None:
        raise TypeError(
            "Conflicting arguments: auto_batch_size=True infers the batch size, batch_size= "
            "gives it. Pass one of them."
        )
    if dtype is not None:
        columns = _cast(columns, dtype)
    source: dict[Any, Any] = {}
    for name, value in columns.items():
        key = tuple(name.split(separator)) if separator and separator in name else name
        source[key] = value
    td = TensorDict(source, batch_size=[n_rows], device=device)
    if batch_size is not None:
        td.batch_size = batch_size
    elif auto_batch_size or batch_dims is not None:
        td.auto_batch_size_(batch_dims)
    return td


def _cast(columns: dict[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in columns.items():
        if isinstance(value, dict):
            out[name] = _cast(value, dtype)
        elif isinstance(value, torch.Tensor) and not value.is_nested:
            out[name] = value.to(dtype)
        else:
            out[name] = value
    return out


def _rows_of(td: Any, what: str) -> int:
    if getattr(type(td), "_is_tensorclass", False):
        td = td._tensordict
    if td.batch_dims != 1:
        raise FormatValueError(
            f"{what} needs a tensordict with one batch dimension (the rows), got "
            f"batch_size={list(td.batch_size)}. Use td.reshape(-1) (or td.flatten(...)) first."
        )
    return int(td.batch_size[0])


def _inner(td: Any) -> TensorDictBase:
    return td._tensordict if getattr(type(td), "_is_tensorclass", False) else td


# ====================================================================== Arrow
def from_arrow(
    table: Any,
    *,
    copy: bool | None = None,
    nulls: str = "raise",
    mask_key: Any = None,
    device: Any = None,
) -> TensorDict:
    """An Arrow table (or record batch, or anything ``pyarrow.table`` accepts) as a tensordict.

    Args:
        table: the table.
        copy: ``False`` views the Arrow buffers where it can (they are read-only: do not write
            in place); ``None`` and ``True`` copy.
        nulls: ``"raise"`` refuses null values; ``"fill"`` fills them (NaN for floats, 0 /
            False otherwise, None for python objects); ``"mask"`` fills them and adds a boolean
            entry ``(*mask_key, *key)``, True where the row is not null.
        mask_key: where the masks go with ``nulls="mask"`` (default ``"_mask"``).
        device: the device of the result.

    Returns:
        a TensorDict of batch size ``[num_rows]``.

    Raises:
        MissingDependencyError: pyarrow is not installed (extra ``arrow``).
        ValueError: a null value with ``nulls="raise"``, or a bad ``nulls``.

    Examples:
        >>> import pyarrow as pa
        >>> td = from_arrow(pa.table({"x": [1.0, 2.0], "s": ["a", "b"], "p": [{"q": 1}, {"q": 2}]}))
        >>> td["x"], td["s"], td["p", "q"]
        (tensor([1., 2.], dtype=torch.float64), LinkedList(['a', 'b']), tensor([1, 2]))
    """
    pa = _pa()
    if nulls not in ("raise", "fill", "mask"):
        raise ValueError(f"nulls must be 'raise', 'fill' or 'mask', got {nulls!r}.")
    if mask_key is not None and nulls != "mask":
        raise ValueError("mask_key= is only used with nulls='mask'.")
    if not isinstance(table, pa.Table):
        table = (
            pa.table(table)
            if not isinstance(table, pa.RecordBatch)
            else pa.Table.from_batches([table])
        )
    masks: dict[Any, torch.Tensor] = {}
    columns = {
        name: _arrow_column(table.column(name), (name,), copy, nulls, masks)
        for name in table.column_names
    }
    td = TensorDict(columns, batch_size=[table.num_rows], device=device)
    key = mask_key if mask_key is not None else "_mask"
    prefix = (key,) if isinstance(key, str) else tuple(key)
    for path, mask in masks.items():
        td.set(prefix + path, mask)
    return td


def _arrow_column(
    column: Any, path: tuple[str, ...], copy: bool | None, nulls: str, masks: dict[Any, Any]
) -> Any:
    pa = _pa()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if column.null_count:
        if nulls == "raise":
            raise ValueError(
                f"column {'.'.join(path)!r} has {column.null_count} null values. Pass "
                "nulls='fill' to fill them, or nulls='mask' to fill them and keep a mask."
            )
        if nulls == "mask":
            masks[path] = torch.from_numpy(column.is_valid().to_numpy(zero_copy_only=False).copy())
    kind = column.type
    types = pa.types
    if types.is_struct(kind):
        return {
            kind.field(i).name: _arrow_column(
                column.field(i), path + (kind.field(i).name,), copy, nulls, masks
            )
            for i in range(kind.num_fields)
        }
    if types.is_integer(kind) or types.is_floating(kind) or types.is_boolean(kind):
        return _arrow_numbers(column, copy)
    if isinstance(kind, pa.FixedShapeTensorType):
        return torch.from_numpy(np.array(column.to_numpy_ndarray(), copy=True))
    if types.is_fixed_size_list(kind) and _numeric(kind.value_type):
        values = _arrow_numbers(column.flatten(), copy)
        return values.reshape(len(column), *_fixed_shape(kind), *values.shape[1:])
    if (types.is_list(kind) or types.is_large_list(kind)) and _numeric(kind.value_type):
        return _arrow_jagged(column, copy)
    return NonTensorStack.from_array(_object_array(column.to_pylist()))


def _numeric(kind: Any) -> bool:
    types = _pa().types
    return bool(types.is_integer(kind) or types.is_floating(kind) or types.is_boolean(kind))


def _fixed_shape(kind: Any) -> tuple[int, ...]:
    return (kind.list_size,)


def _arrow_numbers(array: Any, copy: bool | None) -> torch.Tensor:
    pa = _pa()
    if array.null_count:
        fill = float("nan") if pa.types.is_floating(array.type) else 0
        if pa.types.is_boolean(array.type):
            fill = False
        array = array.fill_null(fill)
    values = array.to_numpy(zero_copy_only=False)
    if copy is not False or not values.flags.writeable:
        if copy is False:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # read-only buffer, viewed on request
                return torch.from_numpy(values)
        values = values.copy()
    return torch.from_numpy(values)


def _arrow_jagged(column: Any, copy: bool | None) -> torch.Tensor:
    offsets = torch.from_numpy(column.offsets.to_numpy().astype(np.int64))
    values = _arrow_numbers(column.values, copy)
    start = int(offsets[0])
    values = values[start : int(offsets[-1])]
    return torch.nested.nested_tensor_from_jagged(values, offsets - start)


def _object_array(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def to_arrow(td: Any) -> Any:
    """A tensordict with one batch dimension as an Arrow table (one column per entry).

    1-d tensors become primitive columns, larger ones ``fixed_shape_tensor`` columns, jagged
    nested tensors ``large_list`` columns, nested tensordicts ``struct`` columns, non-tensor
    data columns of the type ``pyarrow.array`` infers.

    Raises:
        FormatValueError: the batch size has more or fewer than one dimension, or an entry's
            dtype has no Arrow counterpart (bfloat16).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.ones(2), "img": torch.zeros(2, 3), "s": ["a", "b"]}, [2])
        >>> to_arrow(td).column_names
        ['x', 'img', 's']
    """
    n = _rows_of(td, "to_arrow")
    pa = _pa()
    names, arrays = [], []
    for key, value in _inner(td)._own_items():
        names.append(key)
        arrays.append(_arrow_array(key, value, n))
    return pa.Table.from_arrays(arrays, names=names) if names else pa.table({})


def _arrow_array(key: str, value: Any, n: int) -> Any:
    pa = _pa()
    if getattr(type(value), "_is_tensorclass", False):
        value = value._tensordict
    if isinstance(value, NonTensorData):
        return pa.array([value.data] * n)
    if isinstance(value, NonTensorStack):
        return pa.array(value.tolist())
    if isinstance(value, TensorDictBase):
        children = [(k, _arrow_array(k, v, n)) for k, v in value._own_items()]
        if not children:
            return pa.array([{}] * n, type=pa.struct([]))
        return pa.StructArray.from_arrays([c for _, c in children], names=[k for k, _ in children])
    if value.is_nested:
        offsets = value.offsets().numpy()
        values = _numpy(key, value.values())
        return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), values)
    data = _numpy(key, value)
    if data.ndim == 1:
        return pa.array(data)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(data))


def _numpy(key: str, tensor: torch.Tensor) -> np.ndarray:
    from tensordict.formats.node import to_numpy

    return np.asarray(to_numpy(key, tensor, "Arrow"))


# ====================================================================== Parquet
def from_parquet(
    path: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
    columns: list[str] | None = None,
    **kwargs: Any,
) -> TensorDict:
    """Read a Parquet file with pyarrow (``columns=`` reads only those; other keyword arguments
    go to ``pyarrow.parquet.read_table``)."""
    pq = require("pyarrow.parquet", "arrow", "reading Parquet files")
    require_file(path, "Parquet file")
    table = pq.read_table(str(path), columns=columns, **kwargs)
    td = from_arrow(table, nulls="fill")
    return _finish(
        dict(td._own_items()),
        table.num_rows,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
        separator=separator,
        dtype=dtype,
    )


def to_parquet(td: Any, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
    """Write a Parquet file with pyarrow: nested keys become struct columns, or flat columns
    named with ``separator`` when given (keyword arguments go to ``pyarrow.parquet.write_table``).
    """
    pq = require("pyarrow.parquet", "arrow", "writing Parquet files")
    inner = _inner(td)
    if separator is not None:
        inner = inner.flatten_keys(separator)
    pq.write_table(to_arrow(inner), str(path), **kwargs)


# ====================================================================== pandas
def from_pandas(
    dataframe: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
) -> TensorDict:
    """A pandas DataFrame as a tensordict of batch size ``[len(df)]``.

    Numeric and boolean columns become tensors (``dtype=`` casts them), categoricals their
    integer codes, other columns non-tensor stacks of their values. With ``separator``, column
    names are split into nested keys.

    Raises:
        MissingDependencyError: pandas is not installed (extra ``pandas``).
        TypeError: both ``auto_batch_size=True`` and ``batch_size``.

    Examples:
        >>> import pandas as pd
        >>> td = from_pandas(pd.DataFrame({"obs.x": [1.0, 2.0], "name": ["a", "b"]}), separator=".")
        >>> td["obs", "x"], td["name"]
        (tensor([1., 2.], dtype=torch.float64), LinkedList(['a', 'b']))
    """
    pd = _pd()
    columns: dict[str, Any] = {}
    for name in dataframe.columns:
        columns[str(name)] = _pandas_column(pd, dataframe[name])
    return _finish(
        columns,
        len(dataframe),
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
        separator=separator,
        dtype=dtype,
    )


def _pandas_column(pd: Any, series: Any) -> Any:
    kind = series.dtype
    if isinstance(kind, pd.CategoricalDtype):
        return torch.from_numpy(series.cat.codes.to_numpy().copy())
    if pd.api.types.is_bool_dtype(kind):
        if series.isna().any():
            return NonTensorStack.from_array(_object_array(series.tolist()))
        return torch.from_numpy(series.to_numpy(dtype=bool).copy())
    if pd.api.types.is_numeric_dtype(kind) and not pd.api.types.is_complex_dtype(kind):
        if series.isna().any() and pd.api.types.is_integer_dtype(kind):
            return torch.from_numpy(series.to_numpy(dtype=np.float64, na_value=np.nan).copy())
        values = series.to_numpy()
        if values.dtype == object:
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        return torch.from_numpy(np.array(values, copy=True))
    if pd.api.types.is_datetime64_any_dtype(kind) or pd.api.types.is_timedelta64_dtype(kind):
        return NonTensorStack.from_array(_object_array(series.tolist()))
    return NonTensorStack.from_array(_object_array(series.tolist()))


def to_pandas(td: Any, *, separator: str | None = None) -> Any:
    """A tensordict with one batch dimension as a pandas DataFrame (one column per leaf).

    Raises:
        ValueError: a nested key without ``separator`` (pandas columns are flat), or a tensor
            with more than one dimension (one value per row is needed).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(2), "obs": {"x": torch.ones(2)}}, [2])
        >>> list(to_pandas(td, separator=".").columns)
        ['a', 'obs.x']
    """
    pd = _pd()
    n = _rows_of(td, "to_pandas")
    data: dict[str, Any] = {}
    for key, value in _inner(td).items(
        include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
    ):
        if isinstance(key, tuple):
            if separator is None:
                raise ValueError(
                    f"the nested key {key!r} needs a column name: pass separator= (e.g. '.') to "
                    "join nested keys, as pandas columns are flat."
                )
            name = separator.join(key)
        else:
            name = key
        data[name] = _pandas_values(name, value, n)
    return pd.DataFrame(data)


def _pandas_values(name: str, value: Any, n: int) -> Any:
    if isinstance(value, NonTensorData):
        return [value.data] * n
    if isinstance(value, NonTensorStack):
        return value.tolist()
    if value.ndim != 1:
        raise ValueError(
            f"Cannot convert tensor {name!r} of shape {list(value.shape)} to a column: a column "
            "holds one value per row. Flatten it into several keys, or use to_arrow / "
            "to_parquet, which keep tensors with more dimensions."
        )
    return _numpy(name, value)


# ====================================================================== CSV and JSON
def from_csv(path: Any, **kwargs: Any) -> TensorDict:
    """Read a CSV file with ``pandas.read_csv`` (tensordict arguments as :func:`from_pandas`;
    other keyword arguments go to pandas)."""
    mine, theirs = _split_kwargs(kwargs)
    require_file(path, "CSV file")
    return from_pandas(_pd().read_csv(path, **theirs), **mine)


def to_csv(td: Any, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
    """Write a CSV file with ``DataFrame.to_csv`` (no index column)."""
    kwargs.setdefault("index", False)
    to_pandas(td, separator=separator).to_csv(path, **kwargs)


def from_json(path: Any, *, lines: bool = False, **kwargs: Any) -> TensorDict:
    """Read a JSON file of records (``lines=True``: one record per line) with pandas."""
    mine, theirs = _split_kwargs(kwargs)
    require_file(path, "JSON file")
    return from_pandas(_pd().read_json(path, lines=lines, **theirs), **mine)


def to_json(
    td: Any, path: Any, *, separator: str | None = None, lines: bool = False, **kwargs: Any
) -> None:
    """Write a JSON file of records (``lines=True``: one record per line) with pandas."""
    kwargs.setdefault("orient", "records")
    to_pandas(td, separator=separator).to_json(path, lines=lines, **kwargs)


_MINE = ("auto_batch_size", "batch_dims", "device", "batch_size", "separator", "dtype")


def _split_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    mine = {k: v for k, v in kwargs.items() if k in _MINE}
    return mine, {k: v for k, v in kwargs.items() if k not in _MINE}
