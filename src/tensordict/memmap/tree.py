"""A saved directory as humans read it: its file tree, and keys as they appear as file names."""

from __future__ import annotations

import os
import re

from tensordict.core.options import logger
from tensordict.memmap.format import encode_key
from tensordict.sizes import format_bytes

__all__ = ["decode_key", "encode_key_for_filesystem", "print_directory_tree"]

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def encode_key_for_filesystem(key: str, *, robust: bool = True) -> str:
    """The file name under which a key is saved (``robust=False``: the key unchanged).

    Examples:
        >>> encode_key_for_filesystem("a/b c"), encode_key_for_filesystem("a/b", robust=False)
        ('a%2Fb%20c', 'a/b')
    """
    return encode_key(key, escape_space=True) if robust else key


def decode_key(encoded_key: str) -> str:
    """The key a file name stands for (the inverse of :func:`encode_key_for_filesystem`).

    Examples:
        >>> decode_key("a%2Fb%20c"), decode_key("%")
        ('a/b c', '')
    """
    if encoded_key == "%":
        return ""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), encoded_key)


def _size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
    return total


def _lines(path: str, indent: str) -> list[str]:
    out = [f"{indent}{os.path.basename(os.path.normpath(path))}/"]
    entries = os.listdir(path)
    inner = indent + "    "
    for name in entries:
        full = os.path.join(path, name)
        if os.path.isdir(full):
            out.extend(_lines(full, inner))
    out.extend(f"{inner}{name}" for name in entries if not os.path.isdir(os.path.join(path, name)))
    return out


def print_directory_tree(
    path: str | os.PathLike[str], indent: str = "", display_metadata: bool = True
) -> str:
    """Log (at INFO, with the tensordict logger) and return the file tree under ``path``.

    Directories come first, then files, each in :func:`os.listdir` order.

    Args:
        path: the directory.
        indent: prefix of every line.
        display_metadata: start with the total size of the files.

    Examples:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> open(os.path.join(d, "meta.json"), "w").close()
        >>> print(print_directory_tree(d, display_metadata=False).splitlines()[1])
            meta.json
    """
    root = os.fspath(path)
    lines = _lines(root, indent)
    if display_metadata:
        lines.insert(0, f"{indent}Directory size: {format_bytes(_size(root))}")
    for line in lines:
        logger.info(line)
    return "\n".join(lines)
