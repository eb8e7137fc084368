"""Single-file memory-mapped archives (``.tdz``), in upstream tensordict 0.15's format.

An archive is a plain zip file holding the files of a memory-mapped directory (``meta.json`` at
the top level). Tensor payloads are stored uncompressed by default, and every entry's data starts
at a multiple of :data:`ALIGNMENT` bytes: the local header carries a padding extra field (id
:data:`PAD_EXTRA_ID`), so ``unzip``, :mod:`zipfile` and upstream all read it.

Writing is atomic: the archive is written under a temporary name next to its target, flushed and
renamed in, so a failed or interrupted write leaves the old file (or none); a full disk raises
:class:`~tensordict.errors.NoSpaceError` naming the archive. Packing a directory holds its
writers' lock (:func:`~tensordict.memmap.transaction.prefix_lock`), so that an archive is always
one complete version, never a mix of a version and the one a concurrent writer switches in.

Reading checks, before anything is extracted: every entry name (no absolute path, no ``..``, no
two entries naming the same file), the number of entries (:data:`MAX_ENTRIES`), the size of
each ``meta.json`` (at most :data:`~tensordict.memmap.format.MAX_META_BYTES`), the free space,
and that no folder or file on the way is a symbolic link (extraction never writes through a
link). Loading with ``mode="r"`` checks the CRC-32 of every uncompressed leaf (compressed ones
are checked as they are inflated); a damaged or truncated archive raises
:class:`~tensordict.errors.MemmapArchiveError` naming the file and the entry. Loading with
``mode="r+"`` (writes go into the archive, and leave its checksums stale) marks the archive in
its zip comment (:data:`STALE_MARK`); loads of a marked archive skip the check until
:func:`refresh_archive_checksums` recomputes the checksums and removes the mark.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import shutil
import stat
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.lazy.views import _SubTensorDict
from tensordict.errors import MemmapArchiveError, MemmapArchiveWriteError, NoSpaceError
from tensordict.memmap import format as fmt
from tensordict.memmap import transaction as tx
from tensordict.memmap.archive_reader import _ArchiveReader
from tensordict.memmap.nested import flat_buffer, loaded_nested, nested_sizes

__all__ = [
    "ALIGNMENT",
    "ARCHIVE_SUFFIX",
    "is_archive_target",
    "is_memmap_archive",
    "load_archive",
    "pack_memmap",
    "refresh_archive_checksums",
    "unpack_memmap",
]

#: the suffix that makes ``save`` / ``memmap`` write an archive instead of a directory
ARCHIVE_SUFFIX = ".tdz"
#: the alignment of every entry's data in the archive (bytes)
ALIGNMENT = 64
#: the id of the zip extra field that pads local headers up to :data:`ALIGNMENT`
PAD_EXTRA_ID = 0x6474
#: the most entries an archive may hold before it is refused (as a directory's file count)
MAX_ENTRIES = 1 << 20
#: the zip comment of an archive loaded with ``mode="r+"``: its checksums may be stale
STALE_MARK = b"tensordict: written in place; checksums stale until refresh_archive_checksums"
_LOCAL_FIXED = 30  # bytes of a zip local file header before its name
_ZIP64_LOCAL_EXTRA = 20  # the zip64 extra field zipfile adds to a local header
_CENTRAL_FIXED = 46
_CHUNK = 8 << 20
#: where ZipInfo keeps the compression level (renamed in Python 3.13)
_LEVEL_ATTR = "compress_level" if hasattr(zipfile.ZipInfo, "compress_level") else "_compresslevel"
_COMPRESSION = {
    "stored": zipfile.ZIP_STORED,
    "deflate": zipfile.ZIP_DEFLATED,
    "deflated": zipfile.ZIP_DEFLATED,
    "bzip2": zipfile.ZIP_BZIP2,
    "lzma": zipfile.ZIP_LZMA,
}


def _compression(value: str | int | None) -> int:
    if value is None:
        return zipfile.ZIP_STORED
    if isinstance(value, str) and value.lower() in _COMPRESSION:
        return _COMPRESSION[value.lower()]
    if isinstance(value, int) and value in _COMPRESSION.values():
        return value
    raise ValueError(
        f"compression must be one of {sorted(_COMPRESSION)} or a zipfile constant "
        f"(ZIP_STORED, ZIP_DEFLATED, ZIP_BZIP2, ZIP_LZMA), got {value!r}."
    )


def is_archive_target(prefix: Any, archive: bool | None = None) -> bool:
    """Whether ``save`` / ``memmap`` to ``prefix`` writes an archive (``archive`` forces it)."""
    if archive is not None:
        return bool(archive)
    return prefix is not None and os.fspath(prefix).endswith(ARCHIVE_SUFFIX)


def is_memmap_archive(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a memory-mapped tensordict archive.

    An archive is a zip file with a top-level ``meta.json`` entry, as :func:`pack_memmap` or
    ``td.save("x.tdz")`` write it. A directory, a missing path or any other file gives False.

    Args:
        path: the path to check.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = TensorDict(a=torch.zeros(2)).save(d / "td.tdz")
        >>> is_memmap_archive(d / "td.tdz"), is_memmap_archive(d)
        (True, False)
    """
    try:
        if not os.path.isfile(path):
            return False
        with zipfile.ZipFile(path) as zf:
            return any(info.filename == fmt.META for info in zf.infolist())
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False


