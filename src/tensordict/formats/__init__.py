"""Placeholder: readers and writers of file formats come with issue 15 (engineer io)."""

from __future__ import annotations

from tensordict.core.placeholders import coming_function

_FEATURE, _ISSUE = "file formats and stores (engineer io)", 15
_MODULE = "tensordict"

from_h5 = coming_function("from_h5", _MODULE, _FEATURE, _ISSUE)
from_zarr = coming_function("from_zarr", _MODULE, _FEATURE, _ISSUE)
from_arrow = coming_function("from_arrow", _MODULE, _FEATURE, _ISSUE)
from_parquet = coming_function("from_parquet", _MODULE, _FEATURE, _ISSUE)
from_pandas = coming_function("from_pandas", _MODULE, _FEATURE, _ISSUE)
from_csv = coming_function("from_csv", _MODULE, _FEATURE, _ISSUE)
from_json = coming_function("from_json", _MODULE, _FEATURE, _ISSUE)
from_safetensors = coming_function("from_safetensors", _MODULE, _FEATURE, _ISSUE)
to_arrow = coming_function("to_arrow", _MODULE, _FEATURE, _ISSUE)
to_safetensors = coming_function("to_safetensors", _MODULE, _FEATURE, _ISSUE)
from_struct_array = coming_function("from_struct_array", _MODULE, _FEATURE, _ISSUE)

__all__ = [
    "from_arrow",
    "from_csv",
    "from_h5",
    "from_json",
    "from_pandas",
    "from_parquet",
    "from_safetensors",
    "from_struct_array",
    "from_zarr",
    "to_arrow",
    "to_safetensors",
]
