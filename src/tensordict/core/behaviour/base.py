"""TensorDictBase: the tensordict behaviour, written once on the primitives of ``collection``.

The class assembles the mixins of this room, one per concern (see ``tensordict.core.behaviour``),
and adds what concerns the whole: iteration and the mapping protocol, copies (clone, empty,
to_tensordict), key flattening, dict conversions. Methods implemented above the behaviour
(memmap, parallel map, nn, file formats, pickling, repr) are the rows of ``forwards``.
"""

from __future__ import annotations

import builtins
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

import torch

from tensordict.core import factory
from tensordict.core.behaviour.arithmetic import ArithmeticMixin
from tensordict.core.behaviour.combine import CombineMixin
from tensordict.core.behaviour.consolidate import ConsolidateMixin
from tensordict.core.behaviour.device import DeviceMixin
from tensordict.core.behaviour.entries import EntriesMixin, locked_message
from tensordict.core.behaviour.forwards import ForwardsMixin
from tensordict.core.behaviour.locking import LockingMixin
from tensordict.core.behaviour.names import DimNamesMixin
from tensordict.core.behaviour.nesting import recursion_guard
from tensordict.core.behaviour.ops import CastMixin, OpsMixin, keep_lock_of
from tensordict.core.behaviour.ragged import RaggedMixin
from tensordict.core.behaviour.reductions import ReductionsMixin
from tensordict.core.behaviour.shape import ShapeMixin, normalize_dim
from tensordict.core.behaviour.storage import StorageMixin
from tensordict.core.behaviour.structure import StructureMixin
from tensordict.core.behaviour.tensor_methods import TensorMethodsMixin
from tensordict.core.behaviour.upstream_private import UpstreamPrivateMixin
from tensordict.core.collection import publish_as
from tensordict.core.keys import (
    ItemsView,
    KeysView,
    NestedKey,
    ValuesView,
    is_collection_class,
    key_path,
    leaf_or_non_tensor,
    place_unflattened,
    unravel_key,
)
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack, is_non_tensor
from tensordict.core.unbatched import is_unbatched
from tensordict.errors import (
    BatchSizeError,
    KeyTypeError,
    LockedError,
    ShapeMismatchError,
    TensorDictKeyError,
    ZeroDimIterationError,
)

__all__ = ["TensorDictBase", "is_tensor_collection"]

T = TypeVar("T", bound="TensorDictBase")
_MISSING: Any = object()


def is_tensor_collection(datatype: Any) -> bool:
    """Whether ``datatype`` is a tensordict, a tensorclass or non-tensor data: an instance or a
    class.

    Examples:
        >>> from tensordict import TensorDict
        >>> is_tensor_collection(TensorDict()), is_tensor_collection(TensorDict)
        (True, True)
        >>> is_tensor_collection(torch.zeros(2)), is_tensor_collection(torch.Tensor)
        (False, False)
    """
    return is_collection_class(datatype if isinstance(datatype, type) else type(datatype))


def as_size(batch_size: Any) -> torch.Size:
    """Turn an int, a sequence of ints or None into a ``torch.Size`` (``-1`` marks a dim where
    nested tensors are ragged, as upstream)."""
    if batch_size is None:
        return torch.Size([])
    if isinstance(batch_size, torch.Size):
        return batch_size
    dims: list[Any]  # (a symbolic size, from torch.export or dynamic shapes, is kept as it is)
    if isinstance(batch_size, (int, torch.SymInt)) and batch_size >= 0:
        dims = [batch_size]
        return torch.Size(dims)
    try:
        dims = [b if isinstance(b, torch.SymInt) else int(b) for b in batch_size]
        size = torch.Size(dims)
    except (TypeError, ValueError):
        size = None
    if size is None or (size and min(size) < -1):  # (-1: a ragged dim of nested tensors)
        raise BatchSizeError(
            f"batch_size must be a sequence of non-negative ints (e.g. [32] or "
            f"torch.Size([4, 5])), got {batch_size!r}."
        )
    return size


