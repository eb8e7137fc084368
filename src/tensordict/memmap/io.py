"""Writing memory-mapped tensordicts: memmap_, memmap, memmap_like, refresh.

Loading lives in :mod:`tensordict.memmap.load` (``load_memmap`` is re-exported here), adding one
leaf to a saved tensordict in :mod:`tensordict.memmap.make` (``make_memmap*``, re-exported).

A write runs in three steps, so that bad input writes nothing and a crash never loses data:

1. plan (:mod:`~tensordict.memmap.plan`): walk the tree and validate everything (keys, file-name
   and path lengths, tensors, picklability, depth, the process's mapping limit);
2. under the prefix's write lock, decide what each leaf needs (write, keep the existing file, grow
   it) and check the free space;
3. write the new version beside the prefix and switch it in atomically
   (:mod:`~tensordict.memmap.transaction`), then map the new files.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import os
import shutil
import stat
import warnings
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.behaviour.consolidate import run_early
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.lazy.views import _SubTensorDict
from tensordict.errors import (
    AlreadyMemmappedError,
    ArchiveReturnEarlyError,
    LazyViewError,
    MappingLimitError,
    MemmapExistsError,
    MemmapFormatError,
    MemmapSymlinkError,
    NoSpaceError,
    RawKeyPathError,
)
from tensordict.memmap import archive as tdz
from tensordict.memmap import format as fmt
from tensordict.memmap import mapping
from tensordict.memmap import transaction as tx
from tensordict.memmap.executor import shared_executor
from tensordict.memmap.files import preallocate
from tensordict.memmap.load import load_memmap
from tensordict.memmap.make import make_memmap, make_memmap_from_storage, make_memmap_from_tensor
from tensordict.memmap.nested import flat_buffer
from tensordict.memmap.plan import Builder, Leaf, Plan, plan
from tensordict.memmap.tensor import MemoryMappedTensor, is_whole_file, write_file
from tensordict.sizes import format_bytes

__all__ = [
    "load_memmap",
    "make_memmap",
    "make_memmap_from_storage",
    "make_memmap_from_tensor",
    "memmap",
    "memmap_",
    "memmap_like",
    "memmap_refresh_",
]

CPU = torch.device("cpu")
#: mappings kept free for everything else the process maps (libraries, allocator arenas)
_MAP_MARGIN = 1024


def _is_tensorclass(value: Any) -> bool:
    return bool(getattr(type(value), "_is_tensorclass", False))


# ====================================================================== executing a plan
def _execute(plan: Plan, build: Builder, num_threads: int, existsok: bool) -> Any:
    """Write ``plan`` crash-safely (see :mod:`tensordict.memmap.transaction`); return the built
    tensordict, mapped onto the new files."""
    _check_map_limit(plan)
    real = os.path.realpath(plan.root)
    if os.path.lexists(real) and not os.path.isdir(real):
        raise NotADirectoryError(
            errno.ENOTDIR, f"cannot memory-map to {plan.root}: it exists and is not a folder"
        )
    with tx.prefix_lock(real):
        tx.clean_leftovers(real)
        _check_target(plan.root, real, existsok)
        _check_no_symlinked_folder(plan)
        jobs = _resolve(plan, real)
        _check_space(plan, real, jobs)
        try:
            _write_version(plan, tx.Staging(plan.root, real), jobs, num_threads)
        except tx.CannotStage:  # a mount point inside the prefix: write in place
            _write_version(plan, tx.Staging(plan.root, real, in_place=True), jobs, num_threads)
    return build()


def _write_version(plan: Plan, staging: tx.Staging, jobs: list[_Job], num_threads: int) -> None:
    try:
        _write(plan, staging, jobs, num_threads)
        staging.commit()
    except BaseException:
        staging.abort()
        raise
    staging.finish()


def _check_no_symlinked_folder(plan: Plan) -> None:
    """Refuse (as upstream) to write a nested collection where the prefix holds a symlink: the
    write would otherwise replace the link (or, in place, go through it)."""
    for directory in plan.directories():
        if directory != plan.root and os.path.islink(directory):
            raise MemmapSymlinkError(
                "Refusing to write a memory-mapped TensorDict through symlink "
                f"{directory} (it leads to {os.path.realpath(directory)}). Remove the link, or "
                "write to another prefix."
            )


def _check_raw_keys(td: Any) -> None:
    """``robust_key=False`` writes keys under their raw names (as upstream): refuse a key whose
    raw name is a path, before anything is written."""
    for key in td.keys(include_nested=True):
        for part in (key,) if isinstance(key, str) else key:
            if not fmt.safe_raw_name(part):
                raise RawKeyPathError(
                    f"No such file or directory: key {part!r} cannot be written under its raw "
                    "name with robust_key=False: that name is a path, not a file name. Pass "
                    "robust_key=True (or leave it None) to encode it."
                )


def _check_target(root: str, real: str, existsok: bool) -> None:
    path = os.path.join(real, fmt.META)
    if not existsok and os.path.lexists(path):
        raise MemmapExistsError(
            errno.EEXIST,
            f"{os.path.join(root, fmt.META)} already exists: {root} holds a saved tensordict. Pass "
            "existsok=True to replace it (memmap_like keeps the files it reuses), or choose "
            "another prefix",
        )


def _check_map_limit(plan: Plan) -> None:
    new = sum(1 for leaf in plan.leaves if leaf.nbytes)
    limit, in_use = mapping.map_limit(), mapping.maps_in_use()
    room = limit - in_use - _MAP_MARGIN
    if new and new > room:
        raise MappingLimitError(
            errno.ENOMEM,
            f"cannot memory-map {plan.root}: it has {new} non-empty leaves, each mapped on its "
            f"own, and this process may map only {max(room, 0)} more files (vm.max_map_count is "
            f"{limit}, {in_use} mappings in use). Nothing was written. Store fewer, larger "
            "tensors (stack leaves of the same shape), or raise the limit (sysctl "
            "vm.max_map_count=...)",
        )


class _Job:
    """What becomes of one leaf: ``"write"`` its data or zeros, ``"link"`` the file already at its
    path (kept as is), or ``"grow"`` it (its bytes, then zeros)."""

    __slots__ = ("how", "leaf", "old_size")

    def __init__(self, how: str, leaf: Leaf, old_size: int = 0) -> None:
        self.how, self.leaf, self.old_size = how, leaf, old_size


def _resolve(plan: Plan, real: str) -> list[_Job]:
    """Decide, under the lock, what to do with each leaf given what the prefix holds now."""
    jobs = []
    layouts: dict[str, dict[str, tuple[list[int], str]]] = {}
    for leaf in plan.leaves:
        here = os.path.join(real, os.path.relpath(leaf.path, plan.root))
        if not plan.like:
            whole = leaf.value is not None and is_whole_file(leaf.value, leaf.path)
            jobs.append(_Job("link" if whole else "write", leaf))
            continue
        size = os.lstat(here).st_size if _is_plain_file(here) else None
        folder = os.path.dirname(here)
        if folder not in layouts:
            layouts[folder] = _saved_layouts(folder)
        old = layouts[folder].get(os.path.basename(here))
        if size is None or leaf.nbytes == 0 or leaf.value is not None or old is None:
            jobs.append(_Job("write", leaf))  # new, or a file no saved leaf describes
            continue
        old_shape, shape = list(old[0]), list(leaf.shape)
        if old[1] != str(leaf.dtype) or old_shape[1:] != shape[1:] or old_shape[:1] > shape[:1]:
            jobs.append(_Job("write", leaf))  # another layout: fresh zeros, never its bytes
        elif old_shape == shape and size >= leaf.nbytes:
            jobs.append(_Job("link", leaf))  # as upstream: an existing file keeps its content
        else:  # the same rows, fewer of them: kept, then zeros
            warnings.warn(
                f"{leaf.path} holds {size} bytes, smaller than the {leaf.nbytes} of its leaf: it "
                "is grown with zeros. Upstream tensordict 0.17 will raise instead.",
                FutureWarning,
                stacklevel=4,
            )
            jobs.append(_Job("grow", leaf, size))
    return jobs


def _saved_layouts(directory: str) -> dict[str, tuple[list[int], str]]:
    """``file name -> (shape, dtype)`` of each tensor file the saved ``meta.json`` of
    ``directory`` describes (none when there is no readable metadata): ``memmap_like`` keeps an
    existing file only when it holds a leaf of the same dtype and shape (or fewer rows of it)."""
    try:
        meta = fmt.read_meta(directory)
    except (MemmapFormatError, OSError):
        return {}
    out = {}
    for key, entry in meta.items():
        if isinstance(entry, dict) and not entry.get("is_nested") and "dtype" in entry:
            shape = entry.get("shape")
            if isinstance(shape, list):
                out[fmt.encode_key(key) + ".memmap"] = (shape, str(entry["dtype"]))
    return out


def _is_plain_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _check_space(plan: Plan, real: str, jobs: list[_Job]) -> None:
    need = sum(j.leaf.nbytes for j in jobs if j.how != "link")
    need += sum(len(b) for _, b in plan.pickles) + sum(len(b) for _, b in plan.metas)
    where = real if os.path.isdir(real) else os.path.dirname(real)
    free = tx.free_bytes(where)
    if need > free:
        raise NoSpaceError(
            errno.ENOSPC,
            f"not enough space to write {plan.root}: {format_bytes(need)} ({need} bytes) needed, "
            f"{format_bytes(free)} free on its file system (an overwrite keeps the previous "
            "version until the new one is complete). Nothing was written",
        )


def _write(plan: Plan, staging: tx.Staging, jobs: list[_Job], num_threads: int) -> None:
    if staging.in_place:
        _prepare_in_place(plan, staging.real)
    names = plan.names()
    for directory in plan.directories():
        target = staging.path(directory)
        os.makedirs(target, exist_ok=True)
        if not staging.in_place:
            tx.carry_foreign(staging.old(directory), target, names[directory])

    durable = tx.durable()  # read here: the pool's threads do not see this thread's context

    def run(job: _Job) -> None:
        _run_job(job, staging, durable)

    if num_threads and num_threads > 0 and len(jobs) > 1:
        futures = [shared_executor(num_threads).submit(run, job) for job in jobs]
        concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
        for future in futures:  # after a failure, the writes not started never start
            future.cancel()
        # the error is raised once no write is running: the staging folder is then removed
        # whole (a write still running could recreate a file in it)
        concurrent.futures.wait(futures)
        for future in futures:
            if not future.cancelled():
                future.result()
    else:
        for job in jobs:
            run(job)
    for path, data in plan.pickles:
        tx.write_bytes(staging.path(path), data)
    for directory, data in plan.metas:  # deepest first, the root's last
        tx.write_bytes(os.path.join(staging.path(directory), fmt.META), data)


def _run_job(job: _Job, staging: tx.Staging, durable: bool) -> None:
    leaf = job.leaf
    here, target = staging.old(leaf.path), staging.path(leaf.path)
    try:
        if job.how == "link":
            if target != here:
                tx.link_or_copy(here, target)
        elif job.how == "grow":
            _grow(here, target, job.old_size, leaf.nbytes)
        else:
            fresh = not staging.in_place
            write_file(target, leaf.value, leaf.shape, leaf.dtype, fresh=fresh, flush=durable)
    except tx.CannotStage:
        raise
    except OSError as err:
        raise _write_error(err, leaf) from None


def _grow(src: str, target: str, old_size: int, nbytes: int) -> None:
    tmp = f"{target}.tmp-{os.getpid()}-1"
    try:
        with open(src, "rb") as f, open(tmp, "wb") as out:
            shutil.copyfileobj(f, out)
            preallocate(out.fileno(), nbytes, target)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_error(err: OSError, leaf: Leaf) -> OSError:
    """The same error, naming the file's final path and size (not the staging folder)."""
    what = f"cannot write {leaf.path} ({format_bytes(leaf.nbytes)}, {leaf.nbytes} bytes)"
    reason = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        return NoSpaceError(errno.ENOSPC, f"{what}: {reason}. Nothing was changed under the prefix")
    return OSError(err.errno, f"{what}: {reason}")


