"""Crash-safe writes of a saved tensordict: lock, stage beside, switch atomically, clean up.

A write to ``PARENT/NAME`` never modifies a file of the version already there::

    1 lock    flock(LOCK_EX) on PARENT/.NAME.tdlock; another writer of the prefix waits here
    2 clean   remove what killed writers left: PARENT/.NAME.tdstage-* folders (what they left
              inside the prefix, *.tmp-PID-TID files and the like, is not carried over)
    3 stage   write the new version into PARENT/.NAME.tdstage-PID-TOKEN: data files, pickles,
              meta.json; hard-link the files kept from the old version (unchanged leaves, and
              the files under the prefix that the saved tensordict does not describe)
    4 sync    fsync every file and folder of the staging folder
    5 switch  renameat2(RENAME_EXCHANGE) swaps the staging folder and the prefix in one step;
              fsync PARENT so that the switch itself is durable
    6 remove  the staging path now holds the previous version: remove it; remove the lock file

A crash (kill -9, power loss) at any instant leaves ``PARENT/NAME`` holding the complete old or
the complete new version, and the prefix stays a plain directory in upstream's format. Readers take
no lock: mappings of the old files stay valid (the old inodes live on until unmapped), and
:func:`~tensordict.memmap.load.load_memmap` reloads when the prefix was switched under it.

Fallbacks, where the switch is impossible:

- no RENAME_EXCHANGE (old kernels, some network file systems): the old version is renamed aside to
  ``PARENT/.NAME.tdprev-*`` and the new one into place. A crash between those two renames leaves
  no ``NAME``; the next write of the prefix renames the old version back first.
- the prefix is a mount point (or holds one), or its parent is not writable: the new version is
  written in place (data files under temporary names renamed over the old ones, the root
  ``meta.json`` removed first and written last). A crash then leaves the prefix without
  ``meta.json``: it refuses to load (``IncompleteMemmapError``), it never loads a mix. With a
  read-only parent the lock file is ``NAME/.tdlock``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import ctypes
import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator

from tensordict.memmap import format as fmt

__all__ = [
    "CannotStage",
    "Staging",
    "aside_versions",
    "current_umask",
    "durable",
    "exchange",
    "free_bytes",
    "fsync_tree",
    "owned_names",
    "prefix_lock",
    "remove_tree",
    "scratch_writes",
    "write_bytes",
]

#: temporary files of writers of an earlier version of this library (inside the prefix)
_LEGACY_TMP = re.compile(r"\.tmp-\d+-\d+$")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_NO_EXCHANGE = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP)
_NOT_HERE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.EXDEV, errno.EBUSY)


# ====================================================================== names beside the prefix
def _base(real: str) -> str:
    """``PARENT/.NAME`` (``NAME`` shortened with a digest when too long for a file name)."""
    parent, name = os.path.split(real)
    if len(os.fsencode(name)) > 180:
        digest = hashlib.sha1(os.fsencode(name)).hexdigest()[:16]
        name = f"{name[:100]}~{digest}"
    return os.path.join(parent, f".{name}")


def _token() -> str:
    return f"{os.getpid()}-{secrets.token_hex(6)}"


# ====================================================================== the lock
@contextlib.contextmanager
def prefix_lock(real: str) -> Iterator[str]:
    """Hold the exclusive write lock of the prefix ``real``; yield the lock file's path.

    The lock is an ``flock`` on ``PARENT/.NAME.tdlock`` (``NAME/.tdlock`` when the parent is not
    writable). A second writer waits until the first is done (or dead: the kernel drops the lock
    of a killed process). The file is removed on release; a writer that finds it replaced after
    acquiring it starts again, so removing it never lets two writers in.
    """
    os.makedirs(os.path.dirname(real), exist_ok=True)
    path = f"{_base(real)}.tdlock"
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno not in _NOT_HERE or path.startswith(real + os.sep):
                raise
            os.makedirs(real, exist_ok=True)
            path = os.path.join(real, ".tdlock")
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # removed or replaced by the writer before us: lock the current file
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


# ====================================================================== leftovers
def clean_leftovers(real: str) -> None:
    """Remove what killed writers of ``real`` left beside it; put back a previous version that a
    two-rename switch left aside. Call with the lock held."""
    parent = os.path.dirname(real)
    base = os.path.basename(_base(real))
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return
    for name in sorted(names):
        path = os.path.join(parent, name)
        if name.startswith(f"{base}.tdprev-") and not os.path.lexists(real):
            os.rename(path, real)  # the crash came between the two renames: undo the first
        elif name.startswith((f"{base}.tdstage-", f"{base}.tdprev-")):
            remove_tree(path)


def aside_versions(root: str) -> list[str]:
    """Previous versions of ``root`` that an interrupted two-rename switch left beside it."""
    real = os.path.realpath(root)
    parent, base = os.path.dirname(real), os.path.basename(_base(real))
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    return sorted(os.path.join(parent, n) for n in names if n.startswith(f"{base}.tdprev-"))


def remove_legacy_tmp(real: str) -> None:
    """Remove ``*.tmp-PID-TID`` files left inside ``real`` by killed writers (in-place writes)."""
    for dirpath, _dirs, files in os.walk(real):
        for name in files:
            if _LEGACY_TMP.search(name):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(dirpath, name))


def remove_tree(path: str) -> None:
    """Remove a folder (or file) written by a writer: a previous version, a staging folder."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