class _CallableList(list):  # type: ignore[type-arg]
    """A list that returns itself when called (``sorted_keys`` was a method here before)."""

    def __call__(self) -> list[Any]:
        return list(self)


def _canonical(t: torch.Tensor) -> torch.Tensor:
    """``t`` with row-major strides (a size-1 dim can make torch call other strides
    contiguous); ``t`` itself when it has them."""
    strides, step = [], 1
    for n in reversed(t.shape):
        strides.append(step)
        step *= max(n, 1)
    if t.layout is not torch.strided or tuple(t.stride()) == tuple(reversed(strides)):
        return t
    return torch.empty_like(t, memory_format=torch.contiguous_format).copy_(t)


class TensorDictBase(
    EntriesMixin,
    StructureMixin,
    ReductionsMixin,
    ArithmeticMixin,
    OpsMixin,
    ShapeMixin,
    CombineMixin,
    DeviceMixin,
    CastMixin,
    TensorMethodsMixin,
    RaggedMixin,
    ConsolidateMixin,
    UpstreamPrivateMixin,
    LockingMixin,
    StorageMixin,
    DimNamesMixin,
    ForwardsMixin,
):
    """The behaviour shared by every tensordict class.

    Not instantiated directly: use :class:`~tensordict.TensorDict` or
    :class:`~tensordict.LazyStackedTensorDict`.
    """

    # weak references to the locked tensordicts holding this one (see the lock graph below)
    # _consolidated: the storage and metadata of a consolidated tensordict (see consolidate)
    __slots__ = ("_consolidated", "_lock_parents")

    # ================================================================== size, device, names
    @property
    def shape(self) -> torch.Size:
        """Alias of ``batch_size``."""
        return self.batch_size

    def _has_names(self) -> bool:
        """Whether any batch dimension is named (upstream's helper, called by client code).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3])
            >>> td._has_names()
            False
            >>> td.names = ["x", None]
            >>> td._has_names()
            True
        """
        names = self._names_or_none()
        return names is not None and any(n is not None for n in names)

    @property
    def batch_dims(self) -> int:
        """The number of batch dimensions."""
        return len(self.batch_size)

    @property
    def ndim(self) -> int:
        """Alias of :attr:`batch_dims`."""
        return len(self.batch_size)

    def ndimension(self) -> int:
        return len(self.batch_size)

    def dim(self) -> int:
        return len(self.batch_size)

    def numel(self) -> int:
        """The number of elements in the batch (the product of the batch size)."""
        return self.batch_size.numel()

    def size(self, dim: int | None = None) -> torch.Size | int:
        """The batch size, or its size along ``dim``."""
        return self.batch_size if dim is None else self.batch_size[dim]

    def __len__(self) -> int:
        bs = self.batch_size
        return bs[0] if bs else 0

    def __iter__(self) -> Iterator[Any]:
        if not self.batch_size:  # (a TypeError, as upstream: not a silently empty loop)
            raise ZeroDimIterationError(
                "iteration over a tensordict with no batch dimension: `for x in td` walks the "
                "first batch dimension. Iterate over keys(), values() or items() instead."
            )
        return iter(self.unbind(0))

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` (a str or a possibly nested tuple of str) names an entry, as upstream.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": {"b": torch.zeros(2)}}, [2])
            >>> "a" in td, ("a", "b") in td, ("a", ("b",)) in td, ("a", "c") in td
            (True, True, True, False)
        """
        if type(key) is str:
            return self._get_str(key, _MISSING) is not _MISSING  # type: ignore[arg-type]
        try:
            path = key_path(key)
        except KeyTypeError:
            raise KeyTypeError(
                f"key must be a NestedKey (a str or a possibly tuple of str), got "
                f"{type(key).__name__} {key!r}. To look for a value, use `value in td.values()`."
            ) from None
        try:
            return self._get_path(path, _MISSING) is not _MISSING
        except ShapeMismatchError:
            return True  # a lazy stack entry whose members differ in shape: it exists

    def __bool__(self) -> bool:
        raise RuntimeError(
            "Converting a tensordict to boolean value is not permitted: its truth value is "
            "ambiguous. Use td.all() or td.any() "
            "(or td.is_empty() to test for entries)."
        )

    __hash__ = object.__hash__

    def is_empty(self) -> bool:
        """Whether the tensordict holds no leaf (nested empty tensordicts count as empty)."""
        return not any(
            True
            for _ in self.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
        )

    def auto_batch_size_(self: T, batch_dims: int | None = None) -> T:
        """Set the batch size to the longest shape prefix shared by every leaf.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4, 5), "b": torch.zeros(3, 4)})
            >>> td.auto_batch_size_().batch_size
            torch.Size([3, 4])
        """
        prefix: list[int] | None = None
        for _, value in self._own_items():
            if isinstance(value, TensorDictBase):
                value.auto_batch_size_(batch_dims)  # (as upstream: nested ones get batch_dims too)
                shape = list(value.batch_size)
            elif is_non_tensor(value) and value.batch_size:
                shape = list(value.batch_size)  # (as upstream: a batched one has a shape)
            elif is_non_tensor(value) or is_unbatched(value):
                continue
            else:
                shape = list(value.shape)
            if prefix is None:
                prefix = shape
            else:
                n = 0
                while n < min(len(prefix), len(shape)) and prefix[n] == shape[n]:
                    n += 1
                prefix = prefix[:n]
        new = prefix or []
        if batch_dims is not None:
            new = new[:batch_dims]
        self.batch_size = torch.Size(new)
        return self

    # ================================================================== keys
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
        *,
        sort: bool = False,
    ) -> KeysView:
        """A view of the keys (nested keys as tuples when ``include_nested``).

        A nested tensordict's key comes after its own keys, as upstream lists them; ``sort``
        orders the keys by their dotted form.
        """
        return KeysView(self, include_nested, leaves_only, is_leaf, sort)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
        *,
        sort: bool = False,
    ) -> ValuesView:
        """A view of the values (a nested tensordict before its entries, as upstream)."""
        return ValuesView(self, include_nested, leaves_only, is_leaf, sort)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
        *,
        sort: bool = False,
    ) -> ItemsView:
        """A view of ``(key, value)`` pairs (a nested tensordict before its entries, as
        upstream)."""
        return ItemsView(self, include_nested, leaves_only, is_leaf, sort)

    @property
    def sorted_keys(self) -> list[str]:
        """The top-level keys, sorted (a property, as upstream; calling it works too).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(b=torch.zeros(1), a=torch.zeros(1))
            >>> td.sorted_keys, td.sorted_keys()
            (['a', 'b'], ['a', 'b'])
        """
        return _CallableList(sorted(self._own_keys()))

    def select(
        self: T,
        *keys: NestedKey,
        inplace: bool = False,
        strict: bool = True,
        as_tensordict: bool = False,
    ) -> T:
        """A tensordict with only the given keys (sharing the same tensors).

        ``as_tensordict`` matters for tensorclasses (a plain tensordict); here it changes
        nothing.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2)}}, [2])
            >>> list(td.select(("b", "c")).keys(include_nested=True))
            [('b', 'c'), 'b']
        """
        paths = [key_path(k) for k in keys]
        out = self.empty()
        # paths into a nested lazy stack: the stack selects them, member by member
        in_stacks: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for path in paths:
            split = self._nested_stack_depth(path)
            if split:
                in_stacks.setdefault(path[:split], []).append(path[split:])
        for path in paths:
            prefix = next((p for p in in_stacks if path[: len(p)] == p), None)
            if prefix is not None:
                parent = out._selected_parent(self, prefix)
                if parent._get_str(prefix[-1], None) is None:  # (first path into that stack)
                    stack = self._get_path(prefix, _MISSING)
                    chosen = stack.select(*in_stacks[prefix], strict=strict)
                    parent._set_str(prefix[-1], chosen, validated=True)
                continue
            value = self._get_path(path, _MISSING)
            if value is _MISSING:
                if strict:
                    raise self._missing_key(unravel_key(path))
                depth = self._collection_depth(path)
                if depth:  # (as upstream: the tensordicts on the way are kept, maybe empty)
                    out._selected_parent(self, path[: depth + 1])
                continue
            parent = out._selected_parent(self, path)
            if parent._get_str(path[-1], None) is None:
                parent._set_str(path[-1], value, validated=True)
        if inplace:
            return self._replace_contents(out)
        return out

    def _nested_stack_depth(self, path: tuple[str, ...]) -> int:
        """How many parts of ``path`` lead to a nested lazy stack or tensorclass it goes into
        (0: none), so ``select`` asks it for the rest (a stack's members may hold leaves of
        different shapes, which a read of the stacked leaf refuses; a tensorclass keeps its
        class, its other fields None; upstream selects there too)."""
        node: Any = self
        for depth, part in enumerate(path[:-1], 1):
            node = node._get_str(part, None) if isinstance(node, TensorDictBase) else None
            if getattr(type(node), "_is_tensorclass", False):
                return depth  # (so is a tensorclass: the result keeps its class, as upstream)
            if isinstance(node, factory.LazyStackedTensorDict):
                return depth
            if node is None:
                return 0
        return 0

    def _collection_depth(self, path: tuple[str, ...]) -> int:
        """How many leading parts of ``path`` name nested tensordicts (or tensorclasses)."""
        node: Any = self
        for depth, part in enumerate(path[:-1]):
            node = node._get_str(part, None) if isinstance(node, TensorDictBase) else None
            if getattr(type(node), "_is_tensorclass", False):
                node = node._tensordict
            if not isinstance(node, TensorDictBase):
                return depth
        return len(path) - 1

    def _selected_parent(self, source: TensorDictBase, path: tuple[str, ...]) -> Any:
        """The tensordict of a selection (``self``) that holds ``path``'s last part; the nested
        ones are created with the batch size and names of ``source``'s (as upstream)."""
        node: Any = self
        src: Any = source
        for part in path[:-1]:
            src = src._get_str(part, None)
            if getattr(type(src), "_is_tensorclass", False):
                src = src._tensordict
            child = node._get_str(part, None)
            if child is None:
                child = node._new_dense({}, src.batch_size, src._names_or_none())
                node._set_str(part, child, validated=True)
            elif getattr(type(child), "_is_tensorclass", False):
                child = child._tensordict
            node = child
        return node

    def exclude(self: T, *keys: NestedKey, inplace: bool = False) -> T:
        """A tensordict without the given keys (sharing the same tensors)."""
        excluded = {key_path(k) for k in keys}
        if inplace:
            for path in excluded:
                self._exclude_path(path)
            return self
        return self._copy_structure(excluded, ())

    def _exclude_path(self, path: tuple[str, ...]) -> None:
        """Delete ``path`` where it lives, if it is there (as upstream: an absent key leaves a
        locked tensordict alone; deleting from a locked one raises). Nested tensordicts keep
        their identity."""
        if len(path) > 1:
            child = self._get_str(path[0], None)
            if getattr(type(child), "_is_tensorclass", False):
                child = child._tensordict
            if isinstance(child, TensorDictBase):
                child._exclude_path(path[1:])
            return
        if self._get_str(path[0], None) is None:
            return
        if self.is_locked:
            raise LockedError(locked_message(f"exclude {path[0]!r} in place"))
        self._del_str(path[0])

    def _copy_structure(
        self, excluded: builtins.set[tuple[str, ...]], prefix: tuple[str, ...]
    ) -> Any:
        source = {}
        for key in self._own_keys():
            path = prefix + (key,)
            if path in excluded:
                continue  # never read (a file-backed entry may be costly, or refuse to be read)
            value = self._get_str(key, None)
            if isinstance(value, TensorDictBase):
                value = value._copy_structure(excluded, path)
            elif getattr(type(value), "_is_tensorclass", False):
                inner = [p[len(path) :] for p in excluded if p[: len(path)] == path]
                # a new instance over the same tensors, without the fields excluded in it
                value = value.exclude(*inner) if inner else value.clone(False)
            source[key] = value
        return self._new_dense(source, self.batch_size, self._names_or_none())

    def _replace_contents(self: T, other: TensorDictBase) -> T:
        if self.is_locked:
            raise LockedError(locked_message("select or exclude keys in place"))
        for key in list(self._own_keys()):
            self._del_str(key)
        for key, value in other._own_items():
            self._set_str(key, value, validated=True)
        return self

    @classmethod
    def fromkeys(cls, keys: Iterable[NestedKey], value: Any = 0) -> Any:
        """A tensordict with every key set to ``value`` (no batch dimension)."""
        td = factory.TensorDict()
        for key in keys:
            td.set(key, value)
        return td

    def flatten_keys(self: T, separator: str = ".", inplace: bool = False) -> T:
        """Turn nested keys into flat keys joined with ``separator``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": {"b": torch.zeros(1)}}, [1])
            >>> list(td.flatten_keys().keys())
            ['a.b']
        """
        source: dict[str, Any] = {}
        for key, value in self.items(
            include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
        ):
            flat = key if isinstance(key, str) else separator.join(key)
            if flat in source:
                raise TensorDictKeyError(
                    f"Flattening keys in tensordict causes keys {flat!r} to collide (separator "
                    f"{separator!r}). "
                    "Choose a separator that no key contains."
                )
            source[flat] = value
        out = self._new_dense(source, self.batch_size, self._names_or_none())
        if inplace:
            return self._replace_contents(out)
        return self._written_back_on_exit(out, lambda o: o.unflatten_keys(separator))

    def unflatten_keys(self: T, separator: str = ".", inplace: bool = False) -> T:
        """Split flat keys on ``separator`` into nested tensordicts (inverse of flatten_keys).

        Tensordicts that land on the same key are merged; two entries that land on the same
        key (or an entry on a key another one passes through) raise a ``KeyError``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a.b": torch.zeros(()), "a": {"c": torch.ones(())}})
            >>> sorted(td.unflatten_keys().keys(include_nested=True, leaves_only=True))
            [('a', 'b'), ('a', 'c')]
        """
        out = self.empty()
        for key, value in self._own_items():
            if isinstance(value, TensorDictBase):
                value = value.unflatten_keys(separator)
            place_unflattened(out, tuple(key.split(separator)), value)
        if inplace:
            return self._replace_contents(out)
        return self._written_back_on_exit(out, lambda o: o.flatten_keys(separator))

    def _written_back_on_exit(self, out: Any, inverse: Callable[[Any], Any]) -> Any:
        """``with td.flatten_keys(",") as flat:``: the entries the block sets in ``flat`` reach
        this tensordict on exit (as upstream); leaves are shared, so in-place writes already do."""

        # (``out`` holds this closure: a weak reference to it avoids a reference cycle that would
        # keep ``out``, and the tensors only it holds, alive until the next garbage collection)
        out_ref = weakref.ref(out)

        def write_back() -> None:
            result = out_ref()
            if result is not None and not self.is_locked:
                self.update(inverse(result))

        out._last_op = ("restore", write_back)
        return out

    # ================================================================== copies and conversion
    def empty(
        self: T,
        recurse: bool = False,
        *,
        batch_size: Sequence[int] | None = None,
        device: Any = _MISSING,
        names: Sequence[str] | None = None,
    ) -> T:
        """A tensordict of the same batch size and device with no entries (unlocked).

        With ``recurse=True`` the nested tensordicts are kept (empty), and so are the non-tensor
        entries, as upstream (only tensors are left out). A new ``batch_size`` keeps the names
        of the dims that remain (by position); ``names`` renames the result (and, with
        ``recurse=True``, the leading dims of the nested tensordicts, as the names setter does).

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4], names=["p", "q"])
            >>> td.empty(batch_size=[3]).names, td.empty(names=["x", "y"]).names
            (['p'], ['x', 'y'])
        """
        source: dict[str, Any] = {}
        if recurse:
            for key, value in self._own_items():
                if isinstance(value, TensorDictBase):
                    source[key] = value.empty(recurse=True)
                elif is_non_tensor(value):
                    source[key] = value
        bs = self.batch_size if batch_size is None else as_size(batch_size)
        kept = self._names_or_none()
        if kept is not None and batch_size is not None:  # the names of the dims that remain
            kept = [*kept[: len(bs)], *[None] * (len(bs) - len(kept))]
            kept = kept if any(n is not None for n in kept) else None
        out = self._new_dense(source, bs, kept)
        if device is not _MISSING:
            out._device = torch.device(device) if device is not None else None
        if names is not None:
            out.names = list(names)
        return out  # type: ignore[no-any-return]

    def clone(self: T, recurse: bool = True, **kwargs: Any) -> T:
        """A copy (unlocked). ``recurse=False`` copies the structure but shares the tensors."""
        with recursion_guard("clone"):
            if not recurse:
                return self._copy_structure(set(), ())  # type: ignore[no-any-return]
            return self._apply_leaves(lambda t: t.clone(), keep_non_tensor_copy=True)  # type: ignore[no-any-return]

    def to_lazystack(self, dim: int = 0) -> Any:
        """A :class:`~tensordict.LazyStackedTensorDict` of this tensordict's slices along
        ``dim`` (views: writing into its members writes into this tensordict)."""
        bs = self.batch_size
        d = normalize_dim(dim, len(bs), bs, "to_lazystack")
        return factory.LazyStackedTensorDict(*self.unbind(d), stack_dim=d)

    def _get_sub_tensordict(self, index: Any) -> Any:
        """A view of ``self[index]`` whose writes (new keys included) go into this tensordict."""
        return factory._SubTensorDict(self, index)

    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        """A regular :class:`~tensordict.TensorDict` holding copies of the data in memory.

        Nested tensordicts and tensorclasses are converted too (as upstream): a nested lazy
        stack becomes dense, a tensorclass a tensordict (with ``retain_none=True``, its None
        fields ``NonTensorData`` of None).
        """
        source: dict[str, Any] = {}
        for key, value in self._own_items():
            if isinstance(value, TensorDictBase) or getattr(type(value), "_is_tensorclass", False):
                value = value.to_tensordict(retain_none=retain_none)
            elif hasattr(value, "clone"):  # tensors, non-tensor data, tensorclasses
                value = value.clone()
            source[key] = value
        return factory.TensorDict._new_unsafe(
            source, self.batch_size, self.device, self._names_or_none()
        )

    def contiguous(self: T, *, inplace: bool = False, canonical: bool = False) -> T:
        """A tensordict whose leaves are contiguous in memory (copies where needed;
        ``inplace``: this tensordict holds them; ``canonical``: also copy the leaves that torch
        calls contiguous but whose strides are not the row-major ones of their shape)."""
        result = self._apply_leaves(_canonical if canonical else torch.Tensor.contiguous)
        return self._inplace_result(result, inplace, "contiguous")  # type: ignore[no-any-return]

    def detach(self: T) -> T:
        return keep_lock_of(self, self._apply_leaves(lambda t: t.detach()))  # type: ignore[no-any-return]

    def detach_(self: T) -> T:
        for value in self._tensor_leaves():
            value.detach_()
        return self

    def zero_(self: T) -> T:
        """Fill every tensor with zeros, in place; a nested tensordict zeroes its own (so a
        nested ``TensorDictParams`` does it without autograd, as upstream)."""
        for _, value in self._own_items():
            if getattr(type(value), "_is_tensorclass", False):
                value = value._tensordict
            if isinstance(value, (torch.Tensor, TensorDictBase)):
                value.zero_()
        return self

    def copy(self: T) -> T:
        """A shallow copy (same as ``clone(recurse=False)``)."""
        return self.clone(recurse=False)

    def __copy__(self: T) -> T:
        """``copy.copy(td)`` is :meth:`copy`: new tensordicts over the same tensors, unlocked (as
        upstream; not a pickle round trip)."""
        return self.copy()

    def __deepcopy__(self: T, memo: dict[int, Any] | None = None) -> T:
        """``copy.deepcopy(td)`` is :meth:`clone`: copies of the tensors, unlocked (as
        upstream)."""
        return self.clone()

    def to_dict(self, *, retain_none: bool = True, convert_tensors: bool = False) -> dict[str, Any]:
        """A nested ``dict`` of the entries (non-tensor data as the stored objects)."""
        out: dict[str, Any] = {}
        for key, value in self._own_items():
            if isinstance(value, TensorDictBase):
                out[key] = value.to_dict(convert_tensors=convert_tensors)
            elif isinstance(value, NonTensorData):
                out[key] = value.data
            elif isinstance(value, NonTensorStack):
                out[key] = value.tolist()
            elif getattr(type(value), "_is_tensorclass", False):
                out[key] = value.to_dict()
            else:
                out[key] = value.tolist() if convert_tensors else value
        return out

    @classmethod
    def from_dict(
        cls,
        input_dict: Mapping[str, Any],
        batch_size: Sequence[int] | None = None,
        device: Any = None,
        batch_dims: int | None = None,
        *,
        auto_batch_size: bool | None = None,
        names: Sequence[str] | None = None,
    ) -> Any:
        """Build a tensordict from a nested dict.

        Without ``batch_size``, ``auto_batch_size=True`` (or ``batch_dims``) infers it from the
        leaves; otherwise the batch size is empty.
        """
        if batch_size is not None and batch_dims is not None:
            raise ValueError("give batch_size or batch_dims, not both.")
        td = factory.TensorDict(dict(input_dict), batch_size=batch_size, device=device)
        if batch_size is None and (auto_batch_size or batch_dims is not None):
            td.auto_batch_size_(batch_dims)
        if names is not None:
            td.names = names
        return td

    # ================================================================== misc
    def filter_non_tensor_data(self: T) -> T:
        """A tensordict without the non-tensor entries (recursively)."""
        source = {}
        for key, value in self._own_items():
            if is_non_tensor(value):
                continue
            if isinstance(value, TensorDictBase):
                value = value.filter_non_tensor_data()
            elif getattr(type(value), "_is_tensorclass", False):  # its non-tensor fields: None
                value = type(value)._from_tensordict(value._tensordict.filter_non_tensor_data())
            source[key] = value
        return self._new_dense(source, self.batch_size, self._names_or_none())  # type: ignore[no-any-return]

    # ================================================================== nn.Module parameters
    @classmethod
    def from_module(
        cls,
        module: Any,
        as_module: bool = False,
        lock: bool = False,
        use_state_dict: bool = False,
        filter_empty: bool = True,
    ) -> Any:
        """The parameters and buffers of an ``nn.Module`` as a tensordict (see
        :func:`tensordict.nn.functional_modules.from_module`, whose ``lock`` defaults to True:
        the method's, as upstream, to False)."""
        return factory.from_module(
            module,
            as_module=as_module,
            lock=lock,
            use_state_dict=use_state_dict,
            filter_empty=filter_empty,
        )


# As upstream (whose TensorDictBase subclasses it), a tensordict is a MutableMapping of its keys:
# torch's ``module.load_state_dict(td.flatten_keys("."))`` and client code that dispatches on
# ``isinstance(x, Mapping)`` accept it. (So, as upstream, ``DataLoader(batch_size=None)`` cannot
# pass tensordict samples through: pass ``collate_fn=lambda x: x``.)
MutableMapping.register(TensorDictBase)

__test__ = publish_as("tensordict.base", TensorDictBase)  # upstream's path; methods' examples
