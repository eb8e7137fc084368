"""The interface between :class:`PersistentTensorDict` and a file format's library.

A :class:`GroupNode` wraps one group of a hierarchical store (a HDF5 group, a Zarr group) and
answers in torch terms: which entries it holds, an array's shape and dtype (without reading it),
the rows a :class:`~tensordict.formats.rows.Selection` selects, python objects stored as
non-tensor data. ``h5`` and ``zarr`` implement it with their own libraries.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict.errors import FormatValueError

__all__ = ["META_ATTR", "PICKLED", "GroupNode", "check_storable"]

#: the group attribute holding ``{"batch_size": [...], "names": [...], "version": 1}``
META_ATTR = "__tensordict__"
#: what ``repr`` shows instead of a pickled python object (it never unpickles)
PICKLED = "pickled, not read: needs allow_pickle=True"


class GroupNode:
    """One group of an on-disk hierarchy (abstract)."""

    backend: str = ""

    # ------------------------------------------------------------------ structure
    def list_keys(self) -> list[str]:
        raise NotImplementedError

    def kind(self, key: str) -> str | None:
        """``"group"``, ``"array"``, ``"non_tensor"``, or None when ``key`` is absent."""
        raise NotImplementedError

    def layout(self) -> dict[str, tuple[str | None, tuple[int, ...] | None]]:
        """Every key's ``(kind, shape)``, the shape for arrays only (None otherwise), read as
        of now: a backend whose lookups are round trips answers in one."""
        out: dict[str, tuple[str | None, tuple[int, ...] | None]] = {}
        for key in self.list_keys():
            kind = self.kind(key)
            out[key] = (kind, self.shape(key) if kind == "array" else None)
        return out

    def child(self, key: str) -> GroupNode:
        raise NotImplementedError

    def create_group(self, key: str) -> GroupNode:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def move(self, old: str, new: str) -> None:
        raise NotImplementedError

    def meta(self) -> dict[str, Any] | None:
        """The tensordict metadata of this group, if it was written by tensordict."""
        raise NotImplementedError

    def set_meta(self, meta: dict[str, Any]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ arrays
    def shape(self, key: str) -> tuple[int, ...]:
        raise NotImplementedError

    def dtype(self, key: str) -> torch.dtype:
        raise NotImplementedError

    def read(self, key: str, region: tuple[Any, ...]) -> torch.Tensor:
        """The elements of array ``key`` in ``region`` (ints, slices, one sorted position list)."""
        raise NotImplementedError

    def write(self, key: str, region: tuple[Any, ...], value: torch.Tensor) -> None:
        raise NotImplementedError

    def create_array(self, key: str, value: torch.Tensor, **kwargs: Any) -> None:
        raise NotImplementedError

    def create_zeros(self, key: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ python objects
    def read_non_tensor(
        self, key: str, allow_pickle: bool = False
    ) -> tuple[Any, tuple[int, ...] | None]:
        """``(value, None)`` for one object, ``(object array, shape)`` for one per element.

        Raises:
            PickleNotAllowedError: the entry is pickled and ``allow_pickle`` is False.
        """
        raise NotImplementedError

    def non_tensor_layout(self, key: str) -> tuple[str | None, tuple[int, ...] | None]:
        """``(why repr must not read it or None, per-element shape or None)`` of a
        python-object entry, from its metadata only (its payload is neither read nor decoded):
        e.g. ``"pickled, not read: needs allow_pickle=True"``."""
        raise NotImplementedError

    def write_non_tensor(
        self, key: str, value: Any, per_element: bool, allow_pickle: bool | None = None
    ) -> None:
        """Store one python object, or an object array of one per element."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the file
    @property
    def filename(self) -> str:
        raise NotImplementedError

    @property
    def path(self) -> str:
        """This group's path inside the file (``"/"`` for the root)."""
        raise NotImplementedError

    @property
    def mode(self) -> str:
        raise NotImplementedError

    @property
    def handle(self) -> Any:
        """The library's own object for this group."""
        raise NotImplementedError

    def spec(self) -> tuple[Any, ...]:
        """What :func:`reopen` needs to open this group again in another process."""
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def check_storable(key: str, value: torch.Tensor, backend: str) -> None:
    """Raise if ``value``'s dtype cannot be stored by numpy-based formats (bfloat16, float8)."""
    if value.dtype == torch.bfloat16 or "float8" in str(value.dtype):
        raise FormatValueError(
            f"cannot store {key!r} with dtype {value.dtype} in {backend}: the format has no such "
            "type. Cast it first (td.apply(lambda t: t.float())), or save with td.memmap(...) "
            "or safetensors, which keep it."
        )


def to_numpy(key: str, value: torch.Tensor, backend: str) -> Any:
    check_storable(key, value, backend)
    return value.detach().cpu().contiguous().numpy()
