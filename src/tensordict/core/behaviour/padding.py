"""Padding: grow batch dimensions (``pad``), batch variable-length samples (``pad_sequence``),
split them back (``unpad_sequence``), and a ``DataLoader`` ``collate_fn`` (``collate``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.nn import functional as F

from tensordict.core import factory
from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import NestedKey, leaf_or_non_tensor, unravel_key
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.unbatched import is_unbatched, rebatch

if TYPE_CHECKING:
    from tensordict.core.lazy.stack import LazyStackedTensorDict

from tensordict.errors import BatchSizeError, LockedError

__all__ = ["collate", "pad", "pad_sequence", "unpad_sequence"]


def _pad_array(values: np.ndarray, widths: list[tuple[int, int]]) -> np.ndarray:
    """Pad an object array with ``None`` (negative widths crop, as ``F.pad``)."""
    crop = tuple(slice(max(-a, 0), n - max(-b, 0)) for n, (a, b) in zip(values.shape, widths))
    values = values[crop]
    grow = [(max(a, 0), max(b, 0)) for a, b in widths]
    shape = tuple(n + a + b for n, (a, b) in zip(values.shape, grow))
    out = np.full(shape, None, dtype=object)
    inner = tuple(slice(a, a + n) for n, (a, _) in zip(values.shape, grow))
    out[inner] = values
    return out


def _pad_widths(tensordict: Any, pad_size: Sequence[int]) -> list[tuple[int, int]]:
    """``pad_size`` as one ``(before, after)`` pair per batch dimension."""
    if len(pad_size) % 2:
        raise RuntimeError(
            f"pad_size must have an even number of dimensions (before/after pairs), got "
            f"{list(pad_size)}."
        )
    ndim = tensordict.batch_dims
    if len(pad_size) > 2 * ndim:
        raise RuntimeError(
            f"pad_size {list(pad_size)} pads {len(pad_size) // 2} dimensions, but the tensordict "
            f"has {ndim} batch dimensions."
        )
    widths = [(int(pad_size[2 * i]), int(pad_size[2 * i + 1])) for i in range(len(pad_size) // 2)]
    return widths + [(0, 0)] * (ndim - len(widths))


def _check_widths(batch_size: torch.Size, widths: list[tuple[int, int]]) -> None:
    """``safe=True``: refuse a crop larger than a batch dim before anything is changed."""
    for dim, (n, (a, b)) in enumerate(zip(batch_size, widths)):
        if n + a + b < 0:
            raise BatchSizeError(
                f"Pad ({a}, {b}) on batch dim {dim} (size {n}) would produce a negative output "
                f"size ({n + a + b}); negative pads crop, by at most the size of the dim."
            )


def _pad_non_tensor(value: Any, widths: list[tuple[int, int]], inplace: bool) -> Any:
    """A non-tensor entry padded with ``None``: always a stack (``inplace`` keeps the identity
    of a stack, a ``NonTensorData`` cannot stay one)."""
    padded = _pad_array(value.to_array(), widths)
    if not inplace:
        return NonTensorStack.from_array(padded, value.device)
    if not isinstance(value, NonTensorStack):
        raise RuntimeError(
            f"pad(..., inplace=True) cannot preserve the identity of a {type(value).__name__} "
            "input since the padded result is a NonTensorStack. Use inplace=False instead."
        )
    if value.is_locked:
        raise LockedError(
            "pad(..., inplace=True): this NonTensorStack is locked (or memory-mapped). Unlock "
            "it with unlock_(), or use inplace=False."
        )
    value._values = padded
    value._shell = None  # its batch size and positions described the old values
    return value


def pad(
    tensordict: Any,
    pad_size: Sequence[int],
    value: float = 0.0,
    inplace: bool = False,
    safe: bool = True,
) -> Any:
    """Pad every entry along the batch dimensions with a constant (``td.pad(pad_size)``).

    Args:
        tensordict: the tensordict (or tensorclass instance) to pad.
        pad_size: ``(dim0_before, dim0_after, dim1_before, ...)``, from the FIRST batch dimension
            (unlike :func:`torch.nn.functional.pad`); even length, at most twice the batch dims.
        value: the value of the padded elements (non-tensor entries hold ``None`` there).
        inplace: replace the leaves of ``tensordict`` and return it (non-tensor stacks are
            padded in place, keeping their identity).
        safe: check, before anything is changed, that no negative pad crops more than a
            batch dimension holds.

    Raises:
        RuntimeError: ``pad_size`` of odd length, or longer than twice the batch dimensions; a
            crop larger than a dimension (with ``safe``); ``inplace`` on a ``NonTensorData``
            (its padded form is a ``NonTensorStack``).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.ones(2, 3), batch_size=[2])
        >>> out = pad(td, [1, 0], value=-1)
        >>> out.batch_size, out["a"][:, 0]
        (torch.Size([3]), tensor([-1.,  1.,  1.]))
    """
    widths = _pad_widths(tensordict, pad_size)
    if safe:
        _check_widths(tensordict.batch_size, widths)
    if isinstance(tensordict, (NonTensorData, NonTensorStack)):
        return _pad_non_tensor(tensordict, widths, inplace)
    ndim = tensordict.batch_dims
    if isinstance(
        tensordict, factory.LazyStackedTensorDict
    ):  # members padded, filled members added

        def pad_member(member: Any, member_pad: list[int], in_place: bool) -> Any:
            return pad(member, member_pad, value, inplace=in_place, safe=safe)

        return factory.pad_lazy(tensordict, widths, value, inplace, pad_member)
    new_bs = torch.Size(n + a + b for n, (a, b) in zip(tensordict.batch_size, widths))

    def pad_leaf(x: torch.Tensor) -> torch.Tensor:
        spec: list[int] = [0, 0] * (x.ndim - ndim)
        for a, b in reversed(widths):
            spec += [a, b]
        return F.pad(x, spec, value=value)

    target = tensordict._tensordict if getattr(type(tensordict), "_is_tensorclass", False) else None
    td = target if target is not None else tensordict
    out = td.empty(batch_size=new_bs) if not inplace else td
    for key, leaf in list(
        td.items(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
    ):
        if is_unbatched(leaf):  # exempt from the batch dims: only its batch size changes
            holder = td if isinstance(key, str) or len(key) == 1 else td.get(key[:-1])
            padded: Any = rebatch(leaf, new_bs + holder.batch_size[ndim:])
        elif isinstance(leaf, torch.Tensor):
            padded = pad_leaf(leaf)
        else:
            padded = _pad_non_tensor(leaf, widths, inplace and isinstance(leaf, NonTensorStack))
        if inplace:
            _replace_leaf(td, key, padded, new_bs)
        else:
            out.set(key, padded)
    if inplace:
        _set_batch_sizes(td, new_bs)
        return tensordict
    if target is not None:
        return _rewrap(tensordict, out)
    return out


def _rewrap(template: Any, td: TensorDictBase) -> Any:
    """A tensorclass instance like ``template`` (same non-tensor fields) around ``td``."""
    return type(template)._from_tensordict(td, getattr(template, "_non_tensordict", None))


def _replace_leaf(td: TensorDictBase, key: NestedKey, value: Any, new_bs: torch.Size) -> None:
    path = (key,) if isinstance(key, str) else tuple(key)
    parent = td
    for part in path[:-1]:
        parent = parent._get_str(part, None)
    parent._set_str(path[-1], value, validated=True)


def _set_batch_sizes(td: TensorDictBase, new_bs: torch.Size) -> None:
    n = len(new_bs)
    for _, sub in td.items(include_nested=True):
        if isinstance(sub, TensorDictBase):
            object.__setattr__(sub, "_batch_size", torch.Size([*new_bs, *sub.batch_size[n:]]))
    object.__setattr__(td, "_batch_size", new_bs)


def _check_side(padding_side: str) -> None:
    if padding_side not in ("left", "right"):
        raise ValueError(f'padding_side must be "left" or "right", got {padding_side!r}.')


def _pad_to(x: torch.Tensor, dim: int, length: int, value: Any, left: bool) -> torch.Tensor:
    missing = length - x.shape[dim]
    if missing == 0:
        return x
    spec = [0, 0] * (x.ndim - 1 - dim) + ([missing, 0] if left else [0, missing])
    if x.dtype is torch.bool:
        return F.pad(x.to(torch.uint8), spec, value=int(bool(value))).bool()
    return F.pad(x, spec, value=value)


def _valid_mask(lengths: list[int], length: int, left: bool) -> torch.Tensor:
    pos = torch.arange(length)
    lens = torch.tensor(lengths).unsqueeze(-1)
    return pos >= length - lens if left else pos < lens


def _mask(
    lengths: list[int], length: int, left: bool, batch_dim: int | None, bs: torch.Size
) -> torch.Tensor:
    """The valid positions of one entry: the output's batch size when a batch dimension is
    padded, else the output's batch size followed by the padded length."""
    mask = _valid_mask(lengths, length, left)
    n = len(lengths)
    if batch_dim is not None:
        shape = [n, *[1] * batch_dim, length, *[1] * (len(bs) - batch_dim - 1)]
        return mask.reshape(shape).expand(n, *bs).contiguous()
    return mask.reshape(n, *[1] * len(bs), length).expand(n, *bs, length).contiguous()