# ====================================================================== the old version
def owned_names(directory: str) -> set[str]:
    """The names in ``directory`` that its saved tensordict describes (per its ``meta.json``).

    Anything else in the folder belongs to someone else and is kept by an overwrite. Unreadable
    metadata describes nothing: everything is kept.
    """
    try:
        meta = fmt.read_meta(directory)
    except (fmt.MemmapFormatError, OSError):
        return set()
    names = {fmt.META}
    kind = fmt.kind_of(meta)
    if kind == "td":
        for key, entry in meta.items():
            if isinstance(entry, dict) and ("type" in entry or "dtype" in entry):
                suffix = "" if "type" in entry else ".memmap"
                names.update(_spellings(str(key), suffix))
    elif kind in ("lazy", "non_tensor_stack"):
        i = 0
        while os.path.isdir(os.path.join(directory, str(i))):
            names.add(str(i))
            i += 1
        names.add("pickle.pkl")
    else:
        names.update({"_tensordict", "other.pickle"})
    return names


def _spellings(key: str, suffix: str) -> set[str]:
    out = {fmt.encode_key(key) + suffix, fmt.encode_key(key, escape_space=True) + suffix}
    if key and "/" not in key and "\0" not in key and key not in (".", ".."):
        out.add(key + suffix)
    return out


def carry_foreign(old: str, new: str, written: set[str]) -> None:
    """Hard-link into ``new`` what ``old`` holds that is neither written by the new version nor
    described by the old one (the user's own files), and no leftover of a killed writer."""
    if not os.path.isdir(old) or os.path.islink(old):
        return
    skip = written | owned_names(old)
    for name in os.listdir(old):
        if name in skip or _is_transient(name):
            continue
        src, dst = os.path.join(old, name), os.path.join(new, name)
        if os.path.isdir(src) and not os.path.islink(src):
            _link_tree(src, dst)
        elif os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        else:
            link_or_copy(src, dst)


def _link_tree(src: str, dst: str) -> None:
    """Recreate the folder ``src`` at ``dst``: folders made, symlinks copied, files hard-linked.

    Raises:
        CannotStage: a folder inside is on another file system (a mount point).
    """
    device = os.stat(os.path.dirname(src)).st_dev
    if os.stat(src).st_dev != device:
        raise CannotStage(errno.EXDEV, f"{src} is a mount point", src)
    for dirpath, dirs, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(dirpath, src))
        os.makedirs(target, exist_ok=True)
        shutil.copystat(dirpath, target)
        for name in list(dirs):
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                dirs.remove(name)  # os.walk does not follow it; copy the link itself
                os.symlink(os.readlink(path), os.path.join(target, name))
            elif os.stat(path).st_dev != device:
                raise CannotStage(errno.EXDEV, f"{path} is a mount point", path)
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), os.path.join(target, name))
            else:
                link_or_copy(path, os.path.join(target, name))


class CannotStage(OSError):
    """A file to keep lies on another file system (a mount point inside the prefix): it cannot be
    linked into a staging folder, so the write must go in place."""


def _is_transient(name: str) -> bool:
    """Whether ``name`` is what a writer (of this folder, or of an entry inside it) uses only
    while it runs: a temporary file, a staging folder, a lock file, a version set aside."""
    return bool(
        _LEGACY_TMP.search(name)
        or name.endswith(".tdlock")
        or ".tdstage-" in name
        or ".tdprev-" in name
    )


def link_or_copy(src: str, dst: str) -> None:
    """Hard-link ``src`` to ``dst`` (the same inode: mappings stay coherent), or copy it where the
    file system has no hard links.

    Raises:
        CannotStage: ``src`` is on another file system than ``dst``.
    """
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as err:
        if err.errno == errno.EXDEV:
            raise CannotStage(err.errno, f"{src} is on another file system", src) from None
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        shutil.copy2(src, dst, follow_symlinks=False)


