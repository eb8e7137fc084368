"""The ``python -m tensordict`` command line.

``python -m tensordict info PATH`` prints what a saved memory-mapped tensordict holds as a tree
(keys, dtypes, shapes, bytes per tensor, batch sizes, format version), reading only its metadata and
file sizes; ``--json`` prints the same for programs. Exit status: 0, 1 when the tree shows problems
(missing or truncated files), 2 when ``PATH`` is not a saved tensordict.

The demo is a separate entry point: ``python -m tensordict.demo``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from tensordict.errors import MemmapFormatError
from tensordict.memmap.describe import FIELD, LAZY, TENSOR, TENSORCLASS, EntryInfo, describe
from tensordict.sizes import format_bytes

__all__ = ["main", "render_tree", "version_line"]

_UNICODE = ("├── ", "└── ", "│   ", "    ")
_ASCII = ("|-- ", "`-- ", "|   ", "    ")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    Examples:
        >>> main(["info", "/nonexistent/folder"])
        2
    """
    parser = _parser()
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tensordict",
        description="Tools for tensordicts saved on disk. The demo: python -m tensordict.demo",
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="show the version of tensordict and exit"
    )
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    info = commands.add_parser(
        "info",
        help="show what a saved memory-mapped tensordict holds",
        description="Print a saved memory-mapped tensordict as a tree: keys, dtypes, shapes, "
        "bytes, batch sizes and format version. Reads metadata and file sizes only.",
    )
    info.add_argument("path", metavar="PATH", help="the folder written by memmap_ / memmap")
    info.add_argument("--json", action="store_true", help="print JSON instead of a tree")
    info.set_defaults(run=_info)
    return parser


class _Version(argparse.Action):
    """``--version``: :func:`version_line` on one line (argparse's own action wraps it)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_line())
        parser.exit()


def version_line() -> str:
    """``tensordict VERSION (torch VERSION, Python VERSION) at PATH``.

    Examples:
        >>> version_line().startswith("tensordict 0.")
        True
    """
    import torch

    from tensordict import __version__

    where = os.path.dirname(os.path.abspath(__file__))
    python = ".".join(map(str, sys.version_info[:3]))
    return f"tensordict {__version__} (torch {torch.__version__}, Python {python}) at {where}"


def _info(args: argparse.Namespace) -> int:
    try:
        root = describe(args.path)
    except (MemmapFormatError, OSError) as err:
        message = " ".join(str(err).split())
        print(f"python -m tensordict info: error: {message}", file=sys.stderr)
        return 2
    path = os.path.abspath(args.path)
    if args.json:
        print(json.dumps(info_json(root, path), indent=2, ensure_ascii=False))
    else:
        print(render_tree(root, path, _branches()))
    return 1 if any(e.problems for e in root.walk()) else 0


def info_json(root: EntryInfo, path: str) -> dict[str, Any]:
    """The ``--json`` document: a summary and the tree (see :meth:`EntryInfo.to_json`)."""
    tensors = [e for e in root.walk() if e.kind == TENSOR]
    return {
        "path": path,
        "kind": root.kind,
        "batch_size": root.batch_size,
        "format_version": root.format_version,
        "total_bytes": root.nbytes,
        "num_tensors": len(tensors),
        "problems": [f"{e.path}: {p}" for e in root.walk() for p in e.problems],
        "tree": root.to_json(),
    }


def _branches() -> tuple[str, ...]:
    try:
        "".join(_UNICODE).encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return _ASCII
    return _UNICODE


def render_tree(root: EntryInfo, path: str, branches: tuple[str, ...] = _ASCII) -> str:
    """The tree printed by ``info``: a header, one aligned row per entry, and a total.

    Args:
        root: the described tensordict (:func:`~tensordict.memmap.describe.describe`).
        path: the folder, shown in the header.
        branches: the four tree-drawing strings (tee, last tee, pipe, blank).

    Returns:
        The text, without a trailing newline.
    """
    version = root.format_version if root.format_version is not None else "none (older format)"
    header = f"{path}: {_kind(root)}, batch size {_dims(root.batch_size)}, format version {version}"
    rows: list[tuple[str, ...]] = []
    _rows(root, "", branches, rows)
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(4)]
    lines = [header]
    for name, kind, shape, size, note in rows:
        line = f"{name:<{widths[0]}}  {kind:<{widths[1]}}  {shape:<{widths[2]}}  "
        lines.append((line + f"{size:>{widths[3]}}  {note}").rstrip())
    tensors = sum(1 for e in root.walk() if e.kind == TENSOR)
    problems = sum(len(e.problems) for e in root.walk())
    total = f"total: {format_bytes(root.nbytes)} in {tensors} tensor{'s' * (tensors != 1)}"
    lines.append(total + (f", {problems} problem(s) marked with !" if problems else ""))
    return "\n".join(lines)


def _rows(node: EntryInfo, indent: str, branches: tuple[str, ...], rows: list[Any]) -> None:
    tee, last_tee, pipe, blank = branches
    children = _shown_children(node)
    for i, child in enumerate(children):
        last = i == len(children) - 1
        name = indent + (last_tee if last else tee) + child.key
        if child.kind == "same":  # the summary row of members alike (children[0] is the model)
            model = node.children[0]
            rows.append((name, _kind(model), _shape(model), _size(child), child.value or ""))
            continue
        rows.append((name, _kind(child), _shape(child), _size(child), _note(child)))
        _rows(child, indent + (blank if last else pipe), branches, rows)


def _shown_children(node: EntryInfo) -> list[EntryInfo]:
    """A lazy stack of many members alike shows its first member and one summary row."""
    members = node.children
    if node.kind != LAZY or len(members) < 3:
        return members
    first = _signature(members[0])
    if any(_signature(m) != first for m in members[1:]):
        return members
    rest = EntryInfo(
        f"1..{len(members) - 1}",
        "same",
        "",
        nbytes=sum(m.nbytes for m in members[1:]),
        value=f"{len(members) - 1} more members like 0",
    )
    return [members[0], rest]


def _signature(e: EntryInfo) -> tuple[Any, ...]:
    fields = (e.key if e.kind == TENSOR else "", e.kind, e.dtype, e.shape, e.batch_size)
    return (*map(repr, fields), e.class_name, tuple(e.problems), tuple(map(_named, e.children)))


def _named(e: EntryInfo) -> tuple[Any, ...]:
    return (e.key, _signature(e))


def _kind(e: EntryInfo) -> str:
    if e.kind == TENSOR:
        return e.dtype or "?"
    if e.kind == TENSORCLASS:
        return f"tensorclass {e.class_name}"
    return e.kind


def _dims(sizes: list[int] | None) -> str:
    return "?" if sizes is None else "[" + ", ".join(map(str, sizes)) + "]"


def _shape(e: EntryInfo) -> str:
    if e.kind == TENSOR:
        return _dims(e.shape)
    return "" if e.kind == FIELD else f"batch {_dims(e.batch_size)}"


def _size(e: EntryInfo) -> str:
    return format_bytes(e.nbytes) if e.nbytes or e.kind == TENSOR else ""


def _note(e: EntryInfo) -> str:
    parts = []
    if e.stack_dim is not None:
        parts.append(f"stack_dim {e.stack_dim}")
    if e.value is not None:
        parts.append(e.value)
    parts.extend(f"! {p}" for p in e.problems)
    return "; ".join(parts)
