"""Conversions to and from file formats and stores: thin methods over ``tensordict.formats``.

Each method imports its format module (and so the format's library) only when called; a missing
library raises :class:`~tensordict.errors.MissingDependencyError` naming the extra to install.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["ConversionMixin"]


class ConversionMixin:
    """``to_*`` / ``from_*`` for HDF5, Zarr, Arrow, Parquet, pandas, CSV, JSON, safetensors,
    numpy structured arrays and key-value stores."""

    __slots__ = ()

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
