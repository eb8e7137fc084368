"""The on-disk layout of memory-mapped tensordicts (compatible with upstream tensordict both ways).

A saved tensordict is a directory::

    prefix/meta.json            what the directory holds (below)
    prefix/<key>.memmap         one raw, C-contiguous, native-endian file per tensor (no header)
    prefix/<key>.shape.memmap   for a nested (jagged) tensor: its (n, ndim) int64 element sizes;
                                its ``<key>.memmap`` then holds the elements one after another
    prefix/<key>/               a nested tensordict, lazy stack, tensorclass or non-tensor entry

``meta.json`` of a TensorDict lists, in key order, ``{"device", "shape", "dtype", "is_nested"}`` for
each tensor (for a nested tensor ``"is_nested": true`` and the shape of its element sizes,
``[n, ndim]``) and ``{"type": "<ClassName>"}`` for each nested entry, then the tensordict's own
``"shape"`` (batch size), ``"device"``, ``"_type"`` (upstream's class string), ``"_format_version"``
and ``"_class"``. JSON is compact and UTF-8, like upstream's. Directories written before
``_format_version``/``_class`` existed load too: dispatch falls back to ``_type``.

Keys are encoded for the file system: ``/ < > : " | ? * \\``, NUL, ``%`` and control characters
become ``%XX``; ``.`` and ``..`` are escaped; the empty key is ``%``. Loading also accepts
upstream's older spellings (spaces escaped, or raw names that are a single safe path component).

Reading never trusts the directory: every ``meta.json`` must be a regular file inside its folder
(not a FIFO, a device or a link leading out) of at most :data:`MAX_META_BYTES`, and directories
nest at most :data:`MAX_DEPTH` levels. Writing, crash-safely: :mod:`tensordict.memmap.transaction`.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from typing import Any

import torch

from tensordict.errors import IncompleteMemmapError, MemmapFormatError, UnsafeKeyError
from tensordict.sizes import format_bytes

__all__ = [
    "CLASS_LAZY",
    "CLASS_NON_TENSOR_STACK",
    "CLASS_SUB",
    "CLASS_TD",
    "FORMAT_VERSION",
    "MAX_DEPTH",
    "MAX_META_BYTES",
    "TYPE_LAZY",
    "TYPE_NON_TENSOR",
    "TYPE_METADATA",
    "TYPE_NON_TENSOR_STACK",
    "TYPE_SUB",
    "TYPE_TD",
    "encode_key",
    "entry_path",
    "missing_unsafe_entry",
    "robust_key_setting",
    "robust_key_setting_for",
    "safe_legacy_name",
    "safe_raw_name",
    "find_entry",
    "leaf_entry",
    "open_regular",
    "read_meta",
    "register_class",
    "resolve_class",
]

FORMAT_VERSION = 1
TYPE_TD = "<class 'tensordict._td.TensorDict'>"
TYPE_LAZY = "<class 'tensordict._lazy.LazyStackedTensorDict'>"
TYPE_NON_TENSOR = "<class 'tensordict.tensorclass.NonTensorData'>"
TYPE_NON_TENSOR_STACK = "<class 'tensordict.tensorclass.NonTensorStack'>"
TYPE_METADATA = "<class 'tensordict.tensorclass.MetaData'>"
CLASS_TD = "tensordict:TensorDict"
CLASS_LAZY = "tensordict:LazyStackedTensorDict"
CLASS_NON_TENSOR_STACK = "tensordict:NonTensorStack"
TYPE_SUB = "<class 'tensordict._td._SubTensorDict'>"
CLASS_SUB = "tensordict._td:_SubTensorDict"
META = "meta.json"
#: the largest ``meta.json`` read (a bigger one is refused, not read into memory)
MAX_META_BYTES = 64 << 20
#: how many levels of folders below the prefix a saved tensordict may nest
MAX_DEPTH = 128
#: the longest file name most file systems accept, in bytes
NAME_MAX = 255
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


def safe_raw_name(key: str) -> bool:
    """Whether ``key`` can be a file name as it is (not empty, no ``/``, not ``.`` / ``..``).

    Examples:
        >>> safe_raw_name("obs"), safe_raw_name("a/b"), safe_raw_name("..")
        (True, False, False)
    """
    return _safe_raw(key)


def safe_legacy_name(key: str, *, is_collection: bool = False) -> bool:
    """Whether a key read under its raw (unencoded) name stays inside its prefix.

    A name with ``/`` or ``\\``, or a drive-relative one (``C:x``), leads elsewhere. A leaf's
    file adds a suffix (``.memmap``), so ``""``, ``.`` and ``..`` are only refused for a nested
    tensordict's folder (``is_collection``).

    Examples:
        >>> safe_legacy_name("obs"), safe_legacy_name("../x"), safe_legacy_name("C:x")
        (True, False, False)
        >>> safe_legacy_name(".."), safe_legacy_name("..", is_collection=True)
        (True, False)
    """
    if "/" in key or "\\" in key:
        return False
    if len(key) > 1 and key[1] == ":" and key[0].isalpha():
        return False
    return not (is_collection and key in ("", ".", ".."))


def robust_key_setting(robust_key: bool | None) -> bool:
    """Whether keys are encoded for the file system: ``robust_key`` or, when None, True.

    Examples:
        >>> robust_key_setting(None), robust_key_setting(False)
        (True, False)
    """
    return True if robust_key is None else bool(robust_key)


def robust_key_setting_for(key: str, robust_key: bool | None) -> bool:
    """:func:`robust_key_setting` for one key (the key does not change the answer; upstream's
    signature, kept for callers that pass it).

    Examples:
        >>> robust_key_setting_for("a/b", None)
        True
    """
    return robust_key_setting(robust_key)


def missing_unsafe_entry(prefix: str, key: str, suffix: str = "") -> bool:
    """Whether ``key`` is a path (``../x``, ``/x``) that only an encoded name may stand for, and
    no encoded spelling of it exists in ``prefix``: its raw name is never tried."""
    if not _traversal(key):
        return False
    names = {encode_key(key) + suffix, encode_key(key, escape_space=True) + suffix}
    return not any(os.path.lexists(os.path.join(prefix, name)) for name in names)


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
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        # a plain entry named by one path component is inside by construction: only a link (or
        # a name that walks) needs both paths resolved, a walk up the tree each
        walks = os.sep in name or name in (os.curdir, os.pardir)
        if (stat.S_ISLNK(mode) or walks) and not _inside(prefix, path):
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


def kind_of(meta: dict[str, Any]) -> str:
    """What a ``meta.json`` describes: ``"td"``, ``"lazy"``, ``"non_tensor"``, ``"metadata"``,
    ``"non_tensor_stack"`` or ``"class"`` (a tensorclass, named by its ``_type``).

    ``_class`` (written since upstream 0.15) wins over ``_type``; directories without either are
    plain tensordicts, as upstream's oldest layout."""
    for tag in (meta.get("_class"), meta.get("_type")):
        kind = _KINDS.get(tag) if isinstance(tag, str) else None
        if kind is not None:
            return kind
    return "class" if meta.get("_type") is not None or meta.get("_class") is not None else "td"


