"""What a saved tensordict holds, read from its metadata alone (the model of ``tensordict info``).

:func:`describe` walks the ``meta.json`` files of a directory written by :func:`memmap_` (here or by
upstream tensordict) and returns a tree of :class:`EntryInfo`: keys, kinds, dtypes, shapes, batch
sizes and byte counts. It never maps a data file and never unpickles anything: sizes come from the
metadata and ``os.stat``. What does not add up (a missing or truncated file, unreadable metadata
below the root, a stack shorter than its metadata says, nesting too deep or in a loop) is recorded
in the entry's ``problems`` instead of raised, so that a damaged directory can still be inspected.
It reads what :func:`~tensordict.memmap.load.load_memmap` reads, with the same limits: only
regular files, at most :data:`~tensordict.memmap.format.MAX_DEPTH` levels, no folder twice.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensordict.errors import IncompleteMemmapError, MemmapFormatError
from tensordict.memmap import format as fmt
from tensordict.memmap.mapping import dtype_from_str

__all__ = ["EntryInfo", "describe"]

TENSOR = "tensor"
TENSORDICT = "TensorDict"
LAZY = "LazyStackedTensorDict"
TENSORCLASS = "tensorclass"
NON_TENSOR = "NonTensorData"
NON_TENSOR_STACK = "NonTensorStack"
FIELD = "field"
UNREADABLE = "unreadable"
_PREVIEW = 40


@dataclass
class EntryInfo:
    """One entry of a saved tensordict: a tensor, or a collection with ``children``.

    Attributes:
        key: the entry's key in its parent ("" for the root; "0", "1", ... for stack members).
        kind: ``"tensor"``, ``"TensorDict"``, ``"LazyStackedTensorDict"``, ``"tensorclass"``,
            ``"NonTensorData"``, ``"NonTensorStack"``, ``"field"`` (an attribute of a
            tensorclass stored in its ``meta.json``) or ``"unreadable"`` (a nested folder whose
            metadata is missing or malformed; ``problems`` says why).
        path: the entry's file or folder, relative to the root ("." for the root).
        dtype: a tensor's dtype without the ``torch.`` prefix.
        shape: a tensor's shape.
        batch_size: a collection's batch size (None when the metadata does not tell).
        nbytes: a tensor's data bytes (from its shape and dtype); the sum below a collection.
        class_name: a tensorclass's class (``module.QualName``).
        format_version: ``_format_version`` of the entry's ``meta.json``; None for older formats.
        stack_dim: the stack dimension of a lazy stack.
        value: a short summary of non-tensor data (inline JSON data, or a pickle's size).
        problems: what does not add up (missing files, sizes that differ from the metadata).
        children: the entries below a collection, in ``meta.json`` order.
    """

    key: str
    kind: str
    path: str
    dtype: str | None = None
    shape: list[int] | None = None
    batch_size: list[int] | None = None
    nbytes: int = 0
    class_name: str | None = None
    format_version: int | None = None
    stack_dim: int | None = None
    value: str | None = None
    problems: list[str] = field(default_factory=list)
    children: list[EntryInfo] = field(default_factory=list)

    def walk(self) -> Iterator[EntryInfo]:
        """This entry and every entry below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON-ready dicts and lists (fields that do not apply are left out)."""
        out: dict[str, Any] = {"key": self.key, "kind": self.kind, "path": self.path}
        for name in ("dtype", "shape", "batch_size", "class_name", "stack_dim", "value"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out["nbytes"] = self.nbytes
        if self.kind not in (TENSOR, FIELD):
            out["format_version"] = self.format_version
        if self.problems:
            out["problems"] = list(self.problems)
        if self.kind not in (TENSOR, FIELD):
            out["children"] = [c.to_json() for c in self.children]
        return out


def describe(path: str | os.PathLike[str]) -> EntryInfo:
    """The tree of entries of the tensordict saved under ``path``, from its metadata alone.

    Args:
        path: a directory written by ``memmap_``/``memmap``/``memmap_like``.

    Returns:
        The root entry; ``root.path`` is ``"."`` and every other path is relative to ``path``.

    Raises:
        IncompleteMemmapError: ``path`` is not a directory, or has no ``meta.json``.
        MemmapFormatError: the root ``meta.json`` is not JSON, or does not describe a tensordict.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> _ = TensorDict({"x": torch.zeros(4, 3), "y": {"z": torch.ones(4)}}, [4]).memmap(d)
        >>> root = describe(d)
        >>> root.kind, root.batch_size, root.nbytes, [c.key for c in root.children]
        ('TensorDict', [4], 64, ['x', 'y'])
        >>> root.children[0].dtype, root.children[0].shape
        ('float32', [4, 3])
    """
    root = os.path.abspath(os.fspath(path))
    if not os.path.isdir(root):
        what = "does not exist" if not os.path.exists(root) else "is not a directory"
        raise IncompleteMemmapError(f"{root} {what}: give the folder of a saved tensordict.")
    meta = fmt.read_meta(root)
    if _tag(meta) is None and "shape" not in meta:
        raise MemmapFormatError(
            f"{os.path.join(root, fmt.META)} does not describe a tensordict: it has neither "
            "'_type', '_class' nor 'shape'."
        )
    walker = _Walker(root)
    walker.visited.enter(root, 0)
    return walker.node("", root, meta, None, 0)


def _tag(meta: dict[str, Any]) -> Any:
    return meta.get("_class") or meta.get("_type")


def _int_list(value: Any) -> list[int] | None:
    """``value`` if it is a list of sizes a tensor can have (non-negative int64), else None."""
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63 for v in value
    ):
        return list(value)
    return None


def _version(meta: dict[str, Any]) -> int | None:
    value = meta.get("_format_version")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _preview(data: Any) -> str:
    text = repr(data)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


class _Walker:
    """Builds the tree; every path it records is relative to ``root``."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.visited = fmt.Visited()

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.root)

    def node(
        self, key: str, directory: str, meta: dict[str, Any], parent_bs: Any, depth: int
    ) -> EntryInfo:
        kind = fmt.kind_of(meta)
        if kind == "td":
            return self.tensordict(key, directory, meta, depth)
        if kind == "lazy":
            return self.lazy(key, directory, meta, depth)
        if kind in ("non_tensor", "metadata"):
            return self.non_tensor(key, directory, meta, parent_bs)
        if kind == "non_tensor_stack":
            return self.non_tensor_stack(key, directory, meta, parent_bs)
        return self.tensorclass(key, directory, meta, str(_tag(meta)), depth)

    def subdirectory(self, key: str, directory: str, parent_bs: Any, depth: int) -> EntryInfo:
        """The entry of a nested folder, or a placeholder that says why it cannot be read."""
        try:
            sub = fmt.find_entry(directory, key)
            if sub is None:
                raise IncompleteMemmapError(f"folder {fmt.entry_path(directory, key)} is missing")
            self.visited.enter(sub, depth)
            return self.node(key, sub, fmt.read_meta(sub), parent_bs, depth)
        except (MemmapFormatError, OSError) as err:
            path = self.rel(fmt.entry_path(directory, key))
            return EntryInfo(key, UNREADABLE, path, problems=[_one_line(err)])

    def tensordict(self, key: str, directory: str, meta: dict[str, Any], depth: int) -> EntryInfo:
        bs = _int_list(meta.get("shape", []))
        info = EntryInfo(key, TENSORDICT, self.rel(directory), batch_size=bs)
        info.format_version = _version(meta)
        if bs is None:
            info.problems.append(f"'shape' is not a list of sizes: {meta.get('shape')!r}")
        for name, entry in meta.items():
            if not isinstance(entry, dict):
                continue
            if "type" in entry:
                info.children.append(self.subdirectory(name, directory, bs, depth + 1))
            elif "dtype" in entry and "shape" in entry:
                info.children.append(self.tensor(name, directory, entry))
        info.nbytes = sum(c.nbytes for c in info.children)
        for child in info.children:
            size = child.shape if child.kind == TENSOR else child.batch_size
            if bs is not None and size is not None and size[: len(bs)] != bs:  # load refuses
                what = "shape" if child.kind == TENSOR else "batch size"
                child.problems.append(f"{what} {size} does not start with the batch size {bs}")
        return info

    def tensor(self, key: str, directory: str, entry: dict[str, Any]) -> EntryInfo:
        dtype_name = str(entry["dtype"])
        shape = _int_list(entry["shape"])
        info = EntryInfo(key, TENSOR, "", dtype=dtype_name.removeprefix("torch."), shape=shape)
        try:
            path = fmt.find_entry(directory, key, ".memmap")
            itemsize = dtype_from_str(dtype_name).itemsize
        except MemmapFormatError as err:
            info.path = self.rel(fmt.entry_path(directory, key, ".memmap"))
            info.problems.append(_one_line(err))
            return info
        info.path = self.rel(path or fmt.entry_path(directory, key, ".memmap"))
        if shape is None:
            info.problems.append(f"shape is not a list of sizes: {entry['shape']!r}")
            return info
        numel = self.nested_numel(key, directory, shape, info) if entry.get("is_nested") else None
        info.nbytes = (math.prod(shape) if numel is None else numel) * itemsize
        if path is None:
            if info.nbytes:
                info.problems.append("data file missing")
            return info
        try:
            st = os.stat(path)
        except OSError as err:
            info.problems.append(_one_line(err))
            return info
        if not stat.S_ISREG(st.st_mode):
            info.problems.append("not a regular file")
        elif st.st_size < info.nbytes:
            info.problems.append(f"file holds {st.st_size} bytes, metadata says {info.nbytes}")
        elif st.st_size > info.nbytes:  # loads, as upstream: the extra bytes are not read
            extra = st.st_size - info.nbytes
            info.value = f"{extra} trailing byte{'s' * (extra != 1)} ignored"
        return info

    def nested_numel(self, key: str, directory: str, shape: list[int], info: EntryInfo) -> int:
        """The values a nested tensor holds, from its element sizes (``<key>.shape.memmap``)."""
        path = fmt.find_entry(directory, key, ".shape.memmap")
        count = math.prod(shape)
        try:
            sizes = np.fromfile(path, dtype=np.int64, count=count) if path else None
        except (OSError, ValueError) as err:
            info.problems.append(_one_line(err))
            return 0
        if sizes is None or sizes.size < count:
            info.problems.append("element sizes file missing or truncated")
            return 0
        info.value = f"nested: {shape[0]} element{'s' * (shape[0] != 1)}"
        rows = sizes.reshape(shape)
        return int(rows.prod(axis=1).sum()) if rows.size else 0

    def lazy(self, key: str, directory: str, meta: dict[str, Any], depth: int) -> EntryInfo:
        stack_dim = meta.get("stack_dim", 0)
        info = EntryInfo(key, LAZY, self.rel(directory), stack_dim=stack_dim)
        info.format_version = _version(meta)
        count = meta.get("num_members")
        while count is None or len(info.children) < count:
            name = str(len(info.children))
            sub = fmt.find_entry(directory, name)
            if sub is None or not os.path.isdir(sub):
                break
            info.children.append(self.subdirectory(name, directory, None, depth + 1))
        info.nbytes = sum(c.nbytes for c in info.children)
        found = len(info.children)
        if isinstance(count, int) and count > found:
            info.problems.append(
                f"metadata says {count} members, found {found}: member folder {found}/ is missing"
            )
        elif isinstance(count, int) and fmt.find_entry(directory, str(count)) is not None:
            info.problems.append(f"metadata says {count} members, but folder {count}/ exists too")
        sizes = {tuple(c.batch_size) for c in info.children if c.batch_size is not None}
        if not info.children:
            info.problems.append("a stack with no members (folders 0/, 1/, ...)")
        elif len(sizes) > 1:
            info.problems.append(f"members have different batch sizes: {sorted(sizes)}")
        elif sizes:
            member = list(sizes.pop())
            if isinstance(stack_dim, int) and 0 <= stack_dim <= len(member):
                info.batch_size = member[:stack_dim] + [len(info.children)] + member[stack_dim:]
            else:
                info.problems.append(f"stack_dim {stack_dim!r} does not fit members {member}")
        return info

    def non_tensor(
        self, key: str, directory: str, meta: dict[str, Any], parent_bs: Any
    ) -> EntryInfo:
        info = EntryInfo(key, NON_TENSOR, self.rel(directory), batch_size=parent_bs)
        info.format_version = _version(meta)
        if "data" in meta:
            info.value = _preview(meta["data"])
        else:
            info.value = self.pickle_note(os.path.join(directory, "other.pickle"))
        return info

    def non_tensor_stack(
        self, key: str, directory: str, meta: dict[str, Any], parent_bs: Any
    ) -> EntryInfo:
        info = EntryInfo(key, NON_TENSOR_STACK, self.rel(directory), batch_size=parent_bs)
        info.format_version = _version(meta)
        data = meta.get("data")
        if isinstance(data, list):
            info.value = f"{len(data)} values: {_preview(data)}"
        elif data == "pickle.pkl":
            info.value = self.pickle_note(os.path.join(directory, "pickle.pkl"))
        else:
            members = 0
            while os.path.isdir(os.path.join(directory, str(members))):
                members += 1
            info.value = f"{members} members in folders (older layout)"
        return info

    def tensorclass(
        self, key: str, directory: str, meta: dict[str, Any], tag: str, depth: int
    ) -> EntryInfo:
        class_name = tag.removeprefix("<class '").removesuffix("'>")
        info = EntryInfo(key, TENSORCLASS, self.rel(directory), class_name=class_name)
        inner = self.subdirectory("_tensordict", directory, None, depth + 1)
        info.batch_size, info.format_version = inner.batch_size, inner.format_version
        info.problems.extend(inner.problems)
        info.children = list(inner.children)
        for name, value in meta.items():
            if name not in ("_type", "_class", "_format_version"):
                info.children.append(
                    EntryInfo(name, FIELD, self.rel(directory), value=_preview(value))
                )
        pickled = os.path.join(directory, "other.pickle")
        if os.path.lexists(pickled):
            info.value = "more fields " + self.pickle_note(pickled)
        info.nbytes = sum(c.nbytes for c in info.children)
        return info

    def pickle_note(self, path: str) -> str:
        if not os.path.lexists(path):
            return "no data"
        try:
            os.close(fmt.open_regular(path))
        except (MemmapFormatError, OSError) as err:
            return f"! {_one_line(err)}"
        return f"pickled in {self.rel(path)} ({os.path.getsize(path)} B, not read)"


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
