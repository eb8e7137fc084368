"""Growing a saved tensordict along its first batch dimension, in place (``append_memmap``).

Every check runs before the first byte is written. Then each leaf file grows by the bytes of the
new rows (written after the saved rows), the files are flushed, and the ``meta.json`` files are
replaced: all new ones are written first as ``.meta.json.append.tmp`` beside the old ones, then
renamed over them, the top one first. A failure puts the old ``meta.json`` files and file sizes
back. Readers that mapped the files before keep their rows; a load after the append sees all.
The prefix's write lock is held throughout, so ``memmap_`` writers of this library wait.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.collection import publish_as
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import MemmapAppendError
from tensordict.memmap import format as fmt
from tensordict.memmap import transaction as tx
from tensordict.memmap.load import load_memmap

__all__ = ["append_memmap"]

TMP_SUFFIX = ".append.tmp"


@dataclass
class _Append:
    """What an append writes: ``(file, saved bytes, rows)`` per leaf, and the ``meta.json``
    of each saved TensorDict level (the top one first)."""

    leaves: list[tuple[str, int, torch.Tensor]] = field(default_factory=list)
    metas: list[str] = field(default_factory=list)


def append_memmap(
    prefix: str | os.PathLike[str], rows: Any, *, allow_pickle: bool | None = None
) -> None:
    """Append ``rows`` to the tensordict saved at ``prefix``, along its first batch dimension.

    ``rows`` must have the saved keys, classes, dtypes and trailing shapes; its batch size may
    differ from the saved one in the first dimension only. A saved non-tensor value stays as it
    is, so ``rows`` must hold the same value there. Lazy stacks, non-tensor stacks, nested
    tensors and archives cannot grow. Readers that mapped the files before the append keep
    seeing the old rows; ``load_memmap`` afterwards sees them all.

    Args:
        prefix: a directory written by ``save`` / ``memmap``.
        rows: a tensordict or tensorclass with the rows to add.
        allow_pickle: whether the saved pickled non-tensor entries (compared with the rows')
            may be unpickled, as in ``load_memmap``.

    Raises:
        MemmapAppendError: ``prefix`` is not a saved directory (an archive: unpack it first),
            or ``rows`` does not fit the saved tensordict (a ValueError; nothing is written).
        TypeError: ``rows`` is not a tensordict or a tensorclass.

    Examples:
        >>> import torch
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> _ = TensorDict(a=torch.zeros(3, 2), batch_size=[3]).save(d)
        >>> append_memmap(d, TensorDict(a=torch.ones(2, 2), batch_size=[2]))
        >>> TensorDict.load_memmap(d)["a"].sum(-1).tolist()
        [0.0, 0.0, 0.0, 2.0, 2.0]
    """
    root = os.path.abspath(os.fspath(prefix))
    if not os.path.isdir(root):
        raise MemmapAppendError(
            f"append_memmap appends to a directory written by save or memmap, and {root} is "
            "not one. An archive cannot grow: unpack it with unpack_memmap first."
        )
    if not (isinstance(rows, TensorDictBase) or getattr(type(rows), "_is_tensorclass", False)):
        raise TypeError(f"rows must be a tensordict or a tensorclass, got {type(rows).__name__}.")
    with tx.prefix_lock(os.path.realpath(root)):
        saved = load_memmap(root, allow_pickle=allow_pickle)
        if not saved.batch_dims or not rows.batch_dims:
            raise MemmapAppendError(
                "append_memmap appends along the first batch dimension, which the saved "
                f"tensordict (batch size {list(saved.batch_size)}) and the rows (batch size "
                f"{list(rows.batch_size)}) must both have."
            )
        plan = _Append()
        _check(saved, rows, (), plan)
        total = saved.batch_size[0] + rows.batch_size[0]
        del saved
        _write(plan, total)


def _where(key: tuple[str, ...]) -> str:
    if not key:
        return "the saved tensordict"
    return f"the entry {key if len(key) > 1 else key[0]!r}"


def _check(saved: Any, rows: Any, key: tuple[str, ...], plan: _Append) -> None:
    """Check that ``rows`` fits the loaded ``saved``; collect the leaves and metadata files."""
    where = _where(key)
    if tuple(rows.batch_size[1:]) != tuple(saved.batch_size[1:]):
        raise MemmapAppendError(
            f"cannot append rows of batch size {list(rows.batch_size)} to {where}, of batch size "
            f"{list(saved.batch_size)}: they differ beyond the first dimension."
        )
    if getattr(type(saved), "_is_tensorclass", False):
        if type(rows) is not type(saved):
            raise MemmapAppendError(
                f"cannot append a {type(rows).__name__} to {where}, a {type(saved).__name__}."
            )
        saved, rows = saved._tensordict, rows._tensordict
    elif not isinstance(saved, TensorDict) or getattr(type(rows), "_is_tensorclass", False):
        raise MemmapAppendError(
            f"cannot append a {type(rows).__name__} to {where}, a {type(saved).__name__}."
        )
    if set(saved.keys()) != set(rows.keys()):
        raise MemmapAppendError(
            f"cannot append rows with the keys {sorted(rows.keys())} to {where}, which has the "
            f"keys {sorted(saved.keys())}."
        )
    plan.metas.append(os.path.join(saved._memmap_prefix, fmt.META))
    for name, old in saved._own_items():
        _check_entry(saved._memmap_prefix, name, old, rows.get(name), (*key, name), plan)


def _check_entry(
    directory: str, name: str, old: Any, new: Any, key: tuple[str, ...], plan: _Append
) -> None:
    where = _where(key)
    if isinstance(old, NonTensorStack):
        raise MemmapAppendError(f"cannot append to {where}: a non-tensor stack cannot grow.")
    if isinstance(old, NonTensorData):
        _check_non_tensor(old, new, where)
    elif isinstance(old, LazyStackedTensorDict):
        raise MemmapAppendError(f"cannot append to {where}: a lazy stack cannot grow.")
    elif not isinstance(old, torch.Tensor):
        if isinstance(new, (torch.Tensor, NonTensorData, NonTensorStack)):
            raise MemmapAppendError(
                f"cannot append a {type(new).__name__} to {where}, a {type(old).__name__}."
            )
        _check(old, new, key, plan)
    elif not isinstance(new, torch.Tensor):
        raise MemmapAppendError(f"cannot append a {type(new).__name__} to {where}, a tensor.")
    elif old.is_nested or new.is_nested:
        raise MemmapAppendError(f"cannot append to {where}: a nested tensor cannot grow.")
    elif new.dtype != old.dtype or new.shape[1:] != old.shape[1:]:
        raise MemmapAppendError(
            f"cannot append rows of dtype {new.dtype} and shape {list(new.shape)} to {where}, "
            f"of dtype {old.dtype} and shape {list(old.shape)}."
        )
    else:  # an empty saved leaf has no file yet
        path = getattr(old, "filename", None) or fmt.entry_path(directory, name, ".memmap")
        plan.leaves.append((path, old.numel() * old.element_size(), new))


def _check_non_tensor(old: NonTensorData, new: Any, where: str) -> None:
    if isinstance(new, NonTensorData):
        values = [new.data]
    elif isinstance(new, NonTensorStack):
        values = list(_flat(new.tolist()))
    else:
        values = None
    if values is None or not all(_equal(v, old.data) for v in values):
        shown = new.data if isinstance(new, NonTensorData) else new
        raise MemmapAppendError(
            f"cannot append to {where}: the saved non-tensor value {old.data!r} stays as it is, "
            f"so the rows must hold that same value, not {shown!r}."
        )


def _flat(value: Any) -> Any:
    if isinstance(value, list):
        for v in value:
            yield from _flat(v)
    else:
        yield value


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # arrays, tensors: no single truth value
        return a is b


# ====================================================================== writing
def _write(plan: _Append, total: int) -> None:
    old_sizes: dict[str, int | None] = {}
    replaced: list[tuple[str, bytes]] = []
    temps: list[str] = []
    try:
        for path, saved_nbytes, rows in plan.leaves:
            if rows.numel():
                old_sizes[path] = os.path.getsize(path) if os.path.exists(path) else None
                _grow(path, saved_nbytes, rows, exists=old_sizes[path] is not None)
        news = []
        for meta_path in plan.metas:
            with open(meta_path, "rb") as f:
                old = f.read()
            tmp = os.path.join(os.path.dirname(meta_path), f".{fmt.META}{TMP_SUFFIX}")
            temps.append(tmp)
            _write_synced(tmp, _grown_meta(old, total))
            news.append((tmp, meta_path, old))
        for tmp, meta_path, old in news:
            os.replace(tmp, meta_path)
            replaced.append((meta_path, old))
    except BaseException:
        _undo(replaced, temps, old_sizes)
        raise


def _grow(path: str, saved_nbytes: int, rows: torch.Tensor, exists: bool) -> None:
    """Write ``rows`` right after the saved bytes of ``path`` and flush them."""
    data = rows.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    with open(path, "r+b" if exists else "wb") as f:
        f.seek(saved_nbytes)  # a file may be longer than its rows, after a failed append
        f.write(data.data)
        f.flush()
        os.fsync(f.fileno())


def _grown_meta(old: bytes, total: int) -> bytes:
    meta = json.loads(old)
    meta["shape"][0] = total
    for entry in meta.values():
        if isinstance(entry, dict) and "dtype" in entry and "shape" in entry:
            entry["shape"][0] = total
    return fmt.dumps(meta)


def _write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _undo(
    replaced: list[tuple[str, bytes]], temps: list[str], old_sizes: dict[str, int | None]
) -> None:
    """Put the replaced ``meta.json`` files and the leaf files' sizes back."""
    for meta_path, old in replaced:
        tx.write_bytes(meta_path, old)
    for tmp in temps:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    for path, size in old_sizes.items():
        with contextlib.suppress(OSError):
            if size is None:
                os.unlink(path)
            else:
                os.truncate(path, size)


publish_as("tensordict._td", append_memmap)  # upstream's path