_KINDS = {
    CLASS_TD: "td",
    TYPE_TD: "td",
    CLASS_LAZY: "lazy",
    TYPE_LAZY: "lazy",
    TYPE_NON_TENSOR: "non_tensor",
    TYPE_METADATA: "metadata",
    CLASS_NON_TENSOR_STACK: "non_tensor_stack",
    TYPE_NON_TENSOR_STACK: "non_tensor_stack",
    CLASS_SUB: "sub",
    TYPE_SUB: "sub",
}


def encode_index(index: Any) -> Any:
    """An index as JSON, tagged so that tuples and lists stay apart (upstream's encoding;
    ``core.indexing._str_to_index`` decodes it).

    Examples:
        >>> encode_index((slice(0, 2), [1, 3]))
        ['tuple', [['slice', {'start': 0, 'stop': 2, 'step': None}], ['list', [1, 3]]]]
    """
    if isinstance(index, tuple):
        return ["tuple", [encode_index(i) for i in index]]
    if isinstance(index, list):
        return ["list", [encode_index(i) for i in index]]
    if isinstance(index, (slice, range)):
        bounds = {"start": index.start, "stop": index.stop, "step": index.step}
        return ["slice" if isinstance(index, slice) else "range", bounds]
    if isinstance(index, torch.Tensor):
        return ["tensor", index.tolist(), str(index.device)]
    if index is Ellipsis:
        return ["ellipsis"]
    return index