def _files(prefix: str) -> Iterator[tuple[str, str]]:
    """(path, archive name) of each regular file under ``prefix``, ``meta.json`` first."""
    found: list[tuple[str, str]] = []
    for dirpath, dirs, files in os.walk(prefix):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            if os.path.isfile(path) and not name.startswith(".") and ".tmp" not in name:
                rel = os.path.relpath(path, prefix).replace(os.sep, "/")
                found.append((path, rel))
    found.sort(key=lambda item: (item[1] != fmt.META, item[1].count("/"), item[1]))
    return iter(found)


def _pad_extra(offset: int, name: bytes, zip64: bool) -> bytes:
    """The padding extra field that puts an entry's data at a multiple of :data:`ALIGNMENT`."""
    start = offset + _LOCAL_FIXED + len(name) + 4 + (_ZIP64_LOCAL_EXTRA if zip64 else 0)
    pad = -start % ALIGNMENT
    return struct.pack("<HH", PAD_EXTRA_ID, pad) + b"\0" * pad


def _add(zf: zipfile.ZipFile, path: str, name: str, method: int, level: int | None) -> None:
    size = os.path.getsize(path)
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = method if name.endswith(".memmap") else zipfile.ZIP_STORED
    if info.compress_type != zipfile.ZIP_STORED:
        setattr(info, _LEVEL_ATTR, level)
    info.external_attr = 0o644 << 16
    info.file_size = size
    zip64 = size * 1.05 > zipfile.ZIP64_LIMIT
    assert zf.fp is not None
    info.extra = _pad_extra(zf.fp.tell(), name.encode("utf-8"), zip64)
    with open(path, "rb") as src, zf.open(info, "w", force_zip64=zip64) as dst:
        shutil.copyfileobj(src, dst, _CHUNK)


def _check_target(prefix: str, archive: str) -> None:
    real_prefix, real_archive = os.path.realpath(prefix), os.path.realpath(archive)
    if real_archive == real_prefix or real_archive.startswith(real_prefix + os.sep):
        raise MemmapArchiveError(
            f"the archive {archive} would be written inside the directory it packs ({prefix}): "
            "choose an archive path outside it."
        )
    if os.path.isdir(real_archive):
        raise MemmapArchiveError(
            f"{archive} is a directory: pass the path of the archive file to write."
        )