def pad_sequence(
    list_of_tensordicts: Sequence[Any],
    pad_dim: int = 0,
    padding_value: float | Mapping[NestedKey, float] = 0.0,
    out: Any = None,
    return_mask: bool | NestedKey = False,
    padding_side: str = "right",
) -> Any:
    """Pad tensordicts to a common size along ``pad_dim`` and stack them along a new first dim.

    Args:
        list_of_tensordicts: tensordicts with the same keys.
        pad_dim: the dimension of each entry to pad, counted from its first dimension (batch
            dimensions included); if it is a batch dimension the batch size is padded too.
        padding_value: the padded value, or a mapping from key to value (others get ``0``).
        out: a tensordict to write the result into.
        return_mask: ``True`` adds a ``"masks"`` entry (a key: stores it there) marking the
            valid positions of each entry.
        padding_side: ``"right"`` (after the data) or ``"left"``.

    Raises:
        RuntimeError: an empty list, or entry shapes that differ outside ``pad_dim``.
        KeyError: a key of ``padding_value`` that names no entry.
        ValueError: ``padding_side`` is neither ``"left"`` nor ``"right"``.

    Examples:
        >>> from tensordict import TensorDict
        >>> tds = [TensorDict(a=torch.ones(n), batch_size=[n]) for n in (2, 3)]
        >>> out = pad_sequence(tds, return_mask=True)
        >>> out.batch_size, out["a"][0], out["masks", "a"][0]
        (torch.Size([2, 3]), tensor([1., 1., 0.]), tensor([ True,  True, False]))
    """
    _check_side(padding_side)
    tds = list(list_of_tensordicts)
    if not tds:
        raise RuntimeError("pad_sequence needs at least one tensordict, got an empty list.")
    template = tds[0] if getattr(type(tds[0]), "_is_tensorclass", False) else None
    if template is not None:
        if return_mask:
            raise RuntimeError("return_mask is not supported for tensorclass inputs.")
        tds = [td._tensordict for td in tds]
    left = padding_side == "left"
    bs = tds[0].batch_size
    on_batch = 0 <= pad_dim < len(bs)
    keys = list(tds[0].keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor))
    values = padding_value if isinstance(padding_value, Mapping) else None
    if values is not None:
        known = {unravel_key(k) for k in keys}
        for k in values:
            if unravel_key(k) not in known:
                raise KeyError(f"padding_value names {k!r}, which is not an entry of the inputs.")
        values = {unravel_key(k): v for k, v in values.items()}
    lengths: list[int] = []
    if on_batch:
        lengths = [td.batch_size[pad_dim] for td in tds]
        bs = torch.Size([*bs[:pad_dim], max(lengths), *bs[pad_dim + 1 :]])
    result = factory.TensorDict(batch_size=[len(tds), *bs], device=tds[0].device)
    masks = factory.TensorDict(batch_size=result.batch_size)
    for key in keys:
        entries = [td.get(key) for td in tds]
        fill = values.get(key, 0) if values is not None else padding_value
        if not isinstance(entries[0], torch.Tensor):
            result.set(key, _stack_non_tensor(entries, pad_dim if on_batch else None, bs, left))
            continue
        dim = pad_dim if pad_dim >= 0 else entries[0].ndim + pad_dim
        lens = [e.shape[dim] for e in entries]
        length = max(lens)
        try:
            stacked = torch.stack([_pad_to(e, dim, length, fill, left) for e in entries])
        except RuntimeError as err:
            raise RuntimeError(
                f"pad_sequence: the entries {key!r} differ in shape outside pad_dim={pad_dim}: "
                f"{[list(e.shape) for e in entries]}."
            ) from err
        result.set(key, stacked)
        if return_mask:
            masks.set(key, _mask(lens, length, left, pad_dim if on_batch else None, bs))
    if return_mask:
        result.set("masks" if return_mask is True else return_mask, masks)
    if out is not None:
        out.update(result)
        return out
    if template is not None:
        return _rewrap(template, result)
    return result


