"""The on-disk layout of memory-mapped tensordicts (compatible with upstream tensordict both ways).

A saved tensordict is a directory::

    prefix/meta.json            what the directory holds (below)
    prefix/<key>.memmap         one raw, C-contiguous, native-endian file per tensor (no header)
    prefix/<key>/               a nested tensordict, lazy stack, tensorclass or non-tensor entry

``meta.json`` of a TensorDict lists, in key order, ``{"device", "shape", "dtype", "is_nested"}`` for
each tensor and ``{"type": "<ClassName>"}`` for each nested entry, then the tensordict's own
``"shape"`` (batch size), ``"device"``, ``"_type"`` (upstream's class string), ``"_format_version"``
and ``"_class"``. JSON is compact and UTF-8, like upstream's. Directories written before
``_format_version``/``_class`` existed load too: dispatch falls back to ``_type``.

Keys are encoded for the file system: ``/ < > : " | ? * \\``, NUL, ``%`` and control characters
become ``%XX``; ``.`` and ``..`` are escaped; the empty key is ``%``. Loading also accepts
upstream's older spellings (spaces escaped, or raw names that are a single safe path component).

Writes are crash-safe: every ``meta.json`` is written to a temporary name and renamed into place,
after the data files of its directory and of every directory below it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import threading
from typing import Any

import torch

from tensordict.errors import IncompleteMemmapError, MemmapFormatError, UnsafeKeyError

__all__ = [
    "CLASS_LAZY",
    "CLASS_TD",
    "FORMAT_VERSION",
    "TYPE_LAZY",
    "TYPE_NON_TENSOR",
    "TYPE_METADATA",
    "TYPE_NON_TENSOR_STACK",
    "TYPE_TD",
    "encode_key",
    "entry_path",
    "find_entry",
    "leaf_entry",
    "read_meta",
    "register_class",
    "resolve_class",
    "write_meta",
]

FORMAT_VERSION = 1
TYPE_TD = "<class 'tensordict._td.TensorDict'>"
TYPE_LAZY = "<class 'tensordict._lazy.LazyStackedTensorDict'>"
TYPE_NON_TENSOR = "<class 'tensordict.tensorclass.NonTensorData'>"
TYPE_NON_TENSOR_STACK = "<class 'tensordict.tensorclass.NonTensorStack'>"
TYPE_METADATA = "<class 'tensordict.tensorclass.MetaData'>"
CLASS_TD = "tensordict:TensorDict"
CLASS_LAZY = "tensordict:LazyStackedTensorDict"
META = "meta.json"
#: keys of a TensorDict meta.json that describe the tensordict itself, not an entry
RESERVED = ("shape", "device", "_type", "_format_version", "_class")

_ESCAPED = frozenset('/<>:"|?*\\%') | {chr(i) for i in range(32)} | {chr(127)}
_ESCAPED_WITH_SPACE = _ESCAPED | {" "}


def encode_key(key: str, escape_space: bool = False) -> str:
    """The file-system name of a key.

    Examples:
        >>> encode_key("a/b%c")
        'a%2Fb%25c'
        >>> encode_key(".."), encode_key("")
        ('%2E%2E', '%')
    """
    if key == "":
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    chars = _ESCAPED_WITH_SPACE if escape_space else _ESCAPED
    return "".join(f"%{ord(c):02X}" if c in chars else c for c in key)


def _safe_raw(key: str) -> bool:
    return (
        bool(key)
        and key not in (".", "..")
        and "/" not in key
        and "\\" not in key
        and "\0" not in key
    )


def entry_path(prefix: str, key: str, suffix: str = "") -> str:
    """Where an entry is written: ``prefix/<encoded key><suffix>``."""
    return os.path.join(prefix, encode_key(key) + suffix)


def _inside(prefix: str, path: str) -> bool:
    root = os.path.realpath(prefix)
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def check_write_inside(root: str, path: str) -> None:
    """Refuse to write ``path`` if a symlinked folder on the way leads outside ``root``.

    (A symlinked *file* is harmless: files are written under a temporary name and renamed over
    it, which replaces the link, never its target.)

    Raises:
        UnsafeKeyError: the folder of ``path`` resolves outside ``root``.
    """
    folder = os.path.dirname(path)
    if not _inside(root, folder):
        raise UnsafeKeyError(
            f"refusing to write {path}: its folder resolves to {os.path.realpath(folder)}, outside "
            f"{root} (a symlink on the way). Remove the link or choose another prefix."
        )


def _traversal(key: str) -> bool:
    parts = key.replace("\\", "/").split("/")
    return os.path.isabs(key) or ".." in parts or "\0" in key


def find_entry(prefix: str, key: str, suffix: str = "") -> str | None:
    """The existing path of an entry, trying every spelling upstream versions used.

    Raw (unencoded) names are only tried when they are a single safe path component.

    Raises:
        UnsafeKeyError: the key names a path outside ``prefix`` (``..``, an absolute path), or the
            entry resolves outside it (a symlink).
    """
    names = [encode_key(key) + suffix, encode_key(key, escape_space=True) + suffix]
    if _safe_raw(key):
        names.append(key + suffix)
    for name in dict.fromkeys(names):
        path = os.path.join(prefix, name)
        if os.path.lexists(path):
            if not _inside(prefix, path):
                raise UnsafeKeyError(
                    f"entry {key!r} of {os.path.join(prefix, META)} resolves to "
                    f"{os.path.realpath(path)}, outside the directory. Refusing to read it."
                )
            return path
    if _traversal(key):
        raise UnsafeKeyError(
            f"key {key!r} in {os.path.join(prefix, META)} names a path outside the directory. "
            "Refusing to load it: the metadata is corrupt or hostile."
        )
    return None


def leaf_entry(t: torch.Tensor, device: Any = None) -> dict[str, Any]:
    """The ``meta.json`` entry of a tensor leaf."""
    return {
        "device": str(device if device is not None else t.device),
        "shape": list(t.shape),
        "dtype": str(t.dtype),
        "is_nested": False,
    }


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as upstream writes it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def is_jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return not (
            isinstance(value, float) and (value != value or value in (float("inf"), float("-inf")))
        )
    if isinstance(value, (list, tuple)):
        return all(is_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_jsonable(v) for k, v in value.items())
    return False


def write_meta(directory: str, meta: dict[str, Any]) -> None:
    """Write ``directory/meta.json`` atomically (temporary file, fsync-free rename)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, META)
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        with open(tmp, "wb") as f:
            f.write(dumps(meta))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def invalidate(directories: list[str]) -> None:
    """Remove the ``meta.json`` of each directory (in order) before rewriting it, so that an
    interrupted rewrite never loads as complete data. Nothing else is touched: other folders
    under the prefix (unrelated data) keep their metadata."""
    for directory in directories:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(os.path.join(directory, META))