def pack_memmap(
    prefix: str | os.PathLike[str],
    archive_path: str | os.PathLike[str],
    *,
    compression: str | int | None = None,
    compresslevel: int | None = None,
) -> Path:
    """Pack a memory-mapped tensordict directory into a single-file zip archive.

    The entries are the files of the directory (:func:`unpack_memmap` or ``unzip`` give it back),
    each one's data aligned to 64 bytes. The archive is written under a temporary name and
    renamed in: an interrupted pack leaves the previous file, if any, untouched.

    Args:
        prefix: a directory written by ``memmap`` / ``save``.
        archive_path: the archive to create (outside ``prefix``); an existing file is replaced.
        compression: ``"stored"`` (default), ``"deflate"``, ``"bzip2"``, ``"lzma"`` or a
            :mod:`zipfile` constant, for the tensor payloads. Compressed leaves are read into
            memory when loaded.
        compresslevel: the level passed to :mod:`zipfile` (None: the method's default).

    Returns:
        The path of the archive.

    Raises:
        MemmapArchiveError: ``prefix`` has no ``meta.json``, or the archive would be inside it.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = TensorDict(a=torch.arange(3)).memmap(d / "saved")
        >>> pack_memmap(d / "saved", d / "saved.tdz").name
        'saved.tdz'
    """
    method = _compression(compression)
    src, dst = os.path.abspath(os.fspath(prefix)), os.path.abspath(os.fspath(archive_path))
    if not os.path.isfile(os.path.join(src, fmt.META)):
        raise MemmapArchiveError(
            f"{src} has no {fmt.META}: it is not a memory-mapped tensordict directory "
            "(write one with td.memmap(prefix) or td.save(prefix) first)."
        )
    _check_target(src, dst)

    def fill(zf: zipfile.ZipFile) -> None:
        for path, name in _files(src):
            _add(zf, path, name, method, compresslevel)

    with _writers_excluded(src):  # one complete version: no writer switches one in meanwhile
        _atomic_zip(dst, fill)
    return Path(dst)


@contextlib.contextmanager
def _writers_excluded(src: str) -> Iterator[None]:
    """Hold the write lock of the saved tensordict ``src`` (writers of it wait); where the lock
    file cannot be created (a read-only file system), no writer of this library can write
    either, and nothing is held."""
    try:
        lock = tx.prefix_lock(os.path.realpath(src))
        lock.__enter__()
    except OSError as err:
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        yield
        return
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


def _atomic_zip(dst: str, fill: Any) -> None:
    """Write a zip at ``dst`` through a temporary file in the same folder, renamed in."""
    folder = os.path.dirname(os.path.realpath(dst))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(dst)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w+b") as f:
            with zipfile.ZipFile(f, "w", allowZip64=True) as zf:
                fill(zf)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~tx.current_umask())
        os.replace(tmp, os.path.realpath(dst))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        tx.fsync_path(folder)


def _open(path: str) -> zipfile.ZipFile:
    """Open an archive for reading, or raise a clear error for anything else."""
    if not os.path.isfile(path):
        raise MemmapArchiveError(f"{path} is not a file: it is not a memory-mapped archive.")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, ValueError) as err:
        raise MemmapArchiveError(
            f"{path} is a file but not a memory-mapped tensordict archive: it is not a readable "
            f"zip file ({err}), so it is damaged, truncated or was not written by pack_memmap / "
            "save('x.tdz')."
        ) from None
    infos = zf.infolist()
    if not any(i.filename == fmt.META for i in infos):
        zf.close()
        raise MemmapArchiveError(
            f"{path} has no top-level {fmt.META} entry: it is a zip file but not a memory-mapped "
            "tensordict archive."
        )
    if len(infos) > MAX_ENTRIES:
        zf.close()
        raise MemmapArchiveError(
            f"{path} holds {len(infos)} entries, more than the {MAX_ENTRIES} a load accepts."
        )
    return zf


def _safe_name(archive: str, name: str) -> str:
    norm = posixpath.normpath(name)
    if name.startswith("/") or "\\" in name or norm == ".." or norm.startswith("../"):
        raise MemmapArchiveError(
            f"{archive}: the entry {name!r} would be extracted outside the target directory; "
            "refusing the archive."
        )
    return norm