def _stack_non_tensor(entries: list[Any], pad_dim: int | None, bs: torch.Size, left: bool) -> Any:
    arrays = []
    for e in entries:
        arr = e.to_array() if isinstance(e, (NonTensorData, NonTensorStack)) else None
        if arr is None:
            arr = np.empty((), dtype=object)
            arr[()] = e
        if pad_dim is not None:
            missing = bs[pad_dim] - arr.shape[pad_dim]
            widths = [(0, 0)] * arr.ndim
            widths[pad_dim] = (missing, 0) if left else (0, missing)
            arr = _pad_array(arr, widths)
        arrays.append(arr)
    return NonTensorStack.from_array(np.stack(arrays), entries[0].device)


def unpad_sequence(
    padded: TensorDictBase,
    mask: TensorDictBase | torch.Tensor | None = None,
    *,
    pad_dim: int = 0,
) -> LazyStackedTensorDict:
    """Split a batch made by :func:`pad_sequence` back into its variable-length samples.

    Args:
        padded: the padded batch, samples along its first dimension.
        mask: the valid positions: a tensordict of masks as ``pad_sequence`` builds, or a boolean
            tensor ``[len(padded), max_len]`` for every entry. ``None`` reads the ``"masks"``
            entry of ``padded`` (and drops it from the result).
        pad_dim: the ``pad_dim`` given to :func:`pad_sequence`.

    Raises:
        ValueError: no batch dimension, no mask, a mask of the wrong shape, or valid positions
            that are not one contiguous run per row.

    Examples:
        >>> from tensordict import TensorDict
        >>> tds = [TensorDict(a=torch.arange(n)) for n in (2, 3)]
        >>> back = unpad_sequence(pad_sequence(tds, return_mask=True))
        >>> back[0]["a"], back[1]["a"]
        (tensor([0, 1]), tensor([0, 1, 2]))
    """
    if not padded.batch_size:
        raise ValueError("unpad_sequence needs a padded tensordict with a batch dimension.")
    if mask is None:
        mask = padded.get("masks", None)
        if mask is None:
            raise ValueError(
                'unpad_sequence: no mask given and the tensordict has no "masks" entry. Pass '
                "return_mask=True to pad_sequence, or give the mask."
            )
        padded = padded.exclude("masks")
    n = padded.batch_size[0]
    if isinstance(mask, torch.Tensor) and (mask.ndim != 2 or mask.shape[0] != n):
        raise ValueError(
            f"unpad_sequence: a tensor mask must have shape [{n}, max_len], got {list(mask.shape)}."
        )
    on_batch = 0 <= pad_dim < padded.batch_dims - 1
    samples = []
    for i in range(n):
        row = padded[i]
        sample_mask = mask[i] if isinstance(mask, torch.Tensor) else None
        sample = row.empty() if not on_batch else None
        sizes: dict[NestedKey, tuple[int, int]] = {}
        for key, value in row.items(
            include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
        ):
            m = sample_mask if sample_mask is not None else mask[i].get(key, None)  # type: ignore[union-attr]
            if m is None:
                if isinstance(value, torch.Tensor):
                    raise KeyError(f"unpad_sequence: the mask tensordict has no mask for {key!r}.")
                sizes[key] = (-1, -1)
                continue
            sizes[key] = _run(m, pad_dim, key)
        samples.append(_cut(row, sizes, pad_dim, on_batch, sample))
    return factory.LazyStackedTensorDict(*samples, stack_dim=0)


