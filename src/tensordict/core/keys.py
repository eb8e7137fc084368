"""Nested keys: normalisation, and the views returned by ``keys()``, ``values()`` and ``items()``.

A key is a ``str`` or a tuple of ``str`` (possibly nested tuples, flattened on use):
``td["a", "b"]`` and ``td[("a", ("b",))]`` name the same leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Union

import torch

from tensordict.core.collection import TensorCollection
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.errors import KeyTypeError, ShapeMismatchError, TensorDictKeyError

if TYPE_CHECKING:
    from tensordict.core.behaviour.base import TensorDictBase

    NestedKey = Union[str, tuple[Any, ...]]  # noqa: UP007 (a runtime alias, also on 3.10)
else:

    class _NestedKeyMeta(type):
        def __instancecheck__(cls, obj: object) -> bool:
            return is_nested_key(obj)

        def __getitem__(cls, item: Any) -> Any:
            return cls

    class NestedKey(metaclass=_NestedKeyMeta):
        """A key: a ``str`` or a non-empty, possibly nested, tuple of ``str``.

        Usable in annotations and in ``isinstance(key, NestedKey)``.
        """

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            raise TypeError("NestedKey is a type for annotations and isinstance(), not a class.")


#: the separator of flattened nested keys (``flatten_keys``): ``("a", "b")`` -> ``"a.b"``
KEY_SEPARATOR = "."

#: the message of a KeyError for something that is not a key (clients match on it)
GENERIC_NESTED_ERR = (
    "Only NestedKeys are supported: a key must be a string or a non-empty, possibly nested tuple "
    "of strings. Got key {!r}."
)

__all__ = [
    "public_unravel_key",
    "GENERIC_NESTED_ERR",
    "KEY_SEPARATOR",
    "NestedKey",
    "is_key_index",
    "is_nested_key",
    "is_seq_of_nested_key",
    "place_unflattened",
    "key_path",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
    "unravel_keys",
]


def is_nested_key(obj: object) -> bool:
    """Whether ``obj`` is a key: a ``str`` or a non-empty, possibly nested, tuple of ``str``.

    Examples:
        >>> is_nested_key(("a", ("b",))), is_nested_key(("a", 1)), is_nested_key(())
        (True, False, False)
    """
    if isinstance(obj, str):
        return True
    if isinstance(obj, tuple):
        return bool(obj) and all(is_nested_key(part) for part in obj)
    return False


def is_key_index(index: Any) -> bool:
    """Whether ``td[index]`` names an entry (a key) rather than batch elements.

    A tuple is a key when it starts with a ``str``, or when it starts with a tuple and is a
    nested key as a whole (``td[("a", "b"), "c"]`` reads ``("a", "b", "c")``, as upstream).

    Examples:
        >>> is_key_index(("a", "b")), is_key_index((("a", "b"), "c")), is_key_index(((0, 1), 0))
        (True, True, False)
    """
    cls = type(index)
    if cls is str:
        return True
    if cls is not tuple or not index:
        return False
    first = type(index[0])
    return first is str or (first is tuple and is_nested_key(index))


def is_seq_of_nested_key(seq: Any) -> bool:
    """Whether ``seq`` is a key, or a list/tuple (possibly empty) whose items are all keys.

    Examples:
        >>> is_seq_of_nested_key(["a", ("b", "c")]), is_seq_of_nested_key([1])
        (True, False)
    """
    if is_nested_key(seq):
        return True
    return isinstance(seq, (list, tuple)) and all(is_nested_key(k) for k in seq)


def _flatten_tuple(key: tuple[Any, ...], out: list[str]) -> None:
    for part in key:
        if type(part) is str:
            out.append(part)
        elif isinstance(part, tuple):
            _flatten_tuple(part, out)
        elif isinstance(part, str):
            out.append(str(part))
        else:
            raise KeyTypeError(
                GENERIC_NESTED_ERR.format(key) + f" It holds {type(part).__name__} {part!r}: "
                "use strings for every part of a nested key."
            )


def key_path(key: Any) -> tuple[str, ...]:
    """Return a key as a flat tuple of strings.

    Raises:
        KeyTypeError: when a part of the key is not a string, or the key is empty.

    Examples:
        >>> key_path("a")
        ('a',)
        >>> key_path(("a", ("b", "c")))
        ('a', 'b', 'c')
    """
    if type(key) is str:
        return (key,)
    if isinstance(key, tuple):
        out: list[str] = []
        _flatten_tuple(key, out)
        if not out:
            raise KeyTypeError(
                "an empty tuple is not a key. Use a str or a non-empty tuple of str."
            )
        return tuple(out)
    if isinstance(key, str):
        return (str(key),)
    # (upstream's unravel_key says "key should be a Sequence<NestedKey>", which TorchRL's tests
    # match; its getters say GENERIC_NESTED_ERR: both are kept)
    raise KeyTypeError(
        "key should be a Sequence<NestedKey>. "
        + GENERIC_NESTED_ERR.format(key)
        + f" (a {type(key).__name__}). Index batch dimensions with ints/slices/tensors, and "
        "entries with strings."
    )


def unravel_key(key: Any) -> NestedKey:
    """Normalise a key: a one-element tuple becomes its string, nested tuples are flattened.

    Examples:
        >>> unravel_key(("a",))
        'a'
        >>> unravel_key(("a", ("b",)))
        ('a', 'b')
    """
    if type(key) is str:
        return key
    path = key_path(key)
    return path[0] if len(path) == 1 else path


def public_unravel_key(key: Any) -> NestedKey | tuple[()]:
    """:func:`unravel_key` as upstream's public function answers it (``tensordict.unravel_key``):
    a tuple that holds anything but strings (an index such as ``(0, slice(3, 4))``, or an empty
    tuple) gives ``()``, which client code (TorchRL's replay buffers) reads as "not a key".

    Raises:
        KeyTypeError: ``key`` is neither a string nor a tuple.

    Examples:
        >>> public_unravel_key(("a", ("b",)))
        ('a', 'b')
        >>> public_unravel_key((0, slice(3, 4)))
        ()
    """
    if type(key) is str or not isinstance(key, tuple):
        return unravel_key(key)
    return unravel_key(key) if _only_strings(key) else ()


def _only_strings(key: tuple[Any, ...]) -> bool:
    """Whether ``key`` is non-empty and holds only strings and such tuples."""
    return bool(key) and all(
        isinstance(part, str) or (isinstance(part, tuple) and _only_strings(part)) for part in key
    )


def unravel_key_list(keys: Any) -> list[NestedKey]:
    """Normalise a list (or tuple) of keys with :func:`unravel_key`.

    Raises:
        KeyTypeError: when ``keys`` is not a list or tuple, or one of its items is not a key.

    Examples:
        >>> unravel_key_list(["a", ("b",), ("c", ("d",))])
        ['a', 'b', ('c', 'd')]
    """
    if not isinstance(keys, (list, tuple)):
        raise KeyTypeError(
            f"unravel_key_list expects a list or a tuple of keys, got {type(keys).__name__} "
            f"{keys!r}. Wrap a single key in a list."
        )
    return [unravel_key(k) for k in keys]


def unravel_keys(*keys: Any) -> tuple[NestedKey, ...]:
    """Normalise each of the given keys with :func:`unravel_key`.

    Examples:
        >>> unravel_keys("a", ("b", ("c",)))
        ('a', ('b', 'c'))
    """
    return tuple(unravel_key(k) for k in keys)


def unravel_key_to_tuple(key: Any) -> tuple[str, ...]:
    """A key as a flat tuple of strings; ``()`` for anything that is not a key (never raises).

    Examples:
        >>> unravel_key_to_tuple(("a", ("b",)))
        ('a', 'b')
        >>> unravel_key_to_tuple(("a", 1))
        ()
    """
    if type(key) is str:
        return (key,)
    try:
        return key_path(key)
    except KeyTypeError:
        return ()


def is_leaf_default(value: Any) -> bool:
    """Whether a value is a leaf for ``leaves_only`` purposes when no ``is_leaf`` is given.

    As upstream, only what is not a tensor collection is a leaf: tensordicts and tensorclasses
    are walked into, non-tensor data (``NonTensorData``, ``NonTensorStack``) is neither a leaf
    nor walked into, so ``keys(True, True)`` leaves it out. Pass
    ``is_leaf=is_leaf_nontensor`` to list it.

    Examples:
        >>> is_leaf_default(torch.zeros(2)), is_leaf_default(NonTensorData("x"))
        (True, False)
    """
    cls = type(value)
    if isinstance(value, TensorCollection) or getattr(cls, "_is_tensorclass", False):
        return False
    return not issubclass(cls, (NonTensorData, NonTensorStack))


def is_collection_class(cls: type) -> bool:
    """Whether instances of ``cls`` are tensor collections (tensordicts, tensorclasses, non-tensor
    data)."""
    return issubclass(cls, (TensorCollection, NonTensorData, NonTensorStack)) or bool(
        getattr(cls, "_is_tensorclass", False)
    )


def is_non_tensor_class(cls: type) -> bool:
    """Whether ``cls`` is a class of stored python data (``NonTensorData``, ``NonTensorStack``).

    Examples:
        >>> is_non_tensor_class(NonTensorData), is_non_tensor_class(torch.Tensor)
        (True, False)
    """
    return isinstance(cls, type) and issubclass(cls, (NonTensorData, NonTensorStack))


def is_tensorclass_class(cls: type) -> bool:
    """Whether ``cls`` was made by ``@tensorclass`` (or inherits ``TensorClass``), or is
    :class:`NonTensorData` or a subclass (a tensorclass upstream)."""
    if isinstance(cls, type) and issubclass(cls, NonTensorData):
        return True
    return bool(getattr(cls, "_is_tensorclass", False))


def pass_through(data: Any) -> bool:
    """Whether ``data`` is an entry that tensor operations keep as it is (its class sets
    ``_pass_through = True``: metadata, unbatched tensors).

    Examples:
        >>> pass_through(torch.zeros(2))
        False
    """
    return bool(getattr(type(data), "_pass_through", False))


def default_is_leaf(cls: type) -> bool:
    """The default leaf test of upstream's ``keys(is_leaf=...)``, called with an entry's class.

    Anything but a tensor collection is a leaf; non-tensor data is not (so ``leaves_only``
    skips it when this test is passed explicitly).

    Examples:
        >>> default_is_leaf(torch.Tensor), default_is_leaf(NonTensorData)
        (True, False)
    """
    return not is_collection_class(cls)


def is_leaf_nontensor(cls: type) -> bool:
    """A leaf test (called with an entry's class) under which tensors and non-tensor data
    (``NonTensorData``, ``NonTensorStack``) are leaves; other collections and types are not.

    Examples:
        >>> [is_leaf_nontensor(c) for c in (torch.Tensor, NonTensorData, int)]
        [True, True, False]
    """
    return issubclass(cls, (torch.Tensor, NonTensorData, NonTensorStack))


def leaf_or_non_tensor(cls: type) -> bool:
    """An internal leaf test (called with an entry's class) under which everything but a
    tensordict or a tensorclass is a leaf, non-tensor data included.

    For our own walks that must see every stored entry (copying, saving, padding, formats):
    ``keys(True, True)`` without ``is_leaf`` skips non-tensor data, as upstream.

    Examples:
        >>> leaf_or_non_tensor(NonTensorData), leaf_or_non_tensor(torch.Tensor)
        (True, True)
    """
    return not issubclass(cls, TensorCollection) and not getattr(cls, "_is_tensorclass", False)


class _LeavesAsLists:
    """A leaf test that also makes ``items()``/``values()`` of a lazy stack walk each member
    (keys prefixed with the member's index as a string) instead of stacking its leaves."""

    _instances: dict[type, Any] = {}

    def __new__(cls) -> Any:
        if cls not in _LeavesAsLists._instances:
            _LeavesAsLists._instances[cls] = super().__new__(cls)
        return _LeavesAsLists._instances[cls]

    def __bool__(self) -> bool:
        return False

    def __call__(self, cls: type) -> bool:
        return default_is_leaf(cls)


class _LeavesAsListsNonTensor(_LeavesAsLists):
    def __call__(self, cls: type) -> bool:
        return is_leaf_nontensor(cls)


NESTED_TENSORS_AS_LISTS = _LeavesAsLists()
NESTED_TENSORS_AS_LISTS_NONTENSOR = _LeavesAsListsNonTensor()


def _class_leaf_test(is_leaf: Callable[[type], bool]) -> Callable[[Any], bool]:
    """Adapt an upstream-style ``is_leaf`` (called with the entry's class) to a value test."""
    return lambda value: bool(is_leaf(type(value)))


class KeysView:
    """A live view of the keys of a tensordict, like ``dict.keys()``.

    Supports ``in`` (with nested keys when ``include_nested=True``), ``len`` and iteration.
    """

    __slots__ = ("_include_nested", "_is_leaf", "_leaves_only", "_sort", "_td")

    def __init__(
        self,
        td: TensorDictBase,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
        sort: bool = False,
    ) -> None:
        self._td = td
        self._include_nested = include_nested
        self._leaves_only = leaves_only
        self._is_leaf = is_leaf
        self._sort = sort

    def _walk(
        self, keys_only: bool = False, post_order: bool = False
    ) -> Iterator[tuple[NestedKey, Any]]:
        walk = _walk_items(
            self._td,
            (),
            self._include_nested,
            self._leaves_only,
            self._is_leaf,
            keys_only,
            post_order,
        )
        if self._sort:  # ("a.b" order, as upstream's sort=True)
            yield from sorted(walk, key=lambda kv: _sort_key(kv[0]))
        else:
            yield from walk

    def __iter__(self) -> Iterator[NestedKey]:
        # keys list a nested tensordict after its own keys (items and values before them), as
        # upstream does
        for key, _ in self._walk(keys_only=True, post_order=True):
            yield key

    def __len__(self) -> int:
        if not self._include_nested and not self._leaves_only:
            return len(self._td._own_keys())
        return sum(1 for _ in self._walk(keys_only=True))

    def __contains__(self, key: object) -> bool:
        try:
            path = key_path(key)
        except KeyTypeError:
            raise KeyTypeError(
                "TensorDict keys are always strings. Membership checks are only supported for "
                "strings or non-empty tuples of strings (for nested TensorDicts), got "
                f"{type(key).__name__} {key!r}."
            ) from None
        if len(path) > 1 and not self._include_nested:
            return False
        try:
            value = self._td._get_path(path, None)
        except ShapeMismatchError:
            return True  # a lazy stack entry whose members differ in shape: a leaf that exists
        # upstream answers whether the key exists, leaves_only or not (``("next", "obs") in
        # td.keys(True, True)`` is True for a nested tensordict too): client code relies on it
        return value is not None

    def __repr__(self) -> str:
        return (
            f"_TensorDictKeysView({list(self)},\n    include_nested={self._include_nested},\n"
            f"    leaves_only={self._leaves_only})"
        )

    def __eq__(self, other: object) -> bool:
        try:
            return set(self) == set(other)  # type: ignore[call-overload]
        except TypeError:
            return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class ValuesView(KeysView):
    """A view of the values, in the order of :class:`KeysView`."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        for _, value in self._walk():
            yield value

    def __contains__(self, value: object) -> bool:
        return any(v is value for v in self)

    def __repr__(self) -> str:
        return f"_TensorDictValuesView(n={len(self)})"


class ItemsView(KeysView):
    """A view of ``(key, value)`` pairs, in the order of :class:`KeysView`."""

    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[NestedKey, Any]]:  # type: ignore[override]
        yield from self._walk()

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, tuple) or len(item) != 2:
            return False
        key, value = item
        return any(k == key and v is value for k, v in self)

    def __repr__(self) -> str:
        return f"_TensorDictItemsView(keys={[k for k, _ in self]})"


def _sort_key(key: NestedKey) -> str:
    return ".".join(key) if isinstance(key, tuple) else key


def _walk_items(
    td: TensorCollection,
    prefix: tuple[str, ...],
    include_nested: bool,
    leaves_only: bool,
    is_leaf: Callable[[Any], bool] | None,
    keys_only: bool = False,
    post_order: bool = False,
) -> Iterator[tuple[NestedKey, Any]]:
    """Walk the entries; ``keys_only`` lets lazy stacks yield a stand-in instead of stacking;
    ``post_order`` yields a nested tensordict after its entries."""
    leaf_test = is_leaf_default if is_leaf is None else _class_leaf_test(is_leaf)
    if not keys_only and isinstance(is_leaf, _LeavesAsLists) and hasattr(td, "tensordicts"):
        for i, member in enumerate(td.tensordicts):
            yield from _walk_items(
                member, prefix + (str(i),), include_nested, leaves_only, is_leaf, keys_only
            )
        return
    items = td._own_key_items() if keys_only else td._own_items()
    for key, value in items:
        full: NestedKey = prefix + (key,) if prefix else key
        leaf = bool(leaf_test(value))
        yields = not leaves_only or leaf
        if yields and not post_order:
            yield full, value
        inner = value
        if include_nested and not leaf and getattr(type(value), "_is_tensorclass", False):
            inner = value._tensordict  # walk a tensorclass's fields like a nested tensordict
        if include_nested and not leaf and isinstance(inner, TensorCollection):
            yield from _walk_items(
                inner, prefix + (key,), include_nested, leaves_only, is_leaf, keys_only, post_order
            )
        if yields and post_order:
            yield full, value


def _unflatten_collision(path: tuple[str, ...]) -> TensorDictKeyError:
    return TensorDictKeyError(
        f"Unflattening key(s) in tensordict will override an existing for unflattened key "
        f"{path}. Rename one of the entries, or pick a separator that the keys do not use."
    )


def place_unflattened(
    out: Any, path: tuple[str, ...], value: Any, prefix: tuple[str, ...] = ()
) -> None:
    """Put ``value`` at ``path`` of ``out`` (itself at ``prefix``), merging tensordicts and
    refusing to overwrite an entry (``unflatten_keys``).

    Raises:
        TensorDictKeyError: an entry is already at ``path``, or ``path`` runs through a leaf.
    """
    try:
        parent = out._parent_for_write(path, create=True)
    except TensorDictKeyError:  # the path runs through a leaf
        raise _unflatten_collision(prefix + path) from None
    existing = parent._get_str(path[-1], None)
    if existing is None:
        parent._set_str(path[-1], value, validated=True)
    elif isinstance(existing, TensorCollection) and isinstance(value, TensorCollection):
        for key, sub in value._own_items():
            place_unflattened(existing, (key,), sub, prefix + path)
    else:
        raise _unflatten_collision(prefix + path)
