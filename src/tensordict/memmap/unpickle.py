"""Reading the pickled entries of a saved tensordict without running code: :func:`read_pickled`.

A memory-mapped directory keeps non-tensor values that JSON cannot hold as pickles
(``other.pickle``, ``pickle.pkl``). Unpickling can call any importable function, so a file from
an untrusted source must not be unpickled as is. Most such values are plain data, though: a
``set``, ``bytes``, a state dict of floats and tensors (TorchRL's trainer checkpoints). With
``allow_pickle=None`` (the default) they are read by an unpickler that resolves only the names
in :data:`PLAIN_DATA` (built-in containers and numbers, ``collections`` containers, tensors,
sizes, devices, dtypes, numpy arrays and scalars): a name outside it stops the load with
:class:`~tensordict.errors.PickleNotAllowedError` before anything it names is called. The same
policy as ``torch.load(weights_only=True)``, which cannot read these files itself (it knows
pickle protocol 2 only). ``allow_pickle=True`` unpickles anything; ``allow_pickle=False``
refuses every pickled entry.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
from typing import Any, BinaryIO

import numpy as np
import torch

from tensordict.errors import MemmapFormatError, PickleNotAllowedError

__all__ = ["PLAIN_DATA", "read_pickled"]

_multiarray: Any = (getattr(np, "_core", None) or np.core).multiarray  # numpy 2, or 1


#: the globals a plain-data pickle may name: ``(module, name)`` -> what it resolves to
PLAIN_DATA: dict[tuple[str, str], Any] = {
    **{("builtins", t.__name__): t for t in (bool, int, float, complex, str, bytes, bytearray)},
    **{("builtins", t.__name__): t for t in (list, tuple, dict, set, frozenset, slice, range)},
    **{
        ("collections", t.__name__): t
        for t in (collections.OrderedDict, collections.defaultdict, collections.deque)
    },
    ("collections", "Counter"): collections.Counter,
    ("torch", "Size"): torch.Size,
    ("torch", "device"): torch.device,
    ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): torch._utils._rebuild_parameter,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy._core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy._core.multiarray", "scalar"): _multiarray.scalar,
    # the names numpy < 2 wrote
    ("numpy.core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy.core.multiarray", "scalar"): _multiarray.scalar,
}


class _PlainDataUnpickler(pickle.Unpickler):
    """An unpickler that resolves the names of :data:`PLAIN_DATA` and torch dtypes only."""

    def __init__(self, file: BinaryIO, path: str) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        found = PLAIN_DATA.get((module, name))
        if found is not None:
            return found
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return self.storage_from_bytes
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise PickleNotAllowedError.for_entry(
            f"{self.path} (it names {module}.{name}, which is not plain data)",
            "allow_pickle=True to load_memmap",
        )

    def storage_from_bytes(self, data: bytes) -> Any:
        """A tensor's storage, pickled by torch as a nested ``torch.save`` file (which
        ``torch.storage._load_from_bytes`` would load with ``weights_only=False``)."""
        try:
            return torch.load(io.BytesIO(data), weights_only=True)
        except pickle.UnpicklingError as err:
            raise PickleNotAllowedError.for_entry(
                f"{self.path} (a tensor storage in it holds more than plain data: "
                f"{str(err).splitlines()[0]})",
                "allow_pickle=True to load_memmap",
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise PickleNotAllowedError.for_entry(
            f"{self.path} (it holds a persistent reference)", "allow_pickle=True to load_memmap"
        )


def read_pickled(fd: int, path: str, allow_pickle: bool | None) -> Any:
    """Unpickle the open regular file ``fd`` (``path`` names it in errors; the file is closed).

    ``allow_pickle``: True reads anything, None plain data only, False nothing.

    Raises:
        PickleNotAllowedError: ``allow_pickle`` is False, or None and the pickle names something
            that is not plain data (nothing it names has been called).
        MemmapFormatError: the file is not a pickle (truncated, or garbage), or, with
            ``allow_pickle=None``, a pickle whose plain data does not fit together.

    Examples:
        >>> import os, pickle, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "other.pickle")
        >>> with open(path, "wb") as f:
        ...     pickle.dump({"data": {"decay": 0.99, "mean": torch.zeros(2)}}, f)
        >>> read_pickled(os.open(path, os.O_RDONLY), path, None)
        {'data': {'decay': 0.99, 'mean': tensor([0., 0.])}}
        >>> with open(path, "wb") as f:
        ...     pickle.dump({"data": os.system}, f)
        >>> read_pickled(os.open(path, os.O_RDONLY), path, None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
          ...
        tensordict.errors.PickleNotAllowedError: ... (it names posix.system, which is not ...
    """
    with os.fdopen(fd, "rb") as f:
        if allow_pickle is False:
            raise PickleNotAllowedError.for_entry(path, "allow_pickle=True to load_memmap")
        try:
            if allow_pickle is True:
                return pickle.load(f)
            return _PlainDataUnpickler(f, path).load()
        except PickleNotAllowedError:
            raise
        except (pickle.UnpicklingError, EOFError) as err:
            raise MemmapFormatError(f"{path} is not a valid pickle ({err}).") from None
        except (TypeError, ValueError, AttributeError, IndexError, KeyError, RuntimeError) as err:
            if allow_pickle is True:  # what the unpickled objects raised: theirs to report
                raise
            raise MemmapFormatError(
                f"{path}: its plain data does not fit together ({type(err).__name__}: {err})."
            ) from None
