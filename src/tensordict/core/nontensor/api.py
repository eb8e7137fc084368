"""The tensordict API of non-tensor entries, and the list type ``td[key]`` gives for stacks.

:class:`~tensordict.NonTensorData` and :class:`~tensordict.NonTensorStack` answer every public
method of :class:`~tensordict.TensorDict` that they do not define themselves, with *one*
implementation: the TensorDict's. Each non-tensor object keeps a *shell*, a tensordict with its
batch size, device and names (for a stack also one entry, ``_pos``, the position of each
element). A method is run on the shell and a tensordict result is turned back into a non-tensor
object: same value with the result's batch size (``NonTensorData``), or the elements picked by
the result's ``_pos`` (``NonTensorStack``). Indexing, shape operations, ``split``/``unbind``,
``gather``, ``masked_select``, ``roll``... thus follow the tensor rules exactly.

Core builds the non-tensor classes below :class:`~tensordict.TensorDict`, which builds on them:
the shell's class is reached through :mod:`tensordict.core.factory`, and so are the functions
of the rooms above that some methods need (lazy ``new_*``, padding, rewriting a saved entry).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from tensordict.core import factory
from tensordict.core.factory import forward

__all__ = [
    "LinkedList",
    "make_shell",
    "same_value",
    "shell_attribute",
]

#: methods never forwarded: they would hand out the shell's content as if it were data
#: (``keys()`` / ``values()`` / ``items()`` are views of no entries, see _NonTensorBase)
_NOT_FORWARDED = frozenset({"get", "set", "keys", "values", "items", "data"})
#: methods run with the entry itself as ``self`` (they write its own layout)
_BORROWED = frozenset({"memmap_", "memmap", "memmap_like", "save", "memmap_refresh_"})


def make_shell(
    batch_size: torch.Size,
    device: torch.device | None,
    names: Any = None,
    entries: dict[str, Any] | None = None,
) -> Any:
    """A tensordict of ``batch_size`` holding ``entries`` (nothing by default)."""
    cls = factory.TensorDict
    names = list(names) if names is not None and any(n is not None for n in names) else None
    return cls._new_unsafe(entries or {}, torch.Size(batch_size), device, names)


def _unwrap(value: Any) -> Any:
    shell = getattr(value, "_tensordict", None) if _is_non_tensor(value) else None
    return value if shell is None else shell


def _is_non_tensor(value: Any) -> bool:
    return getattr(type(value), "_is_non_tensor", False) is True


def shell_attribute(obj: Any, name: str) -> Any:
    """``obj.name`` answered by the shell: a method runs there and its result is re-wrapped.

    Raises:
        AttributeError: the tensordict API has no attribute ``name``.
    """
    if name == "data":  # only reached when the ``data`` property itself raised
        raise AttributeError(
            f"Cannot get the non-unique data of a {type(obj).__name__}. Use .tolist() instead."
        )
    if name.startswith("_") or name in _NOT_FORWARDED or not hasattr(factory.TensorDict, name):
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    if name in _BORROWED:  # storage: the entry itself is written (its own on-disk layout)
        impl = getattr(factory.TensorDict, name)

        def borrowed(*args: Any, **kwargs: Any) -> Any:
            return impl(obj, *args, **kwargs)

        return borrowed
    shell = obj._tensordict
    attr = getattr(shell, name)
    if not callable(attr):
        return attr

    def method(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_unwrap(a) for a in args)
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
        return _rewrap(obj, shell, attr(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"``TensorDict.{name}`` applied to the batch dimensions of this entry."
    return method


def _rewrap(obj: Any, shell: Any, result: Any) -> Any:
    if result is shell:
        return obj
    if isinstance(result, factory.TensorDict) or hasattr(result, "_own_items"):
        return obj._from_shell(result)
    if type(result) in (tuple, list) and result and hasattr(result[0], "_own_items"):
        return type(result)(_rewrap(obj, shell, r) for r in result)
    return result


_MISSING: Any = object()


def same_value(a: Any, b: Any) -> bool:
    """Whether two stored python objects are equal, without failing on array-like values."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        eq = a == b
    except Exception:
        return False
    if isinstance(eq, bool):
        return eq
    try:
        return bool(np.all(np.asarray(eq)))
    except Exception:
        return False