def _checked_names(archive: str, infos: list[zipfile.ZipInfo]) -> list[str]:
    """The safe name of each entry; raise for a name outside the target, two entries naming
    the same file, or a ``meta.json`` larger than a load reads (checked before extracting)."""
    names = [_safe_name(archive, i.filename) for i in infos]
    seen: dict[str, str] = {}
    for info, name in zip(infos, names, strict=True):
        if name in seen:
            raise MemmapArchiveError(
                f"{archive}: the entries {seen[name]!r} and {info.filename!r} both name the file "
                f"{name!r}; one would silently replace the other. Refusing the archive."
            )
        seen[name] = info.filename
        if posixpath.basename(name) == fmt.META and info.file_size > fmt.MAX_META_BYTES:
            raise MemmapArchiveError(
                f"{archive}: the entry {info.filename!r} expands to {info.file_size} bytes, more "
                f"than the {fmt.MAX_META_BYTES} bytes of metadata a load reads; it is not "
                "metadata written by tensordict. Nothing was extracted."
            )
    return names


def _check_no_links(archive: str, target: str, names: list[str]) -> None:
    """Raise if a folder or file an entry would be written to is a symbolic link (extracting
    would write wherever it leads)."""
    checked: set[str] = set()
    for name in names:
        parts = name.split("/")
        for depth in range(1, len(parts) + 1):
            rel = "/".join(parts[:depth])
            if rel in checked:
                continue
            checked.add(rel)
            try:
                mode = os.lstat(os.path.join(target, *parts[:depth])).st_mode
            except FileNotFoundError:
                break  # created by the extraction itself
            if stat.S_ISLNK(mode):
                raise MemmapArchiveError(
                    f"{archive}: extracting {name!r} into {target} would write through the "
                    f"symbolic link {os.path.join(target, *parts[:depth])}, to a file outside "
                    "the target. Remove the link, or unpack into an empty folder. Nothing was "
                    "extracted."
                )


