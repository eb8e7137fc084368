"""Loading memory-mapped tensordicts saved here or by upstream tensordict: load_memmap.

The loader reads each directory's ``meta.json`` and dispatches on ``_class`` (written since
upstream 0.15) or ``_type`` (upstream's class string, the only tag older directories have).
Nothing is trusted: every entry name is resolved inside the prefix (``..``, absolute paths and
symlinks leading out are refused), only regular files are opened (a FIFO never blocks the load),
folders nest at most :data:`~tensordict.memmap.format.MAX_DEPTH` levels and are never read twice
(symlink loops), every shape, dtype, device, stack length and file size is checked against the
metadata, and pickled entries are read as plain data only (:mod:`~tensordict.memmap.unpickle`)
unless the caller passes ``allow_pickle=True``. Errors name the file at fault.

Data files longer than their metadata describes load (the extra bytes are ignored), as upstream:
some of upstream's own saved examples end with a stray byte.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import _disable_current_modes

from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.lazy.views import _str_to_index, _SubTensorDict
from tensordict.core.nontensor.data import MetaData, NonTensorData, NonTensorStack, _object_array
from tensordict.core.options import logger
from tensordict.errors import (
    BatchSizeError,
    IncompleteMemmapError,
    LockedError,
    MemmapFormatError,
    PickleNotAllowedError,
)
from tensordict.memmap import archive as tdz
from tensordict.memmap import format as fmt
from tensordict.memmap import transaction as tx
from tensordict.memmap.mapping import dtype_from_str
from tensordict.memmap.nested import loaded_nested, nested_numel
from tensordict.memmap.tensor import MemoryMappedTensor
from tensordict.memmap.unpickle import read_pickled

__all__ = ["load_memmap", "load_memmap_into"]

CPU = torch.device("cpu")
#: loads started again when a writer switched the prefix to a new version meanwhile
_RETRIES = 3


@dataclass
class _Load:
    """What one load carries down the tree."""

    #: True: unpickle anything; None: plain data only (see :mod:`~tensordict.memmap.unpickle`);
    #: False: nothing
    allow_pickle: bool | None
    #: keys were written encoded: a path-like key with no encoded entry is skipped, as upstream
    robust_key: bool | None = None
    visited: fmt.Visited = field(default_factory=fmt.Visited)


def load_memmap(
    prefix: Any,
    device: Any = None,
    *,
    allow_pickle: bool | None = None,
    non_blocking: bool = False,
    out: Any = None,
    robust_key: bool | None = None,
    subpath: Any = None,
    mode: str | None = None,
    num_threads: int = 0,
) -> Any:
    """Load a tensordict saved by :func:`memmap_` / :func:`memmap` (here or by upstream tensordict).

    The leaves are :class:`MemoryMappedTensor` (nothing is read until used); the result is not
    locked. Non-tensor values saved as pickles are read as plain data only (built-in containers,
    numbers, strings, tensors, numpy arrays: nothing that runs code) unless ``allow_pickle=True``
    (trusted data: anything is unpickled); ``allow_pickle=False`` refuses them all. A writer
    replacing the directory meanwhile is noticed and the load starts again, so the result is one
    complete version.

    Raises:
        IncompleteMemmapError: missing ``meta.json``, data files or stack members (e.g. an
            interrupted write of an older version of this library).
        MemmapFormatError: malformed metadata, unknown dtype, a file too short or not a regular
            file, nesting too deep or in a loop.
        UnsafeKeyError: an entry that would be read from outside ``prefix``.
        PickleNotAllowedError: a pickled entry while ``allow_pickle`` is False, or one that
            names more than plain data while it is None.
        MappingLimitError: more files than the process may map (``vm.max_map_count``).

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> _ = TensorDict({"a": {"b": torch.arange(3)}}, [3]).memmap(d)
        >>> TensorDict.load_memmap(d)["a", "b"]
        MemoryMappedTensor([0, 1, 2])
    """
    if allow_pickle is not None and not isinstance(allow_pickle, bool):
        raise TypeError(
            f"allow_pickle must be a bool or None, got {type(allow_pickle).__name__} "
            f"{allow_pickle!r}: pass True to unpickle anything, None for plain data only, False to "
            "refuse every pickled entry."
        )
    fake = _fake_mode()
    if fake is not None:  # under FakeTensorMode: read the structure for real, fake the leaves
        with _disable_current_modes():
            node = load_memmap(
                prefix, allow_pickle=allow_pickle, subpath=subpath, mode=mode, device="meta"
            )
        node = node.apply(lambda t: torch.empty(t.shape, dtype=t.dtype))  # fake, on the cpu
        return _finish(node, device, out)
    root = os.path.abspath(os.fspath(prefix))
    if not os.path.lexists(root):
        _missing(root)
    if os.path.isfile(root):
        node = tdz.load_archive(
            root,
            load_memmap,
            mode=mode or "r",
            subpath=subpath,
            num_threads=num_threads,
            materialize=device is None or torch.device(device).type != "meta",
            allow_pickle=allow_pickle,
        )
        return _finish(node, device, out)
    if mode not in (None, "r", "r+"):
        raise ValueError(f"mode must be None, 'r' or 'r+', got {mode!r}.")
    if subpath is not None:
        root = _subpath(root, subpath)
    for attempt in range(_RETRIES + 1):
        before = _identity(root)
        try:
            node = _load_node(root, fmt.read_meta(root), _Load(allow_pickle, robust_key), None, 0)
        except (MemmapFormatError, OSError):
            if attempt == _RETRIES or _identity(root) == before:
                raise
            continue  # switched to a new version under us: load that one
        if _identity(root) == before:
            break
    return _finish(node, device, out)


def _subpath(root: str, subpath: Any) -> str:
    """The folder of the nested tensordict ``subpath`` ("a/b", or a nested key whose parts are
    keys as they are) below ``root``."""
    parts: list[str] = []

    def flatten(key: Any) -> None:
        if isinstance(key, str):
            parts.append(key)
        else:
            for k in key:
                flatten(k)

    if isinstance(subpath, str):  # "a/b": a path of keys
        parts.extend(p for p in subpath.split("/") if p)
    else:  # ("a", "b"): each one key, even with a "/" in it
        flatten(subpath)
    folder = root
    for part in parts:
        found = fmt.find_entry(folder, part)
        if found is None or not os.path.isfile(os.path.join(found, fmt.META)):
            raise MemmapFormatError(
                f"No tensordict found under subpath {subpath!r} in {root}: pass the path of a "
                "nested tensordict, e.g. 'key/subkey' or ('key', 'subkey')."
            )
        folder = found
    return folder


def load_memmap_into(
    td: Any,
    prefix: Any,
    robust_key: bool | None = True,
    *,
    allow_pickle: bool | None = None,
    mode: str | None = None,
) -> Any:
    """Load the tensordict saved at ``prefix`` into ``td`` in place, and return ``td``
    (``td.load_memmap_(prefix)``).

    ``td`` and its nested tensordicts stay the same objects; each leaf is replaced by the loaded
    (memory-mapped) tensor, whose shape may differ, and the entries that were not saved are
    removed. The batch size of ``td`` is kept: the saved one must start with it. A memory-mapped
    ``td`` ends up memory-mapped (and locked) at ``prefix``; without a directory to map (an
    archive) it ends up unlocked and no longer memory-mapped. Any other locked ``td`` is refused.
    A view of another tensordict (a sub-tensordict, a lazy stack) has the saved values written
    into its storage instead (``update_``), as upstream does. ``robust_key`` is accepted for
    upstream compatibility (keys are always read in both encodings); ``allow_pickle`` as for
    :func:`load_memmap`.

    Raises:
        LockedError: ``td`` is locked and not memory-mapped (nothing is changed).
        BatchSizeError: the saved batch size does not start with ``td``'s (nothing is changed).
        KeyError: ``td`` is a view that lacks a saved entry (nothing is added to a view).

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> _ = TensorDict(a=torch.ones(3)).save(d)
        >>> td = TensorDict(a=torch.zeros(3), b=torch.zeros(3))
        >>> out = load_memmap_into(td, d)
        >>> out is td, list(td.keys()), td["a"].tolist()
        (True, ['a'], [1.0, 1.0, 1.0])
    """
    dst = td._tensordict if getattr(type(td), "_is_tensorclass", False) else td
    if not isinstance(dst, TensorDict):  # a view (sub-tensordict, lazy stack): write through
        fresh = load_memmap(prefix, device=td.device, allow_pickle=allow_pickle, mode=mode)
        if isinstance(td, _SubTensorDict) and isinstance(fresh, _SubTensorDict):
            td._source.update_(fresh._source)  # a saved sub-tensordict holds its whole source
            return td
        return td.update_(fresh)
    was_memmap = dst.is_memmap()
    if dst.is_locked and not was_memmap:
        raise LockedError(
            "load_memmap_ would replace the entries of a locked tensordict. Unlock it first "
            "(td.unlock_()), or use load_memmap(prefix) for a new tensordict."
        )
    loaded = load_memmap(prefix, device=dst.device, allow_pickle=allow_pickle, mode=mode)
    if tuple(loaded.batch_size[: dst.batch_dims]) != tuple(dst.batch_size):
        raise BatchSizeError(
            f"cannot load {prefix} into a tensordict of batch size {list(dst.batch_size)}: its "
            f"batch size is {list(loaded.batch_size)}. Load it with load_memmap(prefix) instead."
        )
    if was_memmap:
        dst.unlock_()
    saved_at = loaded._memmap_prefix if isinstance(loaded, TensorDict) else None
    _replace_entries(dst, loaded, was_memmap and saved_at is not None)
    dst._is_memmap = bool(was_memmap and saved_at is not None)
    dst._memmap_prefix = saved_at if dst._is_memmap else None
    if dst._is_memmap:
        dst.lock_()
    return td


def _replace_entries(dst: TensorDict, src: Any, mapped: bool) -> None:
    """Make ``dst`` hold ``src``'s entries, reusing its nested TensorDicts of the same batch size
    (marked memory-mapped where ``src``'s are when ``mapped``)."""
    for key in [k for k in dst._tensordict if k not in src._tensordict]:
        del dst._tensordict[key]
    for key, value in src._own_items():
        current = dst._tensordict.get(key)
        if (
            isinstance(current, TensorDict)
            and isinstance(value, TensorDict)
            and current.batch_size == value.batch_size
        ):
            _replace_entries(current, value, mapped)
            current._is_memmap = mapped and value._is_memmap
            current._memmap_prefix = value._memmap_prefix if current._is_memmap else None
        else:
            dst._tensordict[key] = value


def _fake_mode() -> Any:
    """The active FakeTensorMode, if any (leaves cannot be mapped under it)."""
    from torch._guards import detect_fake_mode

    return detect_fake_mode()


def _finish(node: Any, device: Any, out: Any) -> Any:
    """Move a loaded tensordict to ``device`` and/or copy it into ``out``."""
    if device is not None and torch.device(device) != CPU:
        node = node.to(device)
    if out is not None:
        out.update_(node)
        return out
    return node


def _missing(root: str) -> None:
    """Raise for a prefix that does not exist, naming a previous version left aside by an
    interrupted overwrite (see :mod:`tensordict.memmap.transaction`) if there is one."""
    aside = tx.aside_versions(root)
    hint = ""
    if aside:
        hint = (
            f" An interrupted overwrite left its previous version in {aside[0]}: the next write "
            "of this prefix puts it back first, or rename it back yourself."
        )
    raise IncompleteMemmapError(f"{root} does not exist: it is not a saved tensordict.{hint}")


def _identity(root: str) -> tuple[int, int] | None:
    try:
        st = os.stat(root)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _load_node(
    directory: str, meta: dict[str, Any], ctx: _Load, batch_size: Any, depth: int
) -> Any:
    ctx.visited.enter(directory, depth)
    kind = fmt.kind_of(meta)
    if kind == "td":
        return _load_td(directory, meta, ctx, depth)
    if kind == "lazy":
        return _load_lazy(directory, meta, ctx, batch_size, depth)
    if kind in ("non_tensor", "metadata"):
        entry = _load_non_tensor(directory, meta, ctx, batch_size)
        if kind == "metadata":
            entry = MetaData._new(entry.data, entry.batch_size, entry.device)
        entry._mark_saved(directory)
        return entry
    if kind == "sub":
        return _load_sub(directory, meta, ctx, depth)
    if kind == "non_tensor_stack":
        stack = _load_non_tensor_stack(directory, meta, ctx, batch_size, depth)
        if isinstance(stack, NonTensorStack):
            stack._mark_saved(directory)
        return stack
    meta_path = os.path.join(directory, fmt.META)
    tag = meta.get("_type") or meta.get("_class")
    cls = fmt.resolve_class(str(tag), meta_path)
    if not getattr(cls, "_is_tensorclass", False):
        raise MemmapFormatError(f"{meta_path}: {tag} is not a tensordict class or a tensorclass.")
    return _load_tensorclass(cls, directory, meta, ctx, depth)


def _load_sub(directory: str, meta: dict[str, Any], ctx: _Load, depth: int) -> _SubTensorDict:
    """A sub-tensordict: the source saved in ``_source/``, viewed at the saved index."""
    sub = _child(directory, "_source")
    source = _load_node(sub, fmt.read_meta(sub), ctx, None, depth + 1)
    try:
        return _SubTensorDict(source, _str_to_index(meta.get("index", ())))
    except (IndexError, TypeError, ValueError, RuntimeError) as err:
        raise MemmapFormatError(
            f"{os.path.join(directory, fmt.META)}: the saved index {meta.get('index')!r} does "
            f"not index its source of batch size {list(source.batch_size)} ({err})."
        ) from None


def _read_pickle(path: str, ctx: _Load) -> Any:
    if ctx.allow_pickle is False:  # refused before the file is opened
        raise PickleNotAllowedError.for_entry(path, "allow_pickle=True to load_memmap")
    return read_pickled(fmt.open_regular(path), path, ctx.allow_pickle)


def _child(directory: str, key: str) -> str:
    sub = fmt.find_entry(directory, key)
    if sub is None:
        raise IncompleteMemmapError(
            f"{os.path.join(directory, fmt.META)} lists {key!r} but its directory "
            f"{fmt.entry_path(directory, key)} is missing."
        )
    return sub


def _load_td(directory: str, meta: dict[str, Any], ctx: _Load, depth: int) -> TensorDict:
    meta_path = os.path.join(directory, fmt.META)
    batch_size = _size(meta.get("shape", []), "'shape'", meta_path)
    device = _device(meta.get("device"), meta_path)
    source: dict[str, Any] = {}
    n = len(batch_size)
    for key, entry in meta.items():
        if not isinstance(entry, dict):
            continue
        suffix = "" if "type" in entry else ".memmap"
        if ctx.robust_key and fmt.missing_unsafe_entry(directory, key, suffix):
            # (a log record, not a warning: upstream skips it silently, and its callers turn
            # warnings into errors)
            logger.warning(
                "%s lists the key %r, whose encoded entry is missing; its raw name is a path "
                "outside the directory, which is never read. The key is skipped.",
                meta_path,
                key,
            )
            continue
        if "type" in entry:
            sub = _child(directory, key)
            value = _load_node(sub, fmt.read_meta(sub), ctx, batch_size, depth + 1)
        elif "dtype" in entry and "shape" in entry:
            value = _load_leaf(directory, key, entry, meta_path)
        else:
            continue
        shape = _leading_shape(value)
        if isinstance(value, NonTensorData):
            value = value._with_batch_size(batch_size)
            value._mark_saved(sub)
        elif tuple(shape[:n]) != tuple(batch_size):
            raise MemmapFormatError(
                f"{meta_path}: entry {key!r} has shape {list(shape)}, which does not start with "
                f"the batch size {list(batch_size)}."
            )
        source[key] = value
    td = TensorDict._new_unsafe(source, batch_size, device, is_memmap=True)
    td._memmap_prefix = directory
    return td


def _leading_shape(value: Any) -> tuple[int, ...]:
    """The shape of a loaded entry (a strided-nested tensor: its dims up to the first ragged
    one, which may be batch dims: batch size [2, 3] over members of shapes (3, 4) and (3, 5))."""
    if not isinstance(value, torch.Tensor):
        return tuple(value.batch_size)
    if value.is_nested and value.layout is torch.strided:
        dims = [value.size(0)]
        for dim in range(1, value.dim()):
            try:
                dims.append(value.size(dim))
            except RuntimeError:  # (a ragged dim has no size)
                break
        return tuple(dims)
    return tuple(value.shape)


def _size(value: Any, what: str, meta_path: str) -> torch.Size:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise MemmapFormatError(
            f"{meta_path}: {what} must be a list of non-negative ints, got {value!r}."
        )
    return torch.Size(value)


def _device(value: Any, meta_path: str) -> torch.device | None:
    if value in (None, "None"):
        return None
    try:
        return torch.device(str(value))
    except RuntimeError:
        raise MemmapFormatError(f"{meta_path}: {value!r} is not a device.") from None


def _load_leaf(directory: str, key: str, entry: dict[str, Any], meta_path: str) -> torch.Tensor:
    dtype = dtype_from_str(str(entry["dtype"]), meta_path)
    shape = _size(entry["shape"], f"the shape of {key!r}", meta_path)
    if entry.get("is_nested"):
        return _load_nested(directory, key, dtype, shape, meta_path)
    return _load_file(directory, key, ".memmap", dtype, shape, meta_path)


def _load_nested(
    directory: str, key: str, dtype: torch.dtype, shape: torch.Size, meta_path: str
) -> torch.Tensor:
    """A nested tensor: its element sizes in ``<key>.shape.memmap`` (``shape`` is theirs), its
    values one element after another in ``<key>.memmap``."""
    if len(shape) != 2:
        raise MemmapFormatError(
            f"{meta_path}: the nested tensor {key!r} must have a 2-d shape (elements, dims), "
            f"got {list(shape)}."
        )
    sizes = _load_file(directory, key, ".shape.memmap", torch.int64, shape, meta_path)
    sizes = sizes.as_subclass(torch.Tensor).clone()
    if sizes.numel() and int(sizes.min()) < 0:
        raise MemmapFormatError(f"{meta_path}: the nested tensor {key!r} has negative sizes.")
    numel = nested_numel(sizes)
    flat = _load_file(directory, key, ".memmap", dtype, torch.Size([numel]), meta_path)
    return loaded_nested(flat, sizes)


def _load_file(
    directory: str, key: str, suffix: str, dtype: torch.dtype, shape: torch.Size, meta_path: str
) -> torch.Tensor:
    numel = shape.numel()
    path = fmt.find_entry(directory, key, suffix)
    if path is None:
        if numel == 0:
            return MemoryMappedTensor.from_tensor(torch.empty(shape, dtype=dtype))
        raise IncompleteMemmapError(
            f"{meta_path} lists {key!r} but its data file "
            f"{fmt.entry_path(directory, key, suffix)} "
            "is missing (an interrupted write, or files removed)."
        )
    expected = numel * torch.empty((), dtype=dtype).element_size()
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise MemmapFormatError(f"{path} is not a regular file; refusing to map it.")
    if st.st_size < expected:
        raise MemmapFormatError(
            f"{path} holds {st.st_size} bytes, but {meta_path} describes {key!r} as "
            f"{list(shape)} {dtype} ({expected} bytes). The file is truncated or does not match "
            "its metadata."
        )
    return MemoryMappedTensor.from_filename(path, dtype, shape)


def _member_count(meta: dict[str, Any], meta_path: str) -> int | None:
    count = meta.get("num_members")
    if count is None:
        return None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise MemmapFormatError(
            f"{meta_path}: 'num_members' must be a non-negative int, got {count!r}."
        )
    return count


def _load_members(
    directory: str, meta: dict[str, Any], ctx: _Load, batch_size: Any, depth: int
) -> tuple[list[Any], int]:
    """The members ``0/``, ``1/``, ... of a saved stack (as many as ``num_members`` says, when
    the metadata says), and its stack dimension."""
    meta_path = os.path.join(directory, fmt.META)
    stack_dim = meta.get("stack_dim", 0)
    if not isinstance(stack_dim, int) or isinstance(stack_dim, bool):
        raise MemmapFormatError(f"{meta_path}: 'stack_dim' must be an int, got {stack_dim!r}.")
    count = _member_count(meta, meta_path)
    member_bs = None
    if batch_size is not None and 0 <= stack_dim < len(batch_size):
        member_bs = torch.Size([*batch_size[:stack_dim], *batch_size[stack_dim + 1 :]])
    subs = _member_folders(directory, count, meta_path)
    members = [_load_node(sub, fmt.read_meta(sub), ctx, member_bs, depth + 1) for sub in subs]
    if not members:
        raise IncompleteMemmapError(
            f"{directory} is a saved stack with no members: expected folders 0/, 1/, ... next to "
            f"{meta_path}."
        )
    return members, stack_dim


def _member_folders(directory: str, count: int | None, meta_path: str) -> list[str]:
    subs: list[str] = []
    while count is None or len(subs) < count:
        sub = fmt.find_entry(directory, str(len(subs)))
        if sub is None or not os.path.isdir(sub):
            if count is None:
                break
            raise IncompleteMemmapError(
                f"{meta_path} describes a stack of {count} members, but member folder "
                f"{len(subs)}/ is missing (an interrupted copy, or files removed)."
            )
        subs.append(sub)
    if count is not None and fmt.find_entry(directory, str(count)) is not None:
        raise MemmapFormatError(
            f"{meta_path} describes a stack of {count} members, but {directory} also holds a "
            f"member folder {count}/: the directory does not match its metadata."
        )
    return subs


def _load_lazy(
    directory: str, meta: dict[str, Any], ctx: _Load, batch_size: Any, depth: int
) -> LazyStackedTensorDict:
    members, stack_dim = _load_members(directory, meta, ctx, batch_size, depth)
    try:
        out = LazyStackedTensorDict(*members, stack_dim=stack_dim)
    except (ValueError, RuntimeError, IndexError) as err:
        raise MemmapFormatError(
            f"{os.path.join(directory, fmt.META)}: cannot stack the saved members: {err}"
        ) from None
    out._saved_path = directory  # type: ignore[attr-defined]
    return out


def _load_non_tensor(
    directory: str, meta: dict[str, Any], ctx: _Load, batch_size: Any
) -> NonTensorData:
    if "data" in meta:
        data = meta["data"]
    else:
        path = os.path.join(directory, "other.pickle")
        if os.path.lexists(path):
            data = _read_pickle(path, ctx).get("data")
        elif os.path.exists(os.path.join(directory, "_tensordict")):
            data = None
        else:
            raise IncompleteMemmapError(
                f"{directory}: non-tensor entry without data or other.pickle."
            )
    return NonTensorData(data, batch_size=batch_size if batch_size is not None else [])


def _load_non_tensor_stack(
    directory: str, meta: dict[str, Any], ctx: _Load, batch_size: Any, depth: int
) -> Any:
    data = meta.get("data")
    if data == "pickle.pkl":
        data = _read_pickle(os.path.join(directory, "pickle.pkl"), ctx)
    elif isinstance(data, str):
        raise MemmapFormatError(f"{directory}: invalid pickled NonTensorStack file name {data!r}.")
    if data is None:  # the older layout: one folder per member
        members, stack_dim = _load_members(directory, meta, ctx, batch_size, depth)
        if not all(isinstance(m, (NonTensorData, NonTensorStack)) for m in members):
            out = LazyStackedTensorDict(*members, stack_dim=stack_dim)
            out._saved_path = directory  # type: ignore[attr-defined]
            return out
        return NonTensorStack.from_array(np.stack([m.to_array() for m in members], stack_dim))
    shape = list(batch_size) if batch_size is not None else None
    if shape is not None and not _has_shape(data, shape):
        raise MemmapFormatError(
            f"{os.path.join(directory, fmt.META)}: the stacked data does not have the batch "
            f"shape {shape} of its tensordict."
        )
    return NonTensorStack.from_array(_object_array(data, shape))


def _has_shape(data: Any, shape: list[int]) -> bool:
    if not shape:
        return True
    if not isinstance(data, list) or len(data) != shape[0]:
        return False
    return all(_has_shape(d, shape[1:]) for d in data)


def _load_tensorclass(
    cls: type, directory: str, meta: dict[str, Any], ctx: _Load, depth: int
) -> Any:
    fields = {k: v for k, v in meta.items() if k not in ("_type", "_class", "_format_version")}
    pickled = os.path.join(directory, "other.pickle")
    if os.path.lexists(pickled):
        fields.update(_read_pickle(pickled, ctx))
    inner_dir = os.path.join(directory, "_tensordict")
    ctx.visited.enter(inner_dir, depth + 1)
    td = _load_td(inner_dir, fmt.read_meta(inner_dir), ctx, depth + 1)
    return cls._from_tensordict(td, fields)  # type: ignore[attr-defined]