def _run(mask: torch.Tensor, pad_dim: int, key: NestedKey) -> tuple[int, int]:
    """The (start, stop) of the valid positions along the padded dimension of one sample."""
    flat = mask.reshape(-1, mask.shape[-1]).any(0) if mask.ndim > 1 else mask
    if mask.ndim > 1 and pad_dim < mask.ndim - 1:
        axes = tuple(d for d in range(mask.ndim) if d != pad_dim)
        flat = mask.any(dim=axes) if axes else mask
    idx = torch.nonzero(flat).flatten().tolist()
    if not idx:
        return (0, 0)
    start, stop = idx[0], idx[-1] + 1
    if stop - start != len(idx):
        raise ValueError(f"unpad_sequence: the valid positions of {key!r} are not contiguous.")
    return start, stop


def _cut(
    row: TensorDictBase,
    sizes: dict[NestedKey, tuple[int, int]],
    pad_dim: int,
    on_batch: bool,
    sample: Any,
) -> TensorDictBase:
    if on_batch:
        runs = [r for r in sizes.values() if r != (-1, -1)]
        start, stop = runs[0] if runs else (0, row.batch_size[pad_dim])
        index = (slice(None),) * pad_dim + (slice(start, stop),)
        return row[index]
    for key, (start, stop) in sizes.items():
        value = row.get(key)
        if start == -1:
            sample.set(key, value)
            continue
        dim = pad_dim if pad_dim >= 0 else value.ndim + pad_dim
        sample.set(key, value.narrow(dim, start, stop - start))
    return sample