def _extract(
    zf: zipfile.ZipFile, archive: str, target: str, sparse: set[str] | frozenset[str] = frozenset()
) -> None:
    """Extract every entry of ``zf`` into ``target`` (checked: names, space, CRC); the entries
    named in ``sparse`` become empty files of their size (their data is mapped from the
    archive instead)."""
    infos = [i for i in zf.infolist() if not i.is_dir()]
    names = _checked_names(archive, infos)
    need = sum(i.file_size for i, n in zip(infos, names, strict=True) if n not in sparse)
    os.makedirs(target, exist_ok=True)
    _check_no_links(archive, target, names)
    if need > tx.free_bytes(target):
        raise MemmapArchiveError(
            f"{archive} expands to {need} bytes, more than the free space under {target}."
        )
    for info, name in zip(infos, names, strict=True):
        dest = os.path.join(target, *name.split("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if name in sparse:
            with _create(dest) as out:
                out.truncate(info.file_size)
            continue
        try:
            with zf.open(info) as src, _create(dest) as out:
                shutil.copyfileobj(src, out, _CHUNK)
        except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as err:
            with contextlib.suppress(OSError):
                os.unlink(dest)
            if isinstance(err, OSError) and err.errno is not None:
                raise  # a write error of the target (no space, permissions): as it is
            raise MemmapArchiveError(
                f"{archive}: the entry {info.filename!r} is damaged or truncated ({err}). If "
                "you wrote into the archive in place, call refresh_archive_checksums first."
            ) from None


def _create(path: str) -> Any:
    """Open ``path`` for writing, never through a symbolic link (one planted since the check
    raises ELOOP)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    return os.fdopen(fd, "wb")


def unpack_memmap(archive_path: str | os.PathLike[str], prefix: str | os.PathLike[str]) -> Path:
    """Extract a memory-mapped tensordict archive into a directory (the inverse of
    :func:`pack_memmap`). Existing files in ``prefix`` are overwritten.

    Args:
        archive_path: an archive written by :func:`pack_memmap` or ``save("x.tdz")``.
        prefix: the directory to extract into (created if missing).

    Returns:
        The path of the directory.

    Raises:
        MemmapArchiveError: not an archive, or a damaged one (a CRC mismatch, a truncated file),
            or a hostile one (two entries naming one file, an oversized ``meta.json``), or a
            symbolic link in ``prefix`` that an entry would be written through (nothing is
            extracted then).

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = TensorDict(a=torch.arange(3)).save(d / "td.tdz")
        >>> sorted(p.name for p in unpack_memmap(d / "td.tdz", d / "td").iterdir())
        ['a.memmap', 'meta.json']
    """
    archive, target = os.path.abspath(os.fspath(archive_path)), os.path.abspath(os.fspath(prefix))
    with _open(archive) as zf:
        _extract(zf, archive, target)
    return Path(target)


def load_archive(
    path: str,
    load_dir: Any,
    *,
    mode: str = "r",
    subpath: Any = None,
    num_threads: int = 0,
    materialize: bool = True,
    **kwargs: Any,
) -> Any:
    """Load the tensordict an archive holds, with ``load_dir(directory, **kwargs)``.

    The metadata files are extracted to a private temporary directory (removed before
    returning) and loaded; each uncompressed leaf whose data offset suits its dtype becomes a
    view into one mapping of the archive: copy-on-write with ``mode="r"`` (the file never
    changes), shared with ``mode="r+"`` (writes reach the archive; its checksums then need
    :func:`refresh_archive_checksums`). Compressed leaves are inflated into memory (in
    ``num_threads`` threads when > 0), which ``mode="r+"`` refuses; misaligned ones are copied.
    With ``materialize=False`` (a load to the meta device) no leaf data is read at all.
    """
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+' for a memmap archive, got {mode!r}.")
    writable = mode == "r+"
    with _open(path) as zf, _reader(path, writable) as reader:
        leaves = _leaf_entries(reader, path, writable)
        with tempfile.TemporaryDirectory(prefix="tdz-") as tmp:
            # the element sizes of nested tensors are read while loading: extract them for real
            _extract(zf, path, tmp, sparse={n for n in leaves if not n.endswith(".shape.memmap")})
            loaded = load_dir(tmp, subpath=subpath, **kwargs)
            if not materialize:
                return loaded
            if writable:  # in-place writes make its checksums stale: say so in the archive
                _set_comment(path, STALE_MARK)
            elif zf.comment != STALE_MARK:
                _check_stored_crcs(zf, reader, path, leaves)
            if writable:
                _refuse_nested(loaded, path)
            if num_threads > 0:
                reader.schedule_compressed_prefetch("", num_threads)
            return _remap_tree(loaded, lambda t: _remap(t, tmp, leaves, reader))


def _remap_tree(node: Any, remap: Any) -> Any:
    """``node`` with every leaf remapped; a sub-tensordict's source is remapped whole."""
    if isinstance(node, _SubTensorDict):
        return _SubTensorDict(_remap_tree(node._source, remap), node.idx)
    return node.apply(remap, call_on_nested=False)


@contextlib.contextmanager
def _reader(path: str, writable: bool) -> Iterator[_ArchiveReader]:
    try:
        reader = _ArchiveReader(path, writable=writable)
    except (zipfile.BadZipFile, EOFError, ValueError) as err:
        raise MemmapArchiveError(f"{path} is damaged or truncated ({err}).") from None
    with reader:
        yield reader


def _check_stored_crcs(
    zf: zipfile.ZipFile, reader: _ArchiveReader, path: str, leaves: dict[str, str]
) -> None:
    """Raise if an uncompressed leaf's bytes do not match the CRC-32 its entry records (they
    are mapped, not extracted, so zipfile never checks them)."""
    names = [n for n in leaves.values() if not reader.is_compressed(n)]
    if not names:
        return
    data = memoryview(reader.storage.numpy())  # type: ignore[arg-type]
    for name in names:
        entry, info = reader.entries[name], zf.getinfo(name)
        crc = 0
        for start in range(entry.offset, entry.offset + entry.size, _CHUNK):
            crc = zlib.crc32(data[start : min(start + _CHUNK, entry.offset + entry.size)], crc)
        if crc != info.CRC:
            raise MemmapArchiveError(
                f"{path}: the entry {name!r} is damaged: its bytes do not match the CRC-32 the "
                "archive records. If you wrote into the archive in place (mode='r+'), call "
                "refresh_archive_checksums first; otherwise restore it from a copy."
            )


def _set_comment(path: str, comment: bytes) -> None:
    """Set the archive's zip comment (only its end record is rewritten)."""
    with zipfile.ZipFile(path) as zf:
        if zf.comment == comment:
            return
    with zipfile.ZipFile(path, "a") as zf:
        zf.comment = comment


def _leaf_entries(reader: _ArchiveReader, path: str, writable: bool) -> dict[str, str]:
    """Each ``.memmap`` entry's checked name -> its name in the archive."""
    leaves: dict[str, str] = {}
    for name in reader.entries:
        if not name.endswith(".memmap"):
            continue
        if writable and reader.is_compressed(name):
            raise MemmapArchiveWriteError(
                f"{path}: the entry {name!r} is compressed, so it cannot be written in place "
                "(mode='r+'); load it with mode='r', or unpack it."
            )
        leaves[_safe_name(path, name)] = name
    return leaves


def _remap(t: torch.Tensor, tmp: str, leaves: dict[str, str], reader: _ArchiveReader) -> Any:
    """The leaf ``t`` (loaded from the temporary folder) as a view into the archive's mapping,
    or read into memory when its entry is compressed or misaligned."""
    if isinstance(t, torch.Tensor) and t.is_nested:
        flat = flat_buffer(t)
        if flat is None:
            return t
        return loaded_nested(_remap(flat, tmp, leaves, reader), nested_sizes(t))
    filename = getattr(t, "filename", None)
    rel = os.path.relpath(filename, tmp).replace(os.sep, "/") if filename else None
    name = leaves.get(rel) if rel is not None else None
    plain = t.as_subclass(torch.Tensor) if isinstance(t, torch.Tensor) else t
    if name is None:
        if reader.writable and filename:
            raise MemmapArchiveWriteError(f"{rel} cannot be written in place (mode='r+').")
        return plain.clone() if filename else plain
    entry = reader.entries[name]
    nbytes = t.numel() * t.element_size()
    if nbytes > entry.size:
        raise MemmapArchiveError(
            f"the entry {rel!r} holds {entry.size} bytes, {nbytes} are needed."
        )
    if reader.is_compressed(name):
        data = torch.frombuffer(bytearray(reader.read_bytes(name)), dtype=torch.uint8)
    else:
        data = reader.storage[entry.offset : entry.offset + entry.size]
        if entry.offset % t.element_size():
            if reader.writable:
                raise MemmapArchiveWriteError(
                    f"the entry {rel!r} is not aligned to its dtype ({t.dtype}) in the archive, "
                    "so it cannot be mapped for writing (mode='r+'); repack it with pack_memmap."
                )
            data = data.clone()  # a copy, aligned by the allocator
    return data[:nbytes].view(t.dtype).view(t.shape)


def _refuse_nested(loaded: Any, path: str) -> None:
    for t in loaded.values(True, True, is_leaf=leaf_or_non_tensor):
        if isinstance(t, torch.Tensor) and t.is_nested:
            raise MemmapArchiveWriteError(
                f"{path} holds a nested tensor, which cannot be written in place "
                "(mode='r+'); load it with mode='r'."
            )


def refresh_archive_checksums(archive_path: str | os.PathLike[str]) -> Path:
    """Recompute the CRC-32 checksums of an archive's uncompressed entries, in place.

    Writes into a loaded archive do not update the checksums the zip format stores; call this
    before handing the archive to a tool that checks them (``unzip``, :mod:`zipfile`,
    :func:`unpack_memmap`). Loads check them again afterwards (an archive loaded with
    ``mode="r+"`` is not checked until then).

    Args:
        archive_path: the archive to update.

    Returns:
        The path of the archive.

    Raises:
        MemmapArchiveError: not an archive, or a damaged one.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = TensorDict(a=torch.zeros(3)).save(d / "td.tdz")
        >>> refresh_archive_checksums(d / "td.tdz").name
        'td.tdz'
    """
    archive = os.path.abspath(os.fspath(archive_path))
    with _open(archive) as zf:
        infos = zf.infolist()
        start = zf.start_dir  # type: ignore[attr-defined]
    with open(archive, "r+b") as f:
        crcs: dict[int, int] = {}
        for info in infos:
            if info.compress_type == zipfile.ZIP_STORED and not info.is_dir():
                crcs[info.header_offset] = _patch_local(f, archive, info)
        _patch_central(f, archive, start, len(infos), crcs)
        f.flush()
        os.fsync(f.fileno())
    _set_comment(archive, b"")  # checked again at load
    return Path(archive)


def _patch_local(f: Any, archive: str, info: zipfile.ZipInfo) -> int:
    f.seek(info.header_offset)
    head = f.read(_LOCAL_FIXED)
    if len(head) < _LOCAL_FIXED or head[:4] != b"PK\x03\x04":
        raise MemmapArchiveError(f"{archive}: the local header of {info.filename!r} is damaged.")
    name_len, extra_len = struct.unpack("<2H", head[26:30])
    f.seek(info.header_offset + _LOCAL_FIXED + name_len + extra_len)
    crc, left = 0, info.compress_size
    while left:
        chunk = f.read(min(left, _CHUNK))
        if not chunk:
            raise MemmapArchiveError(f"{archive}: the entry {info.filename!r} is truncated.")
        crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    f.seek(info.header_offset + 14)
    f.write(struct.pack("<I", crc))
    return crc


def _patch_central(f: Any, archive: str, start: int, count: int, crcs: dict[int, int]) -> None:
    pos = start
    for _ in range(count):
        f.seek(pos)
        head = f.read(_CENTRAL_FIXED)
        if len(head) < _CENTRAL_FIXED or head[:4] != b"PK\x01\x02":
            raise MemmapArchiveError(f"{archive}: its central directory is damaged.")
        n, m, k = struct.unpack("<3H", head[28:34])
        offset = struct.unpack("<I", head[42:46])[0]
        if offset == 0xFFFFFFFF:
            f.seek(pos + _CENTRAL_FIXED + n)
            offset = _zip64_offset(f.read(m), head)
        if offset in crcs:
            f.seek(pos + 16)
            f.write(struct.pack("<I", crcs[offset]))
        pos += _CENTRAL_FIXED + n + m + k


def _zip64_offset(extra: bytes, head: bytes) -> int:
    """The local header offset stored in a central record's zip64 extra field."""
    csize, usize = struct.unpack("<2I", head[20:28])
    i = 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack("<2H", extra[i : i + 4])
        if tag == 1:
            fields = extra[i + 4 : i + 4 + size]
            skip = 8 * ((usize == 0xFFFFFFFF) + (csize == 0xFFFFFFFF))
            return int(struct.unpack("<Q", fields[skip : skip + 8])[0])
        i += 4 + size
    return -1


def write_archive(td: Any, path: Any, writer: Any, **kwargs: Any) -> None:
    """Write ``td`` as an archive at ``path``: ``writer(td, directory)`` fills a temporary
    directory next to the archive, which is packed (atomically) and removed."""
    dst = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(dst)
    os.makedirs(folder, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.", suffix=".dir", dir=folder)
    try:
        with tx.scratch_writes():  # (the folder is removed after packing; the archive is flushed)
            writer(td, os.path.join(tmp, "td"))
        pack_memmap(os.path.join(tmp, "td"), dst, **kwargs)
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        raise NoSpaceError(
            errno.ENOSPC,
            f"no space left to write the archive {dst} (it is written as a folder beside it, "
            f"then packed: both need room at once; {err.strerror or err}). Nothing was "
            "changed: a previous archive there is kept. Free space on that file system",
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