def remove(path: str) -> None:
    """Remove a file, a symlink (never its target) or a folder left by an earlier save."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def read_meta(directory: str) -> dict[str, Any]:
    """Read and parse ``directory/meta.json``.

    Raises:
        IncompleteMemmapError: no ``meta.json`` (not a saved tensordict, or an interrupted write).
        MemmapFormatError: the file is not valid JSON or not a JSON object.
    """
    path = os.path.join(directory, META)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        what = "does not exist" if not os.path.isdir(directory) else "has no meta.json"
        raise IncompleteMemmapError(
            f"{directory} {what}: it is not a saved tensordict, or writing it was interrupted "
            f"(meta.json is written last). Missing: {path}."
        ) from None
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise MemmapFormatError(f"{path} is not valid JSON: {err}.") from None
    if not isinstance(meta, dict):
        raise MemmapFormatError(f"{path} must hold a JSON object, got {type(meta).__name__}.")
    return meta


# ---------------------------------------------------------------------- classes by name
_REGISTRY: dict[str, type] = {}


def type_string(cls: type) -> str:
    """Upstream's ``_type`` string of a user class: ``<class 'module.QualName'>``."""
    return f"<class '{cls.__module__}.{cls.__qualname__}'>"


def register_class(cls: type) -> None:
    """Make a tensorclass loadable by its ``_type`` string (done by the decorator)."""
    _REGISTRY[type_string(cls)] = cls


def resolve_class(type_str: str, meta_path: str) -> type:
    """The class a saved ``_type`` names: registered, or already imported (never imported here).

    Raises:
        MemmapFormatError: the class is unknown in this process.
    """
    cls = _REGISTRY.get(type_str)
    if cls is not None:
        return cls
    inner = type_str.removeprefix("<class '").removesuffix("'>")
    module_name, _, qualname = inner.rpartition(".")
    while module_name:
        module = sys.modules.get(module_name)
        if module is not None:
            obj: Any = module
            for part in qualname.split("."):
                obj = getattr(obj, part, None)
            if isinstance(obj, type):
                return obj
            break
        module_name, _, head = module_name.rpartition(".")
        qualname = f"{head}.{qualname}"
    raise MemmapFormatError(
        f"{meta_path} holds a {type_str}, which is not defined in this process. Import the module "
        "that defines this tensorclass before loading (classes are never imported from metadata)."
    )


def is_writable(file_path: str | os.PathLike[str]) -> bool:
    """Whether this process may write ``file_path`` (a missing file counts as writable).

    Examples:
        >>> import tempfile
        >>> is_writable(os.path.join(tempfile.mkdtemp(), "new.memmap"))
        True
    """
    path = os.fspath(file_path)
    if os.access(path, os.W_OK):
        return True
    return not os.path.exists(path)