def collate(
    batch: Any,
    *,
    pad_keys: Mapping[NestedKey, float] | None = None,
    nested_keys: Sequence[NestedKey] | None = None,
    mask_key: NestedKey | None = None,
) -> Any:
    """A ``collate_fn`` for :class:`torch.utils.data.DataLoader` over tensordict samples.

    Tensordicts and tensorclasses are stacked densely when they agree (lazily otherwise),
    tensors with :func:`torch.stack`, mappings and tuples entry by entry; anything else goes
    through :func:`torch.utils.data.default_collate`. A batch that is not a non-empty list is
    returned as is.

    Args:
        batch: the samples.
        pad_keys: entries to pad along their first dimension (key -> padding value).
        nested_keys: entries to stack as jagged nested tensors.
        mask_key: where to store the masks of the ``pad_keys`` entries.

    Raises:
        ValueError: ``mask_key`` without ``pad_keys``, or a key both padded and nested.
        KeyError: a sample without an entry of ``pad_keys`` / ``nested_keys``.

    Examples:
        >>> from tensordict import TensorDict
        >>> out = collate([TensorDict(a=torch.zeros(3)), TensorDict(a=torch.ones(3))])
        >>> out.batch_size
        torch.Size([2])
        >>> out = collate(
        ...     [TensorDict(a=torch.ones(n)) for n in (1, 2)], pad_keys={"a": -1}, mask_key="m"
        ... )
        >>> out["a"], out["m", "a"]
        (tensor([[ 1., -1.],
                [ 1.,  1.]]), tensor([[ True, False],
                [ True,  True]]))
    """
    if not isinstance(batch, list) or not batch:
        return batch
    first = batch[0]
    if is_tensor_collection(first) and not isinstance(first, (NonTensorData, NonTensorStack)):
        if pad_keys or nested_keys:
            return _collate_special(batch, pad_keys or {}, list(nested_keys or ()), mask_key)
        if mask_key is not None:
            raise ValueError("collate: mask_key needs pad_keys.")
        return factory.maybe_dense_stack(batch)
    if isinstance(first, torch.Tensor):
        return torch.stack(batch)
    kwargs: dict[str, Any] = {
        "pad_keys": pad_keys,
        "nested_keys": nested_keys,
        "mask_key": mask_key,
    }
    if isinstance(first, Mapping):
        return {k: collate([s[k] for s in batch], **kwargs) for k in first}
    if isinstance(first, tuple):
        parts = [collate([s[i] for s in batch], **kwargs) for i in range(len(first))]
        return type(first)(*parts) if hasattr(first, "_fields") else tuple(parts)
    from torch.utils.data import default_collate

    return default_collate(batch)