def _prepare_in_place(plan: Plan, real: str) -> None:
    """Before writing in place: refuse folders linked out of the prefix, remove the root's
    ``meta.json`` (so an interrupted write never loads), and what only the old version held."""
    paths = [leaf.path for leaf in plan.leaves] + [p for p, _ in plan.pickles]
    for path in paths + [os.path.join(d, fmt.META) for d in plan.directories()]:
        fmt.check_write_inside(plan.root, path)
    stale = []
    for directory, written in plan.names().items():
        here = os.path.join(real, os.path.relpath(directory, plan.root))
        stale += [os.path.join(here, name) for name in tx.owned_names(here) - written]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(real, fmt.META))
    tx.remove_legacy_tmp(real)
    for path in stale:
        tx.remove_tree(path)


def _archive_options(prefix: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The pack options when ``prefix`` names an archive (``.tdz`` or ``archive=True``), else
    None; ``compression`` without an archive is refused."""
    archive = kwargs.pop("archive", None)
    options: dict[str, Any] = {
        k: kwargs.pop(k) for k in ("compression", "compresslevel") if k in kwargs
    }
    if prefix is not None and tdz.is_archive_target(prefix, archive):
        return options
    if any(v is not None for v in options.values()):
        raise ValueError(
            "compression is only supported when writing a memmap archive: pass archive=True or "
            "a prefix ending in '.tdz'."
        )
    return None


def _check_archive_target(prefix: Any, existsok: bool) -> None:
    if not existsok and os.path.lexists(prefix):
        raise MemmapExistsError(
            f"{os.fspath(prefix)} already exists and existsok=False: remove it, choose another "
            "archive path, or pass existsok=True to replace it."
        )


def _prefix(prefix: Any) -> str:
    return os.path.abspath(os.fspath(prefix))


def _anonymous(td: Any, like: bool, inplace: bool) -> Any:
    def leaf(t: torch.Tensor) -> torch.Tensor:
        if isinstance(t, MemoryMappedTensor) and t.filename is None and not like and inplace:
            return t
        return MemoryMappedTensor.from_tensor(t, filename=None, copy_data=not like)

    if inplace:
        out = td._apply_leaves(leaf, inplace=False)
        _transplant(td, out)
        out = td
    else:
        out = td._apply_leaves(leaf)
    _mark_memmap(out, None)
    return out.lock_()


def _transplant(dst: Any, src: Any) -> None:
    """Put ``src``'s leaves into ``dst`` (same structure), keeping ``dst``'s objects."""
    if isinstance(dst, TensorDict):
        for key, value in src._own_items():
            current = dst._tensordict.get(key)
            if isinstance(current, TensorDictBase) or _is_tensorclass(current):
                _transplant(current, value)
            else:
                dst._tensordict[key] = value
    elif isinstance(dst, LazyStackedTensorDict):
        for a, b in zip(dst.tensordicts, src.tensordicts):
            _transplant(a, b)
    elif _is_tensorclass(dst):
        _transplant(dst._tensordict, src._tensordict)


def _locked(out: Any) -> Any:
    """Lock a new memory-mapped copy (a sub-tensordict reads the lock of its source)."""
    if isinstance(out, _SubTensorDict):
        out._source.lock_()
        return out
    return out.lock_()


def _mark_memmap(node: Any, prefix: str | None) -> None:
    if isinstance(node, TensorDict):
        node._is_memmap = True
        node._memmap_prefix = prefix
        node._device = CPU
        for value in node._tensordict.values():
            _mark_memmap(value, None)
    elif isinstance(node, LazyStackedTensorDict):
        for m in node.tensordicts:
            _mark_memmap(m, None)
    elif _is_tensorclass(node):
        _mark_memmap(node._tensordict, None)


def _is_written(node: Any, directory: str | None) -> bool:
    """Whether every leaf already is its file under ``directory`` (any memory-mapped tensor when
    ``directory`` is None), so that memmap_ has nothing to do."""
    if isinstance(node, LazyStackedTensorDict):
        return all(
            _is_written(m, None if directory is None else os.path.join(directory, str(i)))
            for i, m in enumerate(node.tensordicts)
        )
    if _is_tensorclass(node):
        sub = None if directory is None else os.path.join(directory, "_tensordict")
        return _is_written(node._tensordict, sub)
    if not isinstance(node, TensorDictBase):
        return True  # non-tensor data: nothing mapped
    for key, value in node._own_items():
        is_leaf = isinstance(value, torch.Tensor)
        path = None
        if directory is not None:
            path = fmt.entry_path(directory, key, ".memmap" if is_leaf else "")
        if not is_leaf:
            ok = _is_written(value, path)
        elif value.is_nested:
            flat = flat_buffer(value)
            ok = flat is not None and (path is None or is_whole_file(flat, path))
        elif path is None or value.numel() == 0:  # an empty leaf has no file
            ok = isinstance(value, MemoryMappedTensor)
        else:
            ok = is_whole_file(value, path)
        if not ok:
            return False
    return True


def memmap_(
    td: Any,
    prefix: Any = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    existsok: bool = True,
    robust_key: bool | None = None,
    return_early: bool = False,
    share_non_tensor: bool = False,
    **kwargs: Any,
) -> Any:
    """Write every leaf to memory-mapped files under ``prefix`` and use the files from now on.

    Without ``prefix`` the leaves go to anonymous shared memory (no files; workers of any start
    method receive them by handle). Locks the tensordict. Calling it again with the same prefix
    does nothing. Replacing a saved tensordict is crash-safe: a crash at any instant leaves the
    complete old or the complete new version (:mod:`tensordict.memmap.transaction`).

    Raises:
        AlreadyMemmappedError: already memory-mapped elsewhere and ``copy_existing`` is False.
        MemmapExistsError: ``prefix`` holds a saved tensordict and ``existsok`` is False.
        NoSpaceError: not enough space on the file system (nothing was changed).

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(4)}, [4]).memmap_(tempfile.mkdtemp())
        >>> td.is_memmap(), td.is_locked, type(td["x"]).__name__
        (True, True, 'MemoryMappedTensor')
    """
    if return_early:
        raise ValueError(
            "return_early=True is not supported; the write completes before returning."
        )
    if isinstance(td, _SubTensorDict):
        raise LazyViewError(
            "memmap_ cannot move the values of a sub-tensordict into files: they belong to its "
            "parent. Memory-map the parent (td.memmap_()), or save a copy with sub.memmap(prefix)."
        )
    archive = _archive_options(prefix, kwargs)
    if archive is not None:
        _check_archive_target(prefix, existsok)
        tdz.write_archive(td, prefix, lambda t, d: memmap(t, d, num_threads=num_threads), **archive)
        return memmap_(td, None)
    if prefix is None and getattr(td, "_memmap_prefix", None) is not None:
        prefix = td._memmap_prefix  # (as upstream: it stays where it is saved, unlocked since)
    if prefix is None:
        if td.is_memmap() and td.is_locked and _is_written(td, None):  # in files or shm: as is
            return td
        return _anonymous(td, like=False, inplace=True)
    if robust_key is False:
        _check_raw_keys(td)
    root = _prefix(prefix)
    if td.is_memmap() and td.saved_path is not None and not copy_existing:
        if td.saved_path != root:
            raise AlreadyMemmappedError(
                "A filename was provided but the tensor already has a file associated: this "
                f"tensordict is memory-mapped at {td.saved_path}, and memmap_({root!r}) would "
                "move it. Pass copy_existing=True to copy the files, or use td.memmap(prefix) for "
                "a copy."
            )
        if td.is_locked and _is_written(td, root):
            return td
        # entries were added or replaced since: a new version, keeping (hard-linking) the files
        # of the leaves that already are their file, so that their mappings stay valid
    new, build = plan(td, root, like=False, inplace=True)
    return _execute(new, build, num_threads, existsok).lock_()


def memmap(
    td: Any,
    prefix: Any = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    existsok: bool = True,
    robust_key: bool | None = None,
    return_early: bool = False,
    **kwargs: Any,
) -> Any:
    """A memory-mapped copy of ``td`` under ``prefix`` (locked); ``td`` is left unchanged.

    Replacing a saved tensordict is crash-safe, as for :func:`memmap_`. ``td.save(prefix)`` and
    ``td.dumps(prefix)`` are this method too. ``return_early=True`` with ``num_threads > 0``
    writes in a background thread and returns a :class:`~tensordict.utils.TensorDictFuture`
    (as upstream).

    Raises:
        MemmapExistsError: ``prefix`` holds a saved tensordict and ``existsok`` is False.
        NoSpaceError: not enough space on the file system (nothing was changed).

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> _ = TensorDict({"x": torch.zeros(2)}, [2]).memmap(d)
        >>> TensorDict({"x": torch.ones(2)}, [2]).memmap(d)["x"]  # replaces the saved one
        MemoryMappedTensor([1., 1.])
    """
    if return_early and num_threads > 0:
        return run_early(
            lambda: memmap(
                td,
                prefix,
                copy_existing,
                num_threads=num_threads,
                existsok=existsok,
                robust_key=robust_key,
                **kwargs,
            )
        )
    archive = _archive_options(prefix, kwargs)
    if archive is not None:
        _check_archive_target(prefix, existsok)
        tdz.write_archive(td, prefix, lambda t, d: memmap(t, d, num_threads=num_threads), **archive)
        return load_memmap(prefix, allow_pickle=True)
    if prefix is None:
        return _anonymous(td, like=False, inplace=False)
    if robust_key is False:
        _check_raw_keys(td)
    new, build = plan(td, _prefix(prefix), like=False, inplace=False)
    return _locked(_execute(new, build, num_threads, existsok))


def memmap_like(
    td: Any,
    prefix: Any = None,
    copy_existing: bool = False,
    *,
    existsok: bool = True,
    num_threads: int = 0,
    robust_key: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Memory-mapped files with the structure of ``td``; no data is copied.

    New files are zero-filled and really allocated (a short disk raises here, never at a later
    read). As upstream, a file already at a leaf's path is kept with its content when
    ``existsok=True``, so that a buffer can be reopened: nothing saved is ever zeroed, not even
    the directory ``td`` was loaded from. A smaller file is grown with zeros (``FutureWarning``).
    Use it to preallocate outputs that worker processes write into (``map(..., out=...)``).

    Raises:
        MemmapExistsError: ``prefix`` holds a saved tensordict and ``existsok`` is False.
        NoSpaceError: not enough space on the file system (nothing was changed).

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> out = TensorDict({"y": torch.ones(3)}, [3]).memmap_like(tempfile.mkdtemp())
        >>> out["y"]
        MemoryMappedTensor([0., 0., 0.])
    """
    archive = _archive_options(prefix, kwargs)
    if archive is not None:
        _check_archive_target(prefix, existsok)
        if kwargs.get("return_early"):
            raise ArchiveReturnEarlyError(
                "memmap_like(..., return_early=True) cannot write an archive: it is written "
                "whole and renamed in. Drop return_early, or write a directory prefix."
            )
        tdz.write_archive(td, prefix, lambda t, d: memmap_like(t, d), **archive)
        return load_memmap(prefix, allow_pickle=True, mode="r+")  # a buffer: writes go through
    if prefix is None:
        return _anonymous(td, like=True, inplace=False)
    if robust_key is False:
        _check_raw_keys(td)
    new, build = plan(td, _prefix(prefix), like=True, inplace=False)
    return _locked(_execute(new, build, num_threads, existsok))


# ====================================================================== in-place updates
def rewrite_saved_non_tensor(value: Any, directory: str) -> None:
    """Rewrite the folder of a memory-mapped non-tensor entry after its value changed (a new
    version of that folder, switched in as any other write); the entry calls it through
    ``tensordict.core.factory``."""
    new, _ = plan(value, os.path.abspath(directory), like=False, inplace=True)
    _execute(new, lambda: value, 0, existsok=True)


def memmap_refresh_(td: Any, *, allow_pickle: bool | None = None) -> Any:
    """Reload ``td``'s leaves from its directory after another process rewrote the metadata
    (``td.memmap_refresh_()``; ``allow_pickle`` as for :func:`load_memmap`); return ``td``."""
    if td.saved_path is None:
        raise MemmapFormatError(
            "memmap_refresh_ needs a tensordict memory-mapped to a directory; this one has none."
        )
    fresh = load_memmap(td.saved_path, allow_pickle=allow_pickle)
    if isinstance(td, TensorDict):
        td._tensordict.clear()
        td._tensordict.update(fresh._tensordict)
        td._batch_size = fresh.batch_size
        if td.is_locked:
            td._set_locked(True)
        return td
    _transplant(td, fresh)
    return td
