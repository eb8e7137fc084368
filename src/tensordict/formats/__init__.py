"""File formats a tensordict reads from and writes to; upstream's top-level functions.

Each format lives in its own module and imports its library (h5py, zarr, pyarrow, pandas,
safetensors) only when it is used: a missing library raises
:class:`~tensordict.errors.MissingDependencyError` naming the extra to install
(``pip install "tensordict[h5]"``, ``[zarr]``, ``[arrow]``, ``[pandas]``, ``[safetensors]``).

* ``persistent``: :class:`PersistentTensorDict`, entries in a HDF5 file (``h5``) or a Zarr
  store (``zarr``), read lazily: indexing reads only the rows asked for.
* ``tables``: Arrow tables, Parquet, pandas, CSV and JSON.
* ``safetensors``: safetensors files.
* ``struct``: numpy structured arrays.

Tensordicts kept on a key-value server live in :mod:`tensordict.store`.
"""

from tensordict.formats.persistent import from_h5, from_zarr
from tensordict.formats.safetensors import from_safetensors, to_safetensors
from tensordict.formats.struct import from_struct_array
from tensordict.formats.tables import (
    from_arrow,
    from_csv,
    from_json,
    from_pandas,
    from_parquet,
    to_arrow,
)

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
