"""Opening a PersistentTensorDict's file and writing whole tensordicts into it.

Backends are chosen by name (``"h5"``, ``"zarr"``) and imported only when used.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.formats.node import GroupNode
from tensordict.memmap.transaction import current_umask

__all__ = ["infer_batch_size", "open_node", "reopen_node", "write_tensordict", "write_value"]

BACKENDS = ("h5", "zarr")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(
            f"unknown backend {backend!r} for PersistentTensorDict: use 'h5' (HDF5, with h5py) "
            "or 'zarr' (Zarr v3)."
        )


def open_node(
    backend: str, filename: Any, group: Any, mode: str, allow_external: bool = False
) -> GroupNode:
    """The root node of ``filename`` (opened with ``mode``), or ``group`` wrapped."""
    _check_backend(backend)
    if backend == "h5":
        from tensordict.formats import h5

        if group is not None:
            return h5.H5Group(group, allow_external=allow_external)
        return h5.open_h5(filename, mode, allow_external=allow_external)
    from tensordict.formats import zarr as zarr_format

    if group is not None:
        return zarr_format.ZarrGroup(group)
    return zarr_format.open_zarr(filename, mode)


def reopen_node(spec: tuple[Any, ...], mode: str, same_process: bool = False) -> GroupNode:
    """Open the group described by ``GroupNode.spec()`` again (e.g. in another process)."""
    if spec[0] == "h5":
        from tensordict.formats import h5

        # Another process does not lock the file: the one that pickled it may hold it open for
        # writing (HDF5 would refuse). The same process must open it as it did (shared handle).
        return h5.reopen(spec, mode, locking=None if same_process else False)
    from tensordict.formats import zarr as zarr_format

    return zarr_format.reopen(spec, mode)


def infer_batch_size(node: GroupNode) -> torch.Size:
    """The stored batch size of a group, else the longest shape prefix its arrays share.

    Scalar arrays (numbers stored for a whole batch) and python objects do not count.
    """
    meta = node.meta()
    if meta and meta.get("batch_size") is not None:
        return torch.Size(meta["batch_size"])
    prefix: list[int] | None = None
    for key in node.list_keys():
        kind = node.kind(key)
        if kind == "array":
            shape: Any = node.shape(key)
            if shape == ():
                continue
        elif kind == "group":
            shape = infer_batch_size(node.child(key))
        else:
            continue
        if prefix is None:
            prefix = list(shape)
        else:
            n = 0
            while n < min(len(prefix), len(shape)) and prefix[n] == shape[n]:
                n += 1
            prefix = prefix[:n]
    return torch.Size(prefix or [])


def write_tensordict(
    td: TensorDictBase, filename: Any, backend: str, allow_pickle: bool | None, **kwargs: Any
) -> GroupNode:
    """Create ``filename`` (replacing it) holding ``td``; its root node, open for writing.

    A HDF5 file named by a path is written beside it and renamed over it once complete: a
    write that fails (a dtype HDF5 cannot hold, a meta tensor) leaves the previous file as it
    was, and no partial file.
    """
    _check_backend(backend)
    if backend == "h5" and isinstance(filename, (str, os.PathLike)):
        return _write_h5_beside(td, os.fspath(filename), allow_pickle, **kwargs)
    root = open_node(backend, filename, None, "w")
    try:
        if backend == "zarr":
            from tensordict.formats import zarr as zarr_format

            # the store's metadata is consolidated once, at the end, not after every array
            with zarr_format.deferred_consolidation(root):  # type: ignore[arg-type]
                write_group(root, td, allow_pickle, **kwargs)
        else:
            write_group(root, td, allow_pickle, **kwargs)
    except BaseException:
        root.close()
        raise
    return root


def _write_h5_beside(
    td: TensorDictBase, filename: str, allow_pickle: bool | None, **kwargs: Any
) -> GroupNode:
    from tensordict.formats import h5

    target = os.path.abspath(filename)
    folder, name = os.path.split(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tdh5", dir=folder or ".")
    except PermissionError:  # a folder this process cannot create files in: in place, as before
        root = h5.open_h5(target, "w")
        try:
            write_group(root, td, allow_pickle, **kwargs)
        except BaseException:
            root.close()
            raise
        return root
    os.close(fd)
    try:
        root = h5.open_h5(tmp, "w")
        try:
            write_group(root, td, allow_pickle, **kwargs)
        finally:
            root.close()
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return h5.open_h5(target, "r+")


def write_group(
    node: GroupNode, td: TensorDictBase, allow_pickle: bool | None, **kwargs: Any
) -> None:
    names = td._names_or_none()
    node.set_meta({"batch_size": list(td.batch_size), "names": names, "version": 1})
    for key, value in td._own_items():
        write_value(node, key, value, allow_pickle, **kwargs)


def write_value(
    node: GroupNode, key: str, value: Any, allow_pickle: bool | None, **kwargs: Any
) -> None:
    """Write one entry (a tensor, a nested tensordict or non-tensor data) as ``key``."""
    if getattr(type(value), "_is_tensorclass", False):
        value = value._tensordict
    if isinstance(value, NonTensorStack):
        value = value.maybe_collapse()  # a stack of one value is written once (as upstream)
    if isinstance(value, NonTensorData):
        node.write_non_tensor(key, value.data, False, allow_pickle=allow_pickle)
    elif isinstance(value, NonTensorStack):
        node.write_non_tensor(key, value.to_array(), True, allow_pickle=allow_pickle)
    elif isinstance(value, TensorDictBase):
        if not isinstance(value, _dense_types()):
            value = value.to_tensordict()
        write_group(node.create_group(key), value, allow_pickle, **kwargs)
    elif isinstance(value, torch.Tensor):
        node.create_array(key, value, **kwargs)
    else:
        node.write_non_tensor(key, value, False, allow_pickle=allow_pickle)


def _dense_types() -> tuple[type, ...]:
    from tensordict.core.dense import TensorDict
    from tensordict.formats.persistent import PersistentTensorDict

    return (TensorDict, PersistentTensorDict)
