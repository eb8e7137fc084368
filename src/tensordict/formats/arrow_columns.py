"""Arrow columns as tensordict entries, with one policy for null values.

A null never becomes a plausible value unless the caller asks for it. ``nulls=`` says what
happens to the nulls of a column (at the top level, in a struct's fields, inside a list's
values):

* ``"raise"``: any null raises :class:`~tensordict.errors.FormatValueError` naming the column;
* ``"nan"``: nulls of floating-point values become NaN, nulls of python objects (strings...)
  ``None``; a null where neither exists (integers, booleans, lists, fixed-size lists of those)
  raises, naming the column and these options;
* ``"mask"``: like ``"fill"``, and each column with nulls gets a boolean entry (True where the
  row is not null) under ``mask_key``; a null inside a list's values, which no row mask can
  describe, raises unless the values are floating-point (NaN);
* ``"fill"``: nulls become NaN for floats, 0 / False / an empty list otherwise (a plausible
  value: only on request).

A struct column that is null in a row makes its fields null in that row (never the zeros Arrow
may keep under a null).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tensordict.core.nontensor.data import NonTensorStack
from tensordict.errors import FormatValueError
from tensordict.formats.deps import require

__all__ = ["NULL_POLICIES", "arrow_column"]

NULL_POLICIES = ("raise", "nan", "mask", "fill")


def _pa() -> Any:
    return require("pyarrow", "arrow", "converting Arrow tables and Parquet files")


def arrow_column(
    column: Any, path: tuple[str, ...], copy: bool | None, nulls: str, masks: dict[Any, Any]
) -> Any:
    """The entry of one Arrow column (a tensor, a dict of entries for a struct, or a
    non-tensor stack); row masks of columns with nulls go into ``masks`` (``nulls="mask"``).

    Examples:
        >>> import pyarrow as pa
        >>> arrow_column(pa.array([1.0, None]), ("x",), None, "nan", {})
        tensor([1., nan], dtype=torch.float64)
        >>> arrow_column(pa.array([1, None]), ("i",), None, "nan", {})
        Traceback (most recent call last):
        ...
        tensordict.errors.FormatValueError: column 'i' has 1 null value(s); with nulls='nan' ...
    """
    pa = _pa()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    kind, types = column.type, pa.types
    if types.is_struct(kind):
        fields = column.flatten()  # the fields carry the struct's own nulls
        return {
            kind.field(i).name: arrow_column(
                fields[i], path + (kind.field(i).name,), copy, nulls, masks
            )
            for i in range(kind.num_fields)
        }
    if isinstance(kind, pa.FixedShapeTensorType):
        flat = _fixed_list(column.storage, path, nulls, masks)
        return flat.reshape(len(column), *kind.shape)
    if _numeric(kind):
        _top_nulls(column, path, nulls, masks, types.is_floating(kind))
        return _numbers(column, copy, path, nulls, inner=False)
    if types.is_fixed_size_list(kind) and _numeric(kind.value_type):
        return _fixed_list(column, path, nulls, masks, copy)
    if (types.is_list(kind) or types.is_large_list(kind)) and _numeric(kind.value_type):
        return _jagged(column, path, copy, nulls, masks)
    _top_nulls(column, path, nulls, masks, nan_ok=True)  # python objects: a null is None
    values = np.empty(len(column), dtype=object)
    values[:] = column.to_pylist()
    return NonTensorStack.from_array(values)


def _numeric(kind: Any) -> bool:
    types = _pa().types
    return bool(types.is_integer(kind) or types.is_floating(kind) or types.is_boolean(kind))


def _refuse(path: tuple[str, ...], count: int, inner: bool, nulls: str) -> FormatValueError:
    where = " inside its lists" if inner else ""
    if inner and nulls == "mask":
        hint = (
            "A row mask cannot describe values inside a list: pass nulls='fill' to fill them "
            "with 0 / False, or cast the values to a floating-point type (NaN)."
        )
    else:
        nan = "nulls='nan' to read nulls of floats as NaN (of strings as None), "
        hint = (
            f"Pass {nan if nulls == 'raise' else ''}nulls='mask' to fill them (0, False, empty "
            "lists) and get a boolean mask entry, nulls='fill' to fill them without a mask, or "
            "cast the column to a floating-point type first."
        )
    return FormatValueError(
        f"column {'.'.join(path)!r} has {count} null value(s){where}; with nulls={nulls!r} they "
        f"are refused rather than read as plausible values. {hint}"
    )


def _top_nulls(
    column: Any, path: tuple[str, ...], nulls: str, masks: dict[Any, Any], nan_ok: bool
) -> None:
    """Apply the policy to the nulls of ``column``'s rows (raise, or record the row mask)."""
    if not column.null_count:
        return
    if nulls == "raise" or (nulls == "nan" and not nan_ok):
        raise _refuse(path, column.null_count, False, nulls)
    if nulls == "mask":
        masks[path] = torch.from_numpy(column.is_valid().to_numpy(zero_copy_only=False).copy())


def _numbers(
    array: Any, copy: bool | None, path: tuple[str, ...], nulls: str, inner: bool
) -> torch.Tensor:
    """A 1-d tensor of a numeric array; its nulls filled where the policy allows (``inner``:
    the values inside lists, which no row mask describes)."""
    pa = _pa()
    if array.null_count:
        floating = pa.types.is_floating(array.type)
        refused = nulls == "raise" or (
            not floating and (nulls == "nan" or (nulls == "mask" and inner))
        )
        if refused:
            raise _refuse(path, array.null_count, inner, nulls)
        fill: Any = float("nan") if floating else (False if pa.types.is_boolean(array.type) else 0)
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


def _fixed_list(
    column: Any,
    path: tuple[str, ...],
    nulls: str,
    masks: dict[Any, Any],
    copy: bool | None = None,
) -> torch.Tensor:
    """A fixed-size list column as a tensor ``(rows, size, ...)``; a null row is filled (NaN or
    zeros) when the policy allows it."""
    pa = _pa()
    kind = column.type
    value_type = kind.value_type
    _top_nulls(column, path, nulls, masks, pa.types.is_floating(value_type))
    if column.null_count:
        fill = float("nan") if pa.types.is_floating(value_type) else 0
        column = column.fill_null(pa.scalar([fill] * kind.list_size, type=kind))
    values = _numbers(column.flatten(), copy, path, nulls, inner=True)
    return values.reshape(len(column), kind.list_size, *values.shape[1:])


def _jagged(
    column: Any, path: tuple[str, ...], copy: bool | None, nulls: str, masks: dict[Any, Any]
) -> torch.Tensor:
    """A list column as a jagged nested tensor; a null row becomes an empty one when the policy
    allows it (never silently)."""
    pa = _pa()
    _top_nulls(column, path, nulls, masks, nan_ok=False)
    if column.null_count:
        column = column.fill_null(pa.scalar([], type=column.type))
    offsets = torch.from_numpy(column.offsets.to_numpy().astype(np.int64))
    start, stop = int(offsets[0]), int(offsets[-1])
    values = _numbers(column.values.slice(start, stop - start), copy, path, nulls, inner=True)
    return torch.nested.nested_tensor_from_jagged(values, offsets - start)
