"""Zero-filled tensordicts from a schema of shapes and dtypes, created where they are stored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict.core.behaviour.base import as_size
from tensordict.core.dense import TensorDict
from tensordict.core.keys import leaf_or_non_tensor

__all__ = ["STORAGES", "from_schema"]

STORAGES = (None, "memmap", "shared", "h5", "zarr", "redis", "dragonfly")


def _zeros_spec(schema: dict[Any, tuple[Sequence[int], torch.dtype]], bs: torch.Size) -> TensorDict:
    """The schema as a tensordict of zero-stride zeros (no memory per element)."""
    td = TensorDict({}, batch_size=bs)
    for key, (shape, dtype) in schema.items():
        td.set(key, torch.zeros((), dtype=dtype).expand((*bs, *shape)))
    return td


def from_schema(
    schema: dict[Any, tuple[Sequence[int], torch.dtype]],
    *,
    batch_size: Sequence[int] | torch.Size | None = None,
    storage: str | None = None,
    device: Any = None,
    **kwargs: Any,
) -> Any:
    """See :meth:`tensordict.TensorDictBase.from_schema`."""
    if storage not in STORAGES:
        raise ValueError(
            f"Unknown storage backend {storage!r} for from_schema: use None (memory), 'memmap', "
            "'shared', 'h5', 'zarr', 'redis' or 'dragonfly'."
        )
    bs = as_size(batch_size)
    spec = _zeros_spec(schema, bs)
    if storage is None or storage == "shared":
        out = spec.apply(lambda t: t.contiguous().clone())
        out = out.to(device) if device is not None else out
        return out.share_memory_() if storage == "shared" else out
    if storage == "memmap":
        return spec.memmap_like(kwargs.pop("prefix", None), **kwargs)
    if storage in ("h5", "zarr"):
        return _persistent_zeros(spec, storage, device, **kwargs)
    from tensordict.store import TensorDictStore

    return TensorDictStore.from_schema(
        schema, batch_size=bs, backend=storage, device=device, **kwargs
    )


def _persistent_zeros(spec: TensorDict, backend: str, device: Any, **kwargs: Any) -> Any:
    from tensordict.formats.persistent import PersistentTensorDict

    filename = kwargs.pop("filename")
    out = PersistentTensorDict.from_dict(
        TensorDict({}, batch_size=spec.batch_size), filename, backend=backend, device=device
    )
    for key, value in spec.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
        path = (key,) if isinstance(key, str) else key
        parent = out._parent_for_write(path, create=True)
        parent._node.create_zeros(path[-1], tuple(value.shape), value.dtype)
    return out
