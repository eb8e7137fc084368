"""Conversions to and from file formats and stores: thin methods over ``tensordict.formats``.

Each method imports its format module (and so the format's library) only when called; a missing
library raises :class:`~tensordict.errors.MissingDependencyError` naming the extra to install.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["ConversionMixin", "from_format_object"]


def from_format_object(
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
) -> Any:
    """``obj`` as a tensordict if it is a pandas DataFrame or an open ``h5py.File``, else None.

    The part of :func:`~tensordict.from_any` that reads a format's own object. A library that
    was never imported cannot have made ``obj``, so nothing is imported here.

    Examples:
        >>> import pandas as pd
        >>> from_format_object(pd.DataFrame({"a": [1, 2]}))["a"]
        tensor([1, 2])
        >>> from_format_object([1, 2]) is None
        True
    """
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, pd.DataFrame):
        from tensordict.formats import tables

        return tables.from_pandas(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
    h5py = sys.modules.get("h5py")
    if h5py is not None and isinstance(obj, h5py.File):
        from tensordict.formats.persistent import PersistentTensorDict

        if auto_batch_size or batch_size is None:
            out = PersistentTensorDict(group=obj)
            return out.auto_batch_size_(batch_dims=batch_dims) if auto_batch_size else out
        return PersistentTensorDict(group=obj, batch_size=batch_size)
    return None


class ConversionMixin:
    """``to_*`` / ``from_*`` for HDF5, Zarr, Arrow, Parquet, pandas, CSV, JSON, safetensors,
    numpy structured arrays and key-value stores."""

    __slots__ = ()

    @classmethod
    def from_any(
        cls,
        obj: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Sequence[int] | torch.Size | None = None,
    ) -> Any:
        """Convert a dict, tuple, dataclass, structured array, DataFrame or h5py.File, recursively.

        See :func:`tensordict.from_any`; a pandas DataFrame goes through :meth:`from_pandas` and
        an open :class:`h5py.File` becomes a :class:`~tensordict.PersistentTensorDict`.

        Examples:
            >>> import pandas as pd
            >>> from tensordict import TensorDict
            >>> TensorDict.from_any(pd.DataFrame({"a": [1.0, 2.0]})).batch_size
            torch.Size([2])
        """
        from tensordict.core.serial.convert import from_any

        return from_any(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    # ------------------------------------------------------------------ HDF5 and Zarr
    def to_h5(self, filename: Any, **kwargs: Any) -> Any:
        """Write to a new HDF5 file; the file, opened as a :class:`PersistentTensorDict`.

        Keyword arguments go to h5py's ``create_dataset`` for every array (``compression=``,
        ``chunks=``, ...).

        Examples:
            >>> import tempfile, os
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 2)}, [3])
            >>> ptd = td.to_h5(os.path.join(tempfile.mkdtemp(), "td.h5"), compression="gzip")
            >>> ptd["a"].shape
            torch.Size([3, 2])
        """
        from tensordict.formats.persistent import PersistentTensorDict

        return PersistentTensorDict.from_dict(self, filename=filename, **kwargs)

    @classmethod
    def from_h5(
        cls,
        filename: Any,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        non_tensor_as_stack: bool = False,
    ) -> Any:
        """Open a HDF5 file as a :class:`PersistentTensorDict` (read lazily), as upstream."""
        from tensordict.formats.persistent import PersistentTensorDict

        return PersistentTensorDict.from_h5(
            filename,
            mode=mode,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            batch_size=batch_size,
            non_tensor_as_stack=non_tensor_as_stack,
        )

    def to_zarr(self, filename: Any, *, allow_pickle: bool | None = None, **kwargs: Any) -> Any:
        """Write to a new Zarr store (a path or a ``zarr.storage`` store); the store, opened as
        a :class:`PersistentTensorDict`.

        Keyword arguments go to zarr's ``create_array`` for every array (``chunks=`` for the
        leading dims, ``compressors=``, ...). Python objects are stored as JSON, or pickled
        with ``allow_pickle=True``.
        """
        from tensordict.formats.persistent import PersistentTensorDict

        return PersistentTensorDict.from_dict(
            self, filename=filename, backend="zarr", allow_pickle=allow_pickle, **kwargs
        )

    @classmethod
    def from_zarr(
        cls,
        filename: Any,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        non_tensor_as_stack: bool = False,
        allow_pickle: bool | None = None,
    ) -> Any:
        """Open a Zarr store as a :class:`PersistentTensorDict` (read lazily)."""
        from tensordict.formats.persistent import PersistentTensorDict

        return PersistentTensorDict.from_zarr(
            filename,
            mode=mode,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            batch_size=batch_size,
            non_tensor_as_stack=non_tensor_as_stack,
            allow_pickle=allow_pickle,
        )

    @classmethod
    def from_schema(
        cls,
        schema: dict[Any, tuple[Sequence[int], torch.dtype]],
        *,
        batch_size: Sequence[int] | torch.Size | None = None,
        storage: str | None = None,
        device: Any = None,
        **kwargs: Any,
    ) -> Any:
        """A zero-filled tensordict from ``{key: (element_shape, dtype)}``, stored in memory
        (``storage=None``), in shared memory (``"shared"``), memory-mapped (``"memmap"``, with
        ``prefix=``), in a HDF5 file or Zarr store (``"h5"`` / ``"zarr"``, with ``filename=``) or
        on a Redis-compatible server (``"redis"``, ``"dragonfly"``, with the connection
        arguments). On disk and on servers the zeros are created there, not built in memory.

        Raises:
            ValueError: an unknown ``storage``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict.from_schema({"obs": ([3], torch.uint8)}, batch_size=[4])
            >>> td["obs"].shape
            torch.Size([4, 3])
        """
        from tensordict.formats.schema import from_schema

        return from_schema(schema, batch_size=batch_size, storage=storage, device=device, **kwargs)

    # ------------------------------------------------------------------ tables
    @classmethod
    def from_pandas(
        cls,
        dataframe: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        separator: str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Any:
        """A pandas DataFrame as a tensordict (see :func:`tensordict.formats.tables.from_pandas`).

        Examples:
            >>> import pandas as pd
            >>> from tensordict import TensorDict
            >>> TensorDict.from_pandas(pd.DataFrame({"a": [1, 2, 3]}))["a"]
            tensor([1, 2, 3])
        """
        from tensordict.formats import tables

        return tables.from_pandas(
            dataframe,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
            separator=separator,
            dtype=dtype,
        )

    def to_pandas(self, *, separator: str | None = None) -> Any:
        """A pandas DataFrame, one column per leaf (nested keys joined with ``separator``)."""
        from tensordict.formats import tables

        return tables.to_pandas(self, separator=separator)

    @classmethod
    def from_csv(cls, path: Any, **kwargs: Any) -> Any:
        """Read a CSV file with pandas (arguments as :meth:`from_pandas`, others to pandas)."""
        from tensordict.formats import tables

        return tables.from_csv(path, **kwargs)

    def to_csv(self, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
        """Write a CSV file with pandas (no index column)."""
        from tensordict.formats import tables

        tables.to_csv(self, path, separator=separator, **kwargs)

    @classmethod
    def from_json(cls, path: Any, *, lines: bool = False, **kwargs: Any) -> Any:
        """Read a JSON file of records (``lines=True``: JSON lines) with pandas."""
        from tensordict.formats import tables

        return tables.from_json(path, lines=lines, **kwargs)

    def to_json(
        self, path: Any, *, separator: str | None = None, lines: bool = False, **kwargs: Any
    ) -> None:
        """Write a JSON file of records (``lines=True``: JSON lines) with pandas."""
        from tensordict.formats import tables

        tables.to_json(self, path, separator=separator, lines=lines, **kwargs)

    @classmethod
    def from_parquet(
        cls,
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
    ) -> Any:
        """Read a Parquet file with pyarrow (``columns=`` reads only those)."""
        from tensordict.formats import tables

        return tables.from_parquet(
            path,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
            separator=separator,
            dtype=dtype,
            columns=columns,
            **kwargs,
        )

    def to_parquet(self, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
        """Write a Parquet file with pyarrow (nested keys as struct columns, or flat columns
        joined with ``separator``)."""
        from tensordict.formats import tables

        tables.to_parquet(self, path, separator=separator, **kwargs)

    # ------------------------------------------------------------------ numpy structured arrays
    @classmethod
    def from_struct_array(
        cls,
        struct_array: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Sequence[int] | torch.Size | None = None,
    ) -> Any:
        """A numpy structured array as a tensordict (one entry per field)."""
        from tensordict.formats import struct

        return struct.from_struct_array(
            struct_array,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    def to_struct_array(self) -> Any:
        """A numpy structured array of shape ``batch_size``, one field per entry."""
        from tensordict.formats import struct

        return struct.to_struct_array(self)

    # ------------------------------------------------------------------ key-value stores
    def to_store(
        self,
        *,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        **kwargs: Any,
    ) -> Any:
        """A copy on a Redis-compatible server: a :class:`~tensordict.store.TensorDictStore`,
        or a :class:`~tensordict.store.LazyStackedTensorDictStore` for a lazy stack."""
        from tensordict.core.lazy.stack import LazyStackedTensorDict
        from tensordict.store import LazyStackedTensorDictStore, TensorDictStore

        args = dict(
            backend=backend,
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            device=device,
            **kwargs,
        )
        if isinstance(self, LazyStackedTensorDict):
            return LazyStackedTensorDictStore.from_lazy_stack(self, **args)
        return TensorDictStore.from_tensordict(self, **args)
