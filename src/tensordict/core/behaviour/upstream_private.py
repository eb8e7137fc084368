"""Private entry points of upstream's ``TensorDictBase`` that client code calls.

TorchRL (and other code written against upstream tensordict 0.15) calls a handful of upstream's
underscore methods directly: ``_fast_apply`` / ``_apply_nest`` (apply with ``out=``,
``call_on_nested=``, ...), ``_exclude``, ``_has_names``, ``_get_names_idx``, the lock helpers.
They are served here, each in a few lines on the public behaviour, so that such code runs
unchanged; new code should use the public methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.core.nontensor.data import is_non_tensor
from tensordict.core.unbatched import is_unbatched
from tensordict.errors import BatchSizeError, DeviceMismatchError

__all__ = ["UpstreamPrivateMixin"]

_KEEP: Any = object()
_MISSING: Any = object()


def _is_collection(value: Any) -> bool:
    return isinstance(value, TensorCollection) or getattr(type(value), "_is_tensorclass", False)


class UpstreamPrivateMixin(TensorCollection):
    """Upstream's private methods that TorchRL calls (see the module documentation)."""

    __slots__ = ()

    def _fast_apply(
        self,
        fn: Callable[..., Any],
        *others: Any,
        batch_size: Any = None,
        device: Any = _KEEP,
        names: Any = _KEEP,
        inplace: bool = False,
        default: Any = _MISSING,
        filter_empty: bool | None = None,
        named: bool = False,
        nested_keys: bool = False,
        call_on_nested: bool = False,
        out: Any = None,
        propagate_lock: bool = False,
        **unused: Any,
    ) -> Any:
        """``apply`` with upstream's extra options: ``call_on_nested`` (``fn`` receives nested
        tensordicts instead of the walk entering them), ``out`` (results written into it in
        place) and ``propagate_lock`` (the result is locked like the source)."""
        if call_on_nested:
            result = self._apply_on_nested(fn, others, batch_size, default, filter_empty)
            if out is not None and out is not result:
                out.update_(result)
                result = out
            if propagate_lock and getattr(self, "is_locked", False) and not inplace:
                result.lock_()
            return result
        # the other options are apply's own (one implementation: OpsMixin.apply)
        kwargs: dict[str, Any] = {"default": default, "filter_empty": filter_empty}
        if device is not _KEEP:
            kwargs["device"] = device
        if names is not _KEEP:
            kwargs["names"] = names
        if out is not None:
            kwargs["out"] = out
        if propagate_lock:
            kwargs["propagate_lock"] = True
        if unused.get("is_leaf") is not None:  # (non-tensor leaves reach fn too, as upstream)
            kwargs["is_leaf"] = unused["is_leaf"]
        if named:
            return self.named_apply(  # type: ignore[attr-defined]
                fn,
                *others,
                nested_keys=nested_keys,
                batch_size=batch_size,
                inplace=inplace,
                **kwargs,
            )
        return self.apply(fn, *others, batch_size=batch_size, inplace=inplace, **kwargs)  # type: ignore[attr-defined]

    _apply_nest = _fast_apply

    def _apply_on_nested(
        self,
        fn: Callable[..., Any],
        others: tuple[Any, ...],
        batch_size: Any,
        default: Any,
        filter_empty: Any,
    ) -> Any:
        """``fn`` on every direct entry, nested tensordicts included (it walks them itself)."""
        source: dict[str, Any] = {}
        for key, value in self._own_items():
            theirs = [
                o._get_str(key, default if default is not _MISSING else None)
                if isinstance(o, TensorCollection)
                else o
                for o in others
            ]
            if isinstance(value, torch.Tensor) or _is_collection(value):
                result = fn(value, *theirs)
                if result is None or (
                    filter_empty and _is_collection(result) and result.is_empty()
                ):
                    continue
                source[key] = result
            else:
                source[key] = value
        new_bs = self.batch_size if batch_size is None else torch.Size(batch_size)
        return self._new_dense(
            source, new_bs, None if batch_size is not None else self._names_or_none()
        )

    def _check_batch_size(self, *, raise_exception: bool = True) -> bool:
        """Whether every entry's shape starts with this tensordict's batch size (nested ones
        checked too); raises ``RuntimeError`` on the first mismatch unless told not to."""
        bs = self.batch_size
        for key, value in self._own_items():
            if is_unbatched(value):
                continue
            nested_ok = not isinstance(value, UpstreamPrivateMixin) or value._check_batch_size(
                raise_exception=raise_exception
            )
            if not nested_ok:
                return False
            shape = getattr(value, "batch_size", None) if _is_collection(value) else None
            shape = shape if shape is not None else getattr(value, "shape", None)
            if shape is not None and tuple(shape[: len(bs)]) != tuple(bs):
                if raise_exception:
                    raise BatchSizeError(
                        f"batch_size are incongruent: entry {key!r} has shape {list(shape)}, "
                        f"which does not start with the batch_size {list(bs)}."
                    )
                return False
        return True

    def _values_list(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        *,
        collapse: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        sorting_keys: list[Any] | None = None,
    ) -> list[Any]:
        """The values as a list (in the order of ``sorting_keys`` when given)."""
        td: Any = self
        if sorting_keys is not None:
            return [td.get(key) for key in sorting_keys]
        return list(td.values(include_nested, leaves_only, is_leaf=is_leaf))

    def _check_device(self, *, raise_exception: bool = True) -> bool:
        """Whether every tensor (nested ones included) is on this tensordict's device (always,
        without a device); raises ``RuntimeError`` on the first stray tensor unless told not
        to."""
        device = self.device
        if device is None:
            return True
        td: Any = self
        for key, value in td.items(True, True, is_leaf=leaf_or_non_tensor):
            if isinstance(value, torch.Tensor) and value.device != device:
                if raise_exception:
                    raise DeviceMismatchError(
                        f"entry {key!r} is on {value.device}, the tensordict on {device}."
                    )
                return False
        return True

    @property
    def _has_non_tensor(self) -> bool:
        """Whether any entry, nested ones included, holds non-tensor data."""
        for _, value in self._own_key_items():
            if is_non_tensor(value):
                return True
            if isinstance(value, UpstreamPrivateMixin) and value._has_non_tensor:
                return True
        return False

    def _sync_all(self) -> None:
        """Wait for the work queued on the accelerator (CUDA, MPS, ...), if one is in use: after
        non-blocking device-to-host copies, before their results are read. Nothing on CPU only.

        Examples:
            >>> from tensordict import TensorDict
            >>> TensorDict()._sync_all()  # no accelerator in use: returns at once
        """
        accelerator = torch.accelerator.current_accelerator(check_available=True)
        if accelerator is None:
            return
        if accelerator.type == "cuda" and not torch.cuda.is_initialized():
            return  # nothing can be queued on a device never initialised
        torch.accelerator.synchronize()

    def _has_names(self) -> bool:
        """Whether any batch dimension is named."""
        return self._names_or_none() is not None

    def _get_names_idx(self, idx: Any) -> list[str | None] | None:
        """The dimension names after indexing with ``idx`` (None when unnamed)."""
        if not self._has_names():
            return None
        return self._index(idx)._names_or_none()  # type: ignore[no-any-return]

    def _exclude(self, *keys: Any, inplace: bool = False, set_shared: bool = True) -> Any:
        return self.exclude(*keys, inplace=inplace)  # type: ignore[attr-defined]

    def _check_unlock(self, *args: Any, **kwargs: Any) -> None:
        """Raise if this tensordict cannot be unlocked (a locked tensordict holds it)."""
        self._check_unlockable()  # type: ignore[attr-defined]

    def _propagate_lock(self, *args: Any, **kwargs: Any) -> None:
        self._set_locked(True)  # type: ignore[attr-defined]

    def _propagate_unlock(self, *args: Any, **kwargs: Any) -> list[Any]:
        self._set_locked(False)  # type: ignore[attr-defined]
        return []

    @property
    def _has_exclusive_keys(self) -> bool:
        """Whether the members of a lazy stack differ in their (nested leaf) keys; False for a
        tensordict that stacks nothing. TorchRL's batched environments ask it."""
        members = getattr(self, "tensordicts", None)
        if not members:
            return False
        first = set(members[0].keys(True, True, is_leaf=leaf_or_non_tensor))
        return any(
            set(td.keys(True, True, is_leaf=leaf_or_non_tensor)) != first for td in members[1:]
        )