def _collate_special(
    batch: list[Any],
    pad_keys: Mapping[NestedKey, float],
    nested_keys: list[NestedKey],
    mask_key: NestedKey | None,
) -> Any:
    if mask_key is not None and not pad_keys:
        raise ValueError("collate: mask_key needs pad_keys.")
    padded = {unravel_key(k) for k in pad_keys}
    nested = [unravel_key(k) for k in nested_keys]
    both = padded.intersection(nested)
    if both:
        raise ValueError(f"collate: keys {sorted(map(str, both))} are both padded and nested.")
    if pad_keys and any(s.batch_size for s in batch):
        raise ValueError("collate: pad_keys needs samples with an empty batch size.")
    template = batch[0] if getattr(type(batch[0]), "_is_tensorclass", False) else None
    tds = [s._tensordict if template is not None else s for s in batch]
    special = list(padded) + nested
    for i, td in enumerate(tds):
        for key in special:
            if td.get(key, None) is None:
                raise KeyError(f"collate: sample {i} has no entry {key!r}.")
    rest = factory.maybe_dense_stack([td.exclude(*special) for td in tds])
    for key in nested:
        rest.set(
            key, torch.nested.as_nested_tensor([td.get(key) for td in tds], layout=torch.jagged)
        )
    if pad_keys:
        sub = [td.select(*padded) for td in tds]
        values = {k: v for k, v in pad_keys.items()}
        out = pad_sequence(sub, padding_value=values, return_mask=mask_key or False)
        for key in out.keys(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
            rest.set(key, out.get(key))
    if template is not None:
        return _rewrap(template, rest)
    return rest


def _default_collate_entry(batch: Any, *, collate_fn_map: Any = None) -> Any:
    """torch's ``default_collate`` entry for tensordicts and tensorclasses: :func:`collate`."""
    return collate(list(batch))


def _register_default_collate() -> None:
    """As upstream, ``torch.utils.data.default_collate`` stacks tensordict samples (its
    ``Mapping`` rule would rebuild them key by key, and a tensordict is a Mapping)."""
    from torch.utils.data._utils.collate import default_collate_fn_map

    default_collate_fn_map.setdefault(TensorCollection, _default_collate_entry)


_register_default_collate()