def open_regular(path: str, root: str | None = None) -> int:
    """Open ``path`` for reading if it is a regular file that resolves inside ``root`` (its own
    folder by default); return the file descriptor.

    Never blocks (a FIFO is refused, not opened for a writer that never comes).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        UnsafeKeyError: ``path`` is a link that leads outside ``root``.
        MemmapFormatError: ``path`` is not a regular file (FIFO, device, socket, folder) or a
            symlink loop.
    """
    folder = root if root is not None else os.path.dirname(path)
    if not _inside(folder, path):
        raise UnsafeKeyError(
            f"{path} resolves to {os.path.realpath(path)}, outside {folder}. Refusing to read "
            "it: the directory is corrupt or hostile."
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise MemmapFormatError(f"{path} is a symlink loop.") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise MemmapFormatError(
            f"{path} is not a regular file (it is {_file_kind(mode)}); refusing to read it."
        )
    return fd


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_meta(directory: str) -> dict[str, Any]:
    """Read and parse ``directory/meta.json`` (a regular file inside it, at most
    :data:`MAX_META_BYTES`).

    Raises:
        IncompleteMemmapError: no ``meta.json`` (not a saved tensordict, or an interrupted write).
        MemmapFormatError: the file is not a regular file, too large, not valid JSON or not a JSON
            object.
    """
    path = os.path.join(directory, META)
    try:
        fd = open_regular(path, directory)
    except FileNotFoundError:
        what = "does not exist" if not os.path.isdir(directory) else "has no meta.json"
        raise IncompleteMemmapError(
            f"{directory} {what}: it is not a saved tensordict, or writing it was interrupted "
            f"(meta.json is written last). Missing: {path}."
        ) from None
    except NotADirectoryError:
        raise IncompleteMemmapError(f"{directory} is not a directory.") from None
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_META_BYTES + 1)
    if len(raw) > MAX_META_BYTES:
        raise MemmapFormatError(
            f"{path} is larger than {format_bytes(MAX_META_BYTES)}, the most metadata read; "
            "it is not metadata written by tensordict."
        )
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise MemmapFormatError(f"{path} is not valid JSON: {err}.") from None
    if not isinstance(meta, dict):
        raise MemmapFormatError(f"{path} must hold a JSON object, got {type(meta).__name__}.")
    return meta


class Visited:
    """The folders a load has entered, to refuse nesting deeper than :data:`MAX_DEPTH` and
    folders that contain themselves (symlink loops)."""

    def __init__(self) -> None:
        self._seen: set[tuple[int, int]] = set()

    def enter(self, directory: str, depth: int) -> None:
        """Record ``directory`` at ``depth`` levels below the prefix.

        Raises:
            MemmapFormatError: too deep, or a folder already entered (a loop).
        """
        if depth > MAX_DEPTH:
            raise MemmapFormatError(
                f"{directory} is nested deeper than {MAX_DEPTH} levels below the prefix; refusing "
                "to load it (hostile or corrupt directory)."
            )
        try:
            st = os.stat(directory)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise MemmapFormatError(f"{directory} is a symlink loop.") from None
            raise
        ident = (st.st_dev, st.st_ino)
        if ident in self._seen:
            raise MemmapFormatError(
                f"{directory} is a folder already read (a symlink loop, or one folder linked "
                "twice); refusing to read it again."
            )
        self._seen.add(ident)


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