# ====================================================================== durability
def write_bytes(path: str, data: bytes) -> None:
    """Write a small file (a ``meta.json``, a pickle) under a temporary name, then rename it in."""
    tmp = f"{path}.tmp-{os.getpid()}-0"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def current_umask() -> int:
    """The process's umask (the mode bits new files lose)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: False inside :func:`scratch_writes`: nothing is flushed to stable storage
_DURABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("tensordict_durable", default=True)
#: files of one folder flushed at once: the file system commits them together
_FSYNC_THREADS = 8


@contextlib.contextmanager
def scratch_writes() -> Iterator[None]:
    """Writes made in this block (by this thread) skip ``fsync``: for a scratch folder removed
    right after, such as the folder an archive is packed from (the archive is flushed itself).

    Examples:
        >>> with scratch_writes():
        ...     fsync_path(".")  # (no flush)
    """
    token = _DURABLE.set(False)
    try:
        yield
    finally:
        _DURABLE.reset(token)


def durable() -> bool:
    """Whether writes made now are flushed (False inside :func:`scratch_writes`).

    Examples:
        >>> durable()
        True
        >>> with scratch_writes():
        ...     durable()
        False
    """
    return _DURABLE.get()


def fsync_path(path: str) -> None:
    """Flush a file or folder to stable storage (nothing inside :func:`scratch_writes`)."""
    if not durable():
        return
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if os.path.isdir(path) else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: str) -> None:
    """fsync every regular file and folder under ``root`` (folders after what they hold)."""
    if not durable():
        return
    with concurrent.futures.ThreadPoolExecutor(_FSYNC_THREADS) as pool:
        for dirpath, _dirs, files in os.walk(root, topdown=False):
            paths = [os.path.join(dirpath, name) for name in files]
            regular = [p for p in paths if stat.S_ISREG(os.lstat(p).st_mode)]
            # concurrent fsyncs of one folder's files share the file system's commits (a
            # folder of 512 leaves: ~2x faster than one after the other)
            list(pool.map(fsync_path, regular) if len(regular) > 1 else map(fsync_path, regular))
            fsync_path(dirpath)


def free_bytes(path: str) -> int:
    """Bytes an unprivileged user may still write on the file system of ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# ====================================================================== the switch
def exchange(a: str, b: str) -> None:
    """Swap the folders ``a`` and ``b`` in one atomic step (Linux ``renameat2``).

    Raises:
        OSError: the file system or the kernel cannot (``EINVAL``, ``ENOSYS``, ...).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", a)
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), a, None, b)


class Staging:
    """Where a write puts the new version (a staging folder beside the prefix, or the prefix
    itself when it cannot be staged), and how it is switched in.

    Attributes:
        root: the prefix as given (the paths of the plan are under it).
        real: the prefix with symlinks resolved (what is switched).
        target: the folder the new version is written to.
        in_place: True when ``target`` is ``real`` itself (see the module's fallbacks).
    """

    def __init__(self, root: str, real: str, in_place: bool = False) -> None:
        self.root = root
        self.real = real
        self.exists = os.path.isdir(real)
        self.target = real
        self.in_place = True
        if in_place or (
            self.exists and os.stat(real).st_dev != os.stat(os.path.dirname(real)).st_dev
        ):
            return  # asked for, or a mount point: it cannot be renamed
        stage = f"{_base(real)}.tdstage-{_token()}"
        try:
            os.mkdir(stage)
        except OSError as err:
            if err.errno not in _NOT_HERE or not self.exists:
                raise
            return
        self.target, self.in_place = stage, False
        if self.exists:
            _copy_owner_and_mode(real, stage)

    def path(self, final: str) -> str:
        """Where the file that will be ``final`` (a path under ``root``) is written now."""
        rel = os.path.relpath(final, self.root)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise ValueError(f"{final} is not under {self.root}")
        return self.target if rel == os.curdir else os.path.join(self.target, rel)

    def old(self, final: str) -> str:
        """Where ``final`` (a path under ``root``) is in the version being replaced."""
        rel = os.path.relpath(final, self.root)
        return self.real if rel == os.curdir else os.path.join(self.real, rel)

    def commit(self) -> None:
        """fsync the new version and switch it in (or, in place, just fsync it)."""
        fsync_tree(self.target)
        if self.in_place:
            return
        parent = os.path.dirname(self.real)
        if not self.exists:
            os.rename(self.target, self.real)
        else:
            try:
                exchange(self.target, self.real)
            except OSError as err:
                if err.errno not in _NO_EXCHANGE:
                    raise
                self._rename_aside()
        fsync_path(parent)

    def _rename_aside(self) -> None:
        aside = f"{_base(self.real)}.tdprev-{_token()}"
        os.rename(self.real, aside)
        os.rename(self.target, self.real)
        self.target = aside

    def finish(self) -> None:
        """Remove the previous version (after :meth:`commit`)."""
        if not self.in_place and self.exists:
            remove_tree(self.target)

    def abort(self) -> None:
        """Remove a staging folder after a failed write (the prefix was never touched)."""
        if not self.in_place:
            remove_tree(self.target)


def _copy_owner_and_mode(src: str, dst: str) -> None:
    st = os.stat(src)
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
        with contextlib.suppress(OSError):
            os.chown(dst, st.st_uid, st.st_gid)