def _object_array(values: Any, shape: Sequence[int] | None = None) -> np.ndarray:
    """Build an object array without numpy descending into list-valued elements."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    if shape is None:
        shape = _nested_shape(values)
    out = np.empty(tuple(shape), dtype=object)
    if out.ndim == 0:
        out[()] = values
        return out
    for idx in np.ndindex(*out.shape):
        v = values
        for i in idx:
            v = v[i]
        out[idx] = v
    return out


def _nested_shape(values: Any) -> list[int]:
    """The dims over which nested lists are regular: a ragged level (lists of different
    lengths, or lists next to other objects) ends the shape, its items become elements."""
    shape: list[int] = []
    level = [values]
    while all(isinstance(v, (list, tuple)) for v in level):
        lengths = {len(v) for v in level}
        if len(lengths) != 1:
            break
        shape.append(lengths.pop())
        if not shape[-1]:
            break
        level = [x for v in level for x in v]
    return shape


def _normalise_size(batch_size: Any) -> torch.Size:
    if batch_size is None:
        return torch.Size([])
    if isinstance(batch_size, int):
        return torch.Size([batch_size])
    return torch.Size(batch_size)


def _full(value: Any, batch_size: Sequence[int]) -> np.ndarray:
    out = np.empty(tuple(batch_size), dtype=object)
    if out.ndim == 0:
        out[()] = value
    else:
        out.fill(value)
    return out


def _device_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    device = kwargs.get("device", _MISSING)
    for a in args:
        if isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):
            device = a
    return device


class _NonTensorBase:
    """What both non-tensor classes share: the shell, its flags, pickling and the forwarded API."""

    __slots__ = ("__dict__", "__weakref__", "_shell")
    _is_non_tensor = True
    #: read by code that lets an entry through batch-size checks (upstream's flag)
    _pass_through = True
    _shell: Any

    def _make_shell(self) -> Any:
        raise NotImplementedError

    @property
    def _tensordict(self) -> Any:
        """The shell: a tensordict with this entry's batch size, device, names and flags."""
        shell = self._shell
        if shell is None:
            shell = self._shell = self._make_shell()
        return shell

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_shell":
            raise AttributeError(name)
        return shell_attribute(self, name)

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        names |= {n for n in dir(type(self._tensordict)) if not n.startswith("_")}
        return sorted(names)

    # -- no entries: as upstream, code that walks any tensor collection's values() passes over
    def keys(self, *args: Any, **kwargs: Any) -> Any:
        """An empty keys view: a non-tensor entry holds a python object, not entries."""
        return make_shell(self.batch_size, None).keys(*args, **kwargs)

    def values(self, *args: Any, **kwargs: Any) -> Any:
        """An empty values view (see :meth:`keys`)."""
        return make_shell(self.batch_size, None).values(*args, **kwargs)

    def items(self, *args: Any, **kwargs: Any) -> Any:
        """An empty items view (see :meth:`keys`)."""
        return make_shell(self.batch_size, None).items(*args, **kwargs)

    def get(self, key: Any, default: Any = None) -> Any:
        """``default`` (None when not given): a non-tensor entry holds no entries. A
        :class:`NonTensorData` answers its object for ``"data"`` (upstream's tensorclass field).

        Examples:
            >>> from tensordict import NonTensorData
            >>> NonTensorData("abc").get("data"), NonTensorData("abc").get("other", 0)
            ('abc', 0)
        """
        return default

    @property
    def dtype(self) -> None:
        """None: python objects have no torch dtype (as upstream, for a stack too)."""
        return None

    # -- new_* (python objects are not zeros or ones: each element repeats the first one) ------
    def new_zeros(self, *size: Any, empty_lazy: bool = False, **kwargs: Any) -> Any:
        """This entry's first value at every element of batch size ``size`` (as upstream's
        ``empty_lazy`` form; python objects have no zero)."""
        return self._new_repeated(size)

    def new_ones(self, *size: Any, empty_lazy: bool = False, **kwargs: Any) -> Any:
        """See :meth:`new_zeros`."""
        return self._new_repeated(size)

    def new_empty(self, *size: Any, empty_lazy: bool = False, **kwargs: Any) -> Any:
        """See :meth:`new_zeros`."""
        return self._new_repeated(size)

    def new_full(self, size: Any, fill_value: Any, **kwargs: Any) -> Any:
        """See :meth:`new_zeros`."""
        return self._new_repeated((size,))

    def _new_repeated(self, size: tuple[Any, ...]) -> Any:
        sizes = size[0] if len(size) == 1 and not isinstance(size[0], int) else size
        return factory.new_like_lazy(self, torch.Size(sizes), "new_empty", (), {})

    # -- state carried by the shell ------------------------------------------------------------
    @property
    def is_locked(self) -> bool:
        return self._shell is not None and bool(self._shell.is_locked)

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def lock_(self) -> Any:
        self._tensordict.lock_()
        return self

    def unlock_(self) -> Any:
        if self._shell is not None:
            self._shell.unlock_()
        return self

    @property
    def _is_shared(self) -> bool:
        if self.__dict__.get("_shared", False):
            return True
        return self._shell is not None and bool(getattr(self._shell, "_is_shared", False))

    @property
    def _is_memmap(self) -> bool:
        if self.__dict__.get("_memmap_parent", False):
            return True
        return self._shell is not None and bool(self._shell._is_memmap)

    def _is_memmaped_from_above(self) -> bool:
        """Whether this entry was read out of a memory-mapped stack (it cannot be updated)."""
        return bool(self.__dict__.get("_memmap_parent", False))

    def _check_updatable(self) -> None:
        if self._is_memmaped_from_above():
            raise RuntimeError(
                "Cannot update a leaf NonTensorDataBase from a memmaped parent NonTensorStack: "
                "its files belong to the stack. Write through the stack instead "
                "(stack[index] = value or stack.update_at_(value, index))."
            )

    def is_shared(self) -> bool:
        return self._is_shared

    pad = forward("tensordict.core.behaviour.padding", "pad")  # None elements in the padding

    def is_memmap(self) -> bool:
        return self._is_memmap

    @property
    def saved_path(self) -> str | None:
        return None if self._shell is None else self._shell._memmap_prefix

    def share_memory_(self) -> Any:
        """Mark the entry shared and lock it (python objects are copied to workers on pickling)."""
        shell = self._tensordict
        try:
            shell._is_shared = True
        except AttributeError:  # a shell class without the flag: keep it here
            self.__dict__["_shared"] = True
        shell.lock_()
        return self

    def _mark_saved(self, directory: str) -> None:
        """Record that the entry is memory-mapped at ``directory`` (and lock it)."""
        shell = self._tensordict
        shell._is_memmap = True
        shell._memmap_prefix = directory
        shell.lock_()

    def _refresh_saved(self) -> None:
        path = self.saved_path
        if path is not None and self._is_memmap:
            factory.rewrite_saved_non_tensor(self, path)  # (a new version of its folder)

    # -- shape ----------------------------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return self.batch_size  # type: ignore[attr-defined, no-any-return]

    @property
    def batch_dims(self) -> int:
        return len(self.batch_size)  # type: ignore[attr-defined]

    ndim = batch_dims

    def dim(self) -> int:
        return len(self.batch_size)  # type: ignore[attr-defined]

    def numel(self) -> int:
        return int(self.batch_size.numel())  # type: ignore[attr-defined]

    def __len__(self) -> int:
        bs = self.batch_size  # type: ignore[attr-defined]
        return bs[0] if bs else 0

    @property
    def names(self) -> list[str | None]:
        if self._shell is None:
            return [None] * self.batch_dims
        return list(self._shell.names)

    @names.setter
    def names(self, value: Any) -> None:
        self._tensordict.names = value

    def _maybe_names(self) -> list[str | None] | None:
        names = self.names
        return names if any(n is not None for n in names) else None

    def is_empty(self) -> bool:
        return False

    def cpu(self) -> Any:
        return self.to("cpu")  # type: ignore[attr-defined]

    def contiguous(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else ~eq

    __hash__ = object.__hash__


class LinkedList(list):  # type: ignore[type-arg]
    """The list ``td[key]`` gives for a :class:`~tensordict.NonTensorStack`.

    Item assignment writes through to the stack it was read from (``td["a"][0] = "x"``); methods
    that change the length (``append``, ``extend``, ...) detach it first (``_td()`` is then None).

    Examples:
        >>> from tensordict import NonTensorStack, TensorDict
        >>> td = TensorDict(a=NonTensorStack("foo", "bar"), batch_size=[2])
        >>> td["a"][0] = "baz"
        >>> td["a"]
        LinkedList(['baz', 'bar'])
    """

    def __init__(self, items: Iterable[Any] = (), stack: Any = None, strong: bool = False) -> None:
        super().__init__(items)
        self._ref: Callable[[], Any] | None = None
        if stack is not None:
            self._ref = (lambda: stack) if strong else weakref.ref(stack)

    def _td(self) -> Any:
        """The stack this list writes to (None once detached)."""
        return None if self._ref is None else self._ref()

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        stack = self._td()
        if stack is not None:
            stack._write_positions(index, value)

    def _detach(self) -> None:
        self._ref = None

    def tolist(self) -> list[Any]:
        """A plain list of the items, as ``numpy.ndarray.tolist`` (upstream's string columns
        read back as arrays; code calling ``.tolist()`` on them works on this list too).

        Examples:
            >>> from tensordict import NonTensorStack, TensorDict
            >>> TensorDict(a=NonTensorStack("x", "y"), batch_size=[2])["a"].tolist()
            ['x', 'y']
        """
        return list(self)

    def append(self, value: Any) -> None:
        self._detach()
        super().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        self._detach()
        super().extend(values)

    def insert(self, index: Any, value: Any) -> None:
        self._detach()
        super().insert(index, value)

    def pop(self, index: Any = -1) -> Any:
        self._detach()
        return super().pop(index)

    def remove(self, value: Any) -> None:
        self._detach()
        super().remove(value)

    def clear(self) -> None:
        self._detach()
        super().clear()

    def __delitem__(self, index: Any) -> None:
        self._detach()
        super().__delitem__(index)

    def __iadd__(self, values: Iterable[Any]) -> LinkedList:  # type: ignore[override, misc]
        self._detach()
        return super().__iadd__(values)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"LinkedList({list.__repr__(self)})"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


# LinkedList is a pytree node, as upstream: tree_map reaches the python objects of a stack
torch.utils._pytree.register_pytree_node(
    LinkedList,
    lambda lst: (list(lst), None),
    lambda values, _: LinkedList(values),
    serialized_type_name="tensordict.utils.LinkedList",
)
