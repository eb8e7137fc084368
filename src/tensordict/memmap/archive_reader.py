"""Reading a memmap archive (``.tdz``): an index of its entries and one mapping of the file.

:class:`_ArchiveReader` (upstream's name, kept for code that patches it) parses the zip central
directory once and resolves where each entry's data starts (after its local header and padding).
Uncompressed leaves are then views into :attr:`_ArchiveReader.storage`, a single ``uint8``
mapping of the whole file; compressed leaves are inflated on demand by :meth:`read_bytes`, or all
at once in threads by :meth:`prefetch_compressed`.
"""

from __future__ import annotations

import os
import posixpath
import struct
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tensordict.errors import MemmapArchiveError, MemmapArchiveWriteError

__all__ = ["ArchiveEntry", "_ArchiveReader"]

_LOCAL_FIXED = 30  # bytes of a zip local file header before its name
_LOCAL_SIGNATURE = b"PK\x03\x04"


@dataclass(frozen=True)
class ArchiveEntry:
    """Where one file of the archive lies: its data ``offset`` in the archive, its ``size``
    once inflated, its zip ``compress_type`` and its ``compress_size`` in the archive."""

    offset: int
    size: int
    compress_type: int
    compress_size: int


class _ArchiveReader:
    """The entries of the archive at ``path`` and a lazily made mapping of the whole file.

    With ``writable=True`` the mapping is shared, so writes into the leaves reach the file (the
    checksums then need :func:`~tensordict.refresh_archive_checksums`); otherwise it is
    copy-on-write and the file never changes.

    Args:
        path: the archive.
        writable: map the file shared (for ``load_memmap(..., mode="r+")``).

    Raises:
        MemmapArchiveWriteError: ``writable`` and the file is not writable (a PermissionError).
        MemmapArchiveError: an encrypted entry, or a local header that is damaged or does not
            match the central directory.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> path = Path(tempfile.mkdtemp()) / "td.tdz"
        >>> _ = TensorDict(a=torch.arange(3)).save(path)
        >>> reader = _ArchiveReader(path)
        >>> sorted(reader.entries), sorted(reader.children[""])
        (['a.memmap', 'meta.json'], ['a.memmap', 'meta.json'])
        >>> e = reader.entries["a.memmap"]
        >>> reader.storage[e.offset : e.offset + e.size].view(torch.int64).tolist()
        [0, 1, 2]
        >>> reader.close()
    """

    def __init__(self, path: str | os.PathLike[str], *, writable: bool = False) -> None:
        self.path = Path(path)
        self.writable = writable
        if writable and not os.access(self.path, os.W_OK):
            raise MemmapArchiveWriteError(
                f"cannot open {self.path} with mode='r+': the file is not writable. Load it "
                "with mode='r', or change its permissions."
            )
        self._zf = zipfile.ZipFile(self.path)
        self.entries: dict[str, ArchiveEntry] = {}
        self.dirs: set[str] = {""}
        self.children: dict[str, set[str]] = {"": set()}
        self._storage: torch.Tensor | None = None
        self._decompressed: dict[str, bytes] = {}
        self._prefetch_request: tuple[str, int] | None = None
        with open(self.path, "rb") as f:
            for info in self._zf.infolist():
                self._index(f, info)

    def _index(self, f: Any, info: zipfile.ZipInfo) -> None:
        if info.flag_bits & 0x1:
            raise MemmapArchiveError(f"{self.path}: the entry {info.filename!r} is encrypted.")
        name = info.filename
        if name.endswith("/"):
            self._add_dir(name.rstrip("/"))
            return
        f.seek(info.header_offset)
        head = f.read(_LOCAL_FIXED)
        if len(head) < _LOCAL_FIXED or head[:4] != _LOCAL_SIGNATURE:
            raise MemmapArchiveError(
                f"{self.path}: the local header of {name!r} is damaged or truncated."
            )
        name_len, extra_len = struct.unpack("<2H", head[26:30])
        if f.read(name_len) != name.encode("utf-8" if info.flag_bits & 0x800 else "cp437"):
            raise MemmapArchiveError(
                f"{self.path}: the local header of {name!r} names another file; the archive "
                "is damaged."
            )
        offset = info.header_offset + _LOCAL_FIXED + name_len + extra_len
        self.entries[name] = ArchiveEntry(
            offset, info.file_size, info.compress_type, info.compress_size
        )
        parent = posixpath.dirname(name)
        self._add_dir(parent)
        self.children[parent].add(posixpath.basename(name))

    def _add_dir(self, name: str) -> None:
        while name not in self.dirs:
            self.dirs.add(name)
            self.children.setdefault(name, set())
            parent = posixpath.dirname(name)
            self.children.setdefault(parent, set()).add(posixpath.basename(name))
            name = parent

    @property
    def storage(self) -> torch.Tensor:
        """The whole archive as one ``uint8`` tensor (mapped on first use; pages are read when
        a leaf is touched)."""
        if self._storage is None:
            self._storage = torch.from_file(
                str(self.path),
                shared=self.writable,
                size=os.path.getsize(self.path),
                dtype=torch.uint8,
            )
        return self._storage

    def is_compressed(self, name: str) -> bool:
        """Whether the entry ``name`` is stored compressed (it cannot be a view of the file)."""
        return self.entries[name].compress_type != zipfile.ZIP_STORED

    def read_bytes(self, name: str) -> bytes:
        """The (inflated) bytes of the entry ``name``; checked against its CRC-32."""
        data = self._decompressed.pop(name, None)
        if data is not None:
            return data
        if self._prefetch_request is not None:
            self._run_scheduled_prefetch()
            data = self._decompressed.pop(name, None)
            if data is not None:
                return data
        return self._read(self._zf, name)

    def _read(self, zf: zipfile.ZipFile, name: str) -> bytes:
        try:
            return zf.read(name)
        except (zipfile.BadZipFile, EOFError, zlib.error) as err:
            raise MemmapArchiveError(
                f"{self.path}: the entry {name!r} is damaged or truncated ({err}). If you wrote "
                "into the archive in place, call refresh_archive_checksums first."
            ) from None

    def schedule_compressed_prefetch(self, scope: str, num_threads: int) -> None:
        """Ask :meth:`prefetch_compressed` to run when the first compressed leaf is read."""
        self._prefetch_request = (scope, num_threads)

    def _run_scheduled_prefetch(self) -> None:
        request, self._prefetch_request = self._prefetch_request, None
        if request is not None:
            self.prefetch_compressed(*request)

    def prefetch_compressed(self, scope: str, num_threads: int) -> None:
        """Inflate every compressed ``.memmap`` entry under the folder ``scope`` ("" for all)
        with ``num_threads`` threads; :meth:`read_bytes` then hands them out."""
        prefix = scope.strip("/") + "/" if scope.strip("/") else ""
        names = [
            n
            for n in self.entries
            if n.startswith(prefix)
            and n.endswith(".memmap")
            and self.is_compressed(n)
            and n not in self._decompressed
        ]
        if not names:
            return

        def inflate(name: str) -> tuple[str, bytes]:
            with zipfile.ZipFile(self.path) as zf:  # one handle per thread
                return name, self._read(zf, name)

        with ThreadPoolExecutor(max(1, num_threads)) as pool:
            self._decompressed.update(pool.map(inflate, names))

    def close(self) -> None:
        """Close the zip handle (the mapping stays valid for the leaves that view it)."""
        self._zf.close()

    def __enter__(self) -> _ArchiveReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
