"""Whole-structure edits upstream code uses: ``clear``, ``popitem``, ``create_nested``,
``split_keys``, ``replace``, ``update_at_``, non-tensor accessors and ``tolist``.

Each is written on the entry primitives of ``entries`` (``set`` / ``del_`` / ``select`` /
indexed assignment), so the lock rules and the validate-then-write guarantee carry over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import torch

from tensordict.core.behaviour.entries import locked_message
from tensordict.core.behaviour.setitem import flat_items
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import NestedKey, key_path, leaf_or_non_tensor, unravel_key
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack, is_non_tensor
from tensordict.errors import LockedError, TensorDictKeyError

__all__ = ["StructureMixin"]

builtins_sorted = sorted  # (the methods take a ``sorted=`` argument, as upstream's)

T = TypeVar("T", bound="StructureMixin")
_MISSING: Any = object()


def _drop_leafless(td: Any) -> Any:
    """Delete (in place) the nested tensordicts of ``td`` that hold no leaf, at any depth."""
    for key, value in list(td.items()):
        if not isinstance(value, TensorCollection) or is_non_tensor(value):
            continue
        _drop_leafless(value)
        if not value._own_keys():
            td.del_(key)
    return td


def _locked(what: str) -> LockedError:
    return LockedError(locked_message(what))


class StructureMixin(TensorCollection):
    """Whole-structure edits on top of the entry primitives."""

    __slots__ = ()

    def stack_tensors(
        self: T, *keys: NestedKey, out_key: NestedKey, dim: int = 0, keep_entries: bool = False
    ) -> T:
        """Stack the tensors under ``keys`` along ``dim`` (a dimension of the tensors) into
        ``out_key``; the source entries are removed unless ``keep_entries``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": torch.ones(3)}, [3])
            >>> td.stack_tensors("a", "b", out_key="ab", dim=-1)["ab"].shape
            torch.Size([3, 2])
            >>> sorted(td.keys())
            ['ab']
        """
        return self._join_tensors(torch.stack, keys, out_key, dim, keep_entries)

    def cat_tensors(
        self: T, *keys: NestedKey, out_key: NestedKey, dim: int = 0, keep_entries: bool = False
    ) -> T:
        """Concatenate the tensors under ``keys`` along ``dim`` into ``out_key``, as
        :meth:`stack_tensors`.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 1), "b": torch.ones(3, 2)}, [3])
            >>> td.cat_tensors("a", "b", out_key="ab", dim=-1)["ab"].shape
            torch.Size([3, 3])
        """
        return self._join_tensors(torch.cat, keys, out_key, dim, keep_entries)

    def cat_from_tensordict(
        self, dim: int = 0, *, sorted: bool | list[Any] | None = None, out: Any = None
    ) -> torch.Tensor:
        """Every leaf tensor concatenated along ``dim`` into one tensor (``sorted``: in sorted
        key order, or in the order of the given keys).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 1), "b": {"c": torch.ones(3, 2)}}, [3])
            >>> td.cat_from_tensordict(dim=1).shape
            torch.Size([3, 3])
        """
        return torch.cat(self._leaves_in_order(sorted), dim, out=out)

    def stack_from_tensordict(
        self, dim: int = 0, *, sorted: bool | list[Any] | None = None, out: Any = None
    ) -> torch.Tensor:
        """Every leaf tensor stacked along a new ``dim`` into one tensor (see
        :meth:`cat_from_tensordict`)."""
        return torch.stack(self._leaves_in_order(sorted), dim, out=out)

    def _leaves_in_order(self, order: bool | list[Any] | None) -> list[torch.Tensor]:
        td: Any = self
        keys = list(td.keys(True, True, is_leaf=leaf_or_non_tensor))
        if isinstance(order, list):
            keys = order
        elif order:
            keys = builtins_sorted(keys, key=lambda k: (k,) if isinstance(k, str) else tuple(k))
        return [v for v in (td.get(k) for k in keys) if isinstance(v, torch.Tensor)]

    def _join_tensors(
        self: T, join: Any, keys: tuple[NestedKey, ...], out_key: NestedKey, dim: int, keep: bool
    ) -> T:
        td: Any = self
        if not keys:
            raise ValueError(
                f"{join.__name__}_tensors(): name at least one key to join into {out_key!r}."
            )
        result = join([td.get(key) for key in keys], dim)
        if self.is_locked:
            raise _locked(f"write {out_key!r}")
        td.set(out_key, result)
        if not keep:
            for key in keys:
                if unravel_key(key) != unravel_key(out_key):
                    td.del_(key)
        return self

    @property
    def depth(self) -> int:
        """How deep the nesting goes. 0 for a flat tensordict, 1 with nested tensordicts whose
        entries are all leaves, ...

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict(a=torch.zeros(1), n={"b": {"c": torch.zeros(1)}}).depth
            2
        """
        td: Any = self
        nested = (
            len(key) - 1
            for key in td.keys(True, True, is_leaf=leaf_or_non_tensor)
            if isinstance(key, tuple)
        )
        return max(nested, default=0)

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry under ``key`` (a tensordict's: its batch size)."""
        td: Any = self
        value = td.get(key)
        shape = getattr(value, "batch_size", None) if not torch.is_tensor(value) else None
        return torch.Size(value.shape if shape is None else shape)

    def clear(self: T) -> T:
        """Remove every entry (not allowed on a locked tensordict)."""
        if self.is_locked:
            raise _locked("clear the tensordict")
        for key in list(self._own_keys()):
            self._del_str(key)
        return self

    def popitem(self) -> tuple[str, Any]:
        """Remove the last inserted top-level entry and return ``(key, value)``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(1), "b": torch.ones(1)}, [1])
            >>> td.popitem()[0], list(td.keys())
            ('b', ['a'])
        """
        keys = self._own_keys()
        if not keys:
            raise TensorDictKeyError("popitem(): the tensordict is empty.")
        td: Any = self
        return keys[-1], td.pop(keys[-1])

    def create_nested(self: T, key: NestedKey) -> T:
        """Set an empty tensordict with this one's batch size (and names) under ``key``."""
        td: Any = self
        path = key_path(key)
        parent = td._parent_for_write(path, create=True) if len(path) > 1 else td
        nested = parent._new_dense({}, parent.batch_size, parent._names_or_none())
        td.set(key, nested)
        return self

    def filter_empty_(self: T) -> T:
        """Remove, in place, every nested tensordict that is empty (once its own are removed).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "n": {"m": {}}}, [2])
            >>> list(td.filter_empty_().keys())
            ['a']
        """
        td: Any = self
        for key, value in list(td._own_items()):
            if getattr(type(value), "_is_tensorclass", False):
                inner = value._tensordict  # (as upstream: a tensorclass whose fields are all
                inner.filter_empty_()  # None or empty is removed too)
                empty = not inner._own_keys() and not any(
                    v is not None for v in getattr(value, "_non_tensordict", {}).values()
                )
            elif isinstance(value, StructureMixin):
                value.filter_empty_()
                empty = not value._own_keys()
            else:
                continue
            if empty:
                if td.is_locked:
                    raise _locked(f"remove the empty entry {key!r}")
                td._del_str(key)
        return self

    def load_(self: T, prefix: Any, **kwargs: Any) -> T:
        """Load what :meth:`save` / ``memmap`` wrote under ``prefix`` into this tensordict."""
        td: Any = self
        td.update(type(td).load_memmap(prefix, **kwargs))
        return self

    def split_keys(
        self,
        *key_sets: Iterable[NestedKey],
        inplace: bool = False,
        default: Any = _MISSING,
        strict: bool = True,
    ) -> tuple[Any, ...]:
        """One tensordict per set of keys, plus one with the remaining keys (nested
        tensordicts left without any leaf are dropped from it, as upstream).

        With ``inplace=True`` the selected keys are removed from this tensordict, which is
        returned last. A missing key raises unless ``strict=False`` (skipped) or a ``default`` is
        given (filled in).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": torch.ones(2), "c": torch.ones(2)}, [2])
            >>> obs, rest = td.split_keys(["a", "b"])
            >>> list(obs.keys()), list(rest.keys())
            (['a', 'b'], ['c'])
        """
        return self._split_keys(key_sets, inplace=inplace, default=default, strict=strict)

    def _split_keys(
        self,
        key_sets: Iterable[Iterable[NestedKey]],
        *,
        inplace: bool,
        default: Any,
        strict: bool,
        prune: bool = True,
    ) -> tuple[Any, ...]:
        """``split_keys``; ``prune``: drop the nested tensordicts left without leaves."""
        td: Any = self
        parts = []
        taken: list[NestedKey] = []
        for keys in key_sets:
            keys = [keys] if isinstance(keys, (str, tuple)) else list(keys)
            present = [k for k in keys if td.get(k, _MISSING) is not _MISSING]
            if strict and default is _MISSING and len(present) < len(keys):
                missing = [k for k in keys if k not in present]
                raise td._missing_key(unravel_key(missing[0]))
            part = td.select(*present)
            if default is not _MISSING:
                for k in keys:
                    if k not in present:
                        part.set(k, default)
            parts.append(part)
            taken += present
        if inplace:
            if td.is_locked:
                raise _locked(f"split keys {taken} out of the tensordict")
            td.exclude(*taken, inplace=True)  # one swap of the contents: all or nothing
            return (*parts, _drop_leafless(td) if prune else td)
        rest = td.exclude(*taken)
        return (*parts, _drop_leafless(rest) if prune else rest)

    def separates(
        self,
        *keys: NestedKey,
        default: Any = _MISSING,
        strict: bool = True,
        filter_empty: bool = True,
    ) -> Any:
        """Remove ``keys`` from this tensordict and return them as a new one (with
        ``filter_empty``, nested tensordicts left without leaves are removed, as upstream).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"obs": torch.zeros(2), "reward": torch.ones(2)}, [2])
            >>> list(td.separates("reward").keys()), list(td.keys())
            (['reward'], ['obs'])
        """
        td: Any = self
        if td.is_locked:
            raise _locked(f"separate {list(keys)}")
        part, _ = td._split_keys(
            [list(keys)], inplace=True, default=default, strict=strict, prune=filter_empty
        )
        return part

    def replace(self: T, *args: Mapping[str, Any], **kwargs: Any) -> T:
        """A shallow copy with some entries replaced (a mapping and/or keyword arguments)."""
        if len(args) > 1:
            raise TypeError(
                f"replace() takes at most one mapping (plus keyword arguments), got {len(args)}."
            )
        td: Any = self
        out = td.copy()
        if args:
            out.update(args[0])
        if kwargs:
            out.update(kwargs)
        return out  # type: ignore[no-any-return]

    def copy_at_(
        self: T, src: Any, idx: Any, non_blocking: bool = False, *, fast: bool = True
    ) -> T:
        """Copy ``src`` into this tensordict at batch index ``idx``, in place.

        ``fast=True`` (the default) takes tensors only: non-tensor data raises; ``fast=False``
        copies those too (as :meth:`update_at_`).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(4)}, [4])
            >>> td.copy_at_(TensorDict({"a": torch.ones(2)}, [2]), slice(0, 2))["a"]
            tensor([1., 1., 0., 0.])
        """
        if fast is None:
            raise TypeError(
                "copy_at_(..., fast=None) is no longer supported: pass fast=True to copy tensors "
                "only, or fast=False to copy non-tensor data too (update_at_ semantics)."
            )
        if fast and getattr(src, "_has_non_tensor", False):
            raise RuntimeError(
                "copy_at_(fast=True) copies tensors only, and the source holds non-tensor data. "
                "Pass fast=False to copy it too."
            )
        return self.update_at_(src, idx)

    def update_at_(
        self: T,
        input_dict_or_td: Mapping[str, Any] | TensorCollection,
        index: Any,
        *,
        keys_to_update: Iterable[NestedKey] | None = None,
    ) -> T:
        """Write the entries of ``input_dict_or_td`` into this tensordict at ``index``, in place.

        All of them are checked before any is written (as ``td[index] = ...``).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3)}, [3])
            >>> td.update_at_({"a": torch.tensor(5.0)}, 1)["a"]
            tensor([0., 5., 0.])
        """
        td: Any = self
        source: Any = input_dict_or_td
        if getattr(type(source), "_is_tensorclass", False):
            source = source._tensordict
        collection = isinstance(source, TensorCollection)
        if collection:
            flat = {
                k: None
                for k in source.keys(
                    include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
                )
            }
        else:
            flat = {unravel_key(path): v for path, v in flat_items(source)}
        keys = list(flat)
        if keys_to_update is not None:
            wanted = {unravel_key(k) for k in keys_to_update}
            keys = [k for k in keys if unravel_key(k) in wanted]
        if not keys:
            return self
        # (membership, not get(): a ragged lazy stack cannot stack its entries, yet takes writes
        # member by member)
        present = {unravel_key(k) for k in td.keys(include_nested=True)}
        missing = [k for k in keys if unravel_key(k) not in present]
        if missing:
            raise td._missing_key(unravel_key(missing[0]))
        if collection:
            values: Any = source.select(*keys)
        else:
            values = {k: flat[k] for k in keys}
        # Written into td itself, not into a select() of it: a non-tensor entry becomes a new
        # NonTensorStack when part of it changes, which a selection would keep to itself.
        td[index] = values
        return self

    # ------------------------------------------------------------------ non-tensor entries
    def get_non_tensor(self, key: NestedKey, default: Any = _MISSING) -> Any:
        """The python object stored under ``key`` (tensors are returned as they are)."""
        td: Any = self
        value = td._get_path(key_path(key), _MISSING)
        if value is _MISSING:
            if default is not _MISSING:
                return default
            raise td._missing_key(unravel_key(key))
        if isinstance(value, NonTensorData):
            return value.data
        if isinstance(value, NonTensorStack):
            return value.tolist()
        return value

    def is_non_tensor(self, key: NestedKey) -> bool:
        """Whether the entry under ``key`` is stored python data (``NonTensorData`` or a stack).

        Raises:
            KeyError: there is no entry under ``key``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(obs=torch.zeros(2), label="cat")
            >>> td.is_non_tensor("label"), td.is_non_tensor("obs")
            (True, False)
        """
        td: Any = self
        value = td._get_path(key_path(key), _MISSING)
        if value is _MISSING:
            raise td._missing_key(unravel_key(key))
        return is_non_tensor(value)

    def set_non_tensor(self: T, key: NestedKey, value: Any) -> T:
        """Store ``value`` under ``key`` as :class:`~tensordict.NonTensorData`, whatever it is."""
        td: Any = self
        td.set(key, NonTensorData(value, batch_size=td.batch_size, device=td.device))
        return self

    def non_tensor_items(self, include_nested: bool = False) -> list[tuple[Any, Any]]:
        """``(key, python object)`` for every non-tensor entry (nested ones too if asked)."""
        td: Any = self
        return [
            (k, td.get_non_tensor(k))
            for k in td.keys(
                include_nested=include_nested, leaves_only=True, is_leaf=leaf_or_non_tensor
            )
            if is_non_tensor(td._get_path(key_path(k), None))
        ]

    # ------------------------------------------------------------------ conversion
    def numpy(self) -> dict[str, Any]:
        """A nested ``dict`` of numpy arrays sharing memory with the entries (CPU only).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2]).numpy()["n"]["b"]
            array([1., 1.], dtype=float32)
        """
        out: dict[str, Any] = {}
        for key, value in self._own_items():
            if getattr(type(value), "_is_tensorclass", False):
                value = value._tensordict
            if isinstance(value, TensorCollection):
                out[key] = value.numpy()  # type: ignore[attr-defined]
            elif isinstance(value, torch.Tensor):
                out[key] = value.numpy()
            elif isinstance(value, NonTensorData):
                out[key] = value.data
            elif isinstance(value, NonTensorStack):
                out[key] = value.tolist()
        return out

    def from_dict_instance(
        self,
        input_dict: Mapping[str, Any],
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        *,
        auto_batch_size: bool | None = None,
        names: Any = None,
    ) -> Any:
        """Like ``from_dict``, taking the types of nested entries from this tensordict: a dict
        under a key where this one holds a tensorclass becomes that tensorclass again (the
        inverse of :meth:`to_dict`); other arguments as ``from_dict``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(2), n=TensorDict(b=torch.ones(2)))
            >>> td.from_dict_instance(td.to_dict(), auto_batch_size=True).batch_size
            torch.Size([2])
        """
        td: Any = self
        entries: dict[str, Any] = {}
        for key, value in input_dict.items():
            current = td._get_str(key, None) if isinstance(key, str) else None
            if isinstance(value, Mapping) and not isinstance(value, TensorCollection):
                if getattr(type(current), "_is_tensorclass", False):
                    value = type(current).from_dict(value)  # type: ignore[union-attr]
                elif isinstance(current, TensorCollection) and not is_non_tensor(current):
                    value = current.from_dict_instance(value)  # type: ignore[attr-defined]
            entries[key] = value
        return type(td).from_dict(
            entries,
            batch_size,
            device,
            batch_dims,
            auto_batch_size=auto_batch_size,
            names=names,
        )

    def tolist(
        self,
        *,
        convert_nodes: bool = True,
        convert_tensors: bool = False,
        tolist_first: bool = False,
        **unused: Any,
    ) -> Any:
        """Nested lists over the batch dimensions, with a dict per element (as ``to_dict``), or
        the element tensordicts themselves with ``convert_nodes=False``.

        Args:
            convert_nodes: elements as dicts (else as tensordicts).
            convert_tensors: tensors as python lists / numbers (needs ``convert_nodes``).
            tolist_first: a nested tensordict with batch dims of its own becomes a list of
                dicts too (else one dict of tensors).

        Raises:
            TypeError: ``convert_tensors`` without ``convert_nodes``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.arange(2)}, [2]).tolist(convert_tensors=True)
            [{'a': 0}, {'a': 1}]
            >>> td = TensorDict(n=TensorDict(a=torch.arange(2), batch_size=[2]))
            >>> td.tolist(tolist_first=True)
            {'n': [{'a': tensor(0)}, {'a': tensor(1)}]}
        """
        if convert_tensors and not convert_nodes:
            raise TypeError(
                "convert_tensors requires convert_nodes to be set to True: tensors are converted "
                "inside the dicts that convert_nodes builds."
            )
        td: Any = self
        if td.batch_size:
            return [
                row.tolist(
                    convert_nodes=convert_nodes,
                    convert_tensors=convert_tensors,
                    tolist_first=tolist_first,
                )
                for row in td.unbind(0)
            ]
        if not convert_nodes:
            return td
        out = td.to_dict(convert_tensors=convert_tensors)
        if tolist_first:
            for key, value in td.items():
                if isinstance(value, TensorCollection) and not is_non_tensor(value):
                    nested: Any = value
                    out[key] = nested.tolist(convert_tensors=convert_tensors, tolist_first=True)
        return out
