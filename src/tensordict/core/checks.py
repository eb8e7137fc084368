"""Checks for tests and debugging: compare two tensordicts (``assert_close``) and verify that the
metadata of a tree is consistent (``check_recursive_properties``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from tensordict.core.keys import NestedKey, is_collection_class, key_path, pass_through
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.unbatched import is_unbatched
from tensordict.errors import ShapeMismatchError, TensorDictPropertyError

__all__ = ["assert_close", "check_recursive_properties"]


def _inner(td: Any) -> Any:
    return td._tensordict if getattr(type(td), "_is_tensorclass", False) else td


def _leaves(td: Any, prefix: tuple[str, ...] = ()) -> dict[NestedKey, Any]:
    """The tensors under ``td`` by key; a lazy stack whose members hold an entry with different
    shapes contributes its members' tensors under ``<i>`` path parts instead."""
    node = _inner(td)
    try:
        items = list(node._own_items())
    except ShapeMismatchError:
        out: dict[NestedKey, Any] = {}
        for i, member in enumerate(node.tensordicts):
            out.update(_leaves(member, (*prefix, f"<{i}>")))
        return out
    out = {}
    for key, value in items:
        path = (*prefix, key)
        if isinstance(value, (NonTensorData, NonTensorStack)):
            continue
        if is_collection_class(type(value)):
            out.update(_leaves(value, path))
        elif isinstance(value, torch.Tensor):
            out[path if len(path) > 1 else key] = value
    return out


def _member_pairs(a: Any, b: Any) -> list[tuple[Any, Any]] | None:
    """The pairs of members of two lazy stacks along the same dim with as many members."""
    if not (hasattr(a, "stack_dim") and hasattr(b, "stack_dim")):
        return None
    if a.stack_dim != b.stack_dim or len(a.tensordicts) != len(b.tensordicts):
        return None
    return list(zip(a.tensordicts, b.tensordicts))


def assert_close(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    intersection: bool = False,
    msg: str = "",
    prefix: NestedKey = (),
) -> bool:
    """Assert that two tensordicts (or tensorclasses) have the same keys and close values.

    Tensors are compared with :func:`torch.testing.assert_close` (dtype, shape and device
    included); non-tensor data is not compared.

    Args:
        actual: the tensordict to check.
        expected: the tensordict with the expected values.
        rtol: relative tolerance (``None``: torch's default for the dtype).
        atol: absolute tolerance (``None``: torch's default for the dtype).
        equal_nan: two NaNs are equal.
        intersection: compare only the keys both have (else different keys raise).
        msg: appended to the error message.
        prefix: a key prepended to the keys in error messages.

    Returns:
        ``True`` when the check passes.

    Raises:
        TypeError: an argument is not a tensordict or tensorclass.
        KeyError: the keys differ and ``intersection`` is False.
        AssertionError: two values are not close (the message names the key).

    Examples:
        >>> from tensordict import TensorDict
        >>> a = TensorDict(x=torch.zeros(3))
        >>> assert_close(a, a.clone())
        True
        >>> assert_close(a, a + 1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        AssertionError: key ('x',) does not match, got mse = 1.0000...
    """
    for name, value in (("actual", actual), ("expected", expected)):
        if not is_collection_class(type(value)):
            raise TypeError(
                f"assert_close compares tensordicts or tensorclasses; {name} is a "
                f"{type(value).__name__}."
            )
    pairs = _member_pairs(_inner(actual), _inner(expected))
    if pairs is not None:  # lazy stacks alike: member by member (their entries may be ragged)
        for x, y in pairs:
            assert_close(x, y, rtol, atol, equal_nan, intersection, msg, prefix)
        return True
    a, b = _leaves(actual), _leaves(expected)
    keys = [k for k in a if k in b] if intersection else list(a)
    if not intersection and set(a) != set(b):
        raise KeyError(
            f"the tensordicts have different keys: only in actual "
            f"{sorted(map(str, set(a) - set(b)))}, only in expected "
            f"{sorted(map(str, set(b) - set(a)))}. Pass intersection=True to "
            f"compare the common keys. {msg}".rstrip()
        )
    base = key_path(prefix) if prefix else ()
    for key in keys:
        x, y = a[key], b[key]
        if x.is_nested and y.is_nested:  # jagged sizes are symbols: compare element-wise
            x, y = list(x.unbind()), list(y.unbind())
        try:
            torch.testing.assert_close(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)
        except AssertionError as err:
            full = base + key_path(key)
            same = isinstance(x, torch.Tensor) and x.shape == y.shape
            diff = (x.double() - y.double()) if same else None
            mse = f"{diff.pow(2).mean().sqrt().item():.4f}" if diff is not None else "n/a"
            raise AssertionError(
                f"key {full} does not match, got mse = {mse}\n{err}" + (f"\n{msg}" if msg else "")
            ) from None
    return True


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """(path, parent, child) for every entry under ``node``; lazy stacks expose their members."""
    node = _inner(node)
    members = getattr(node, "tensordicts", None)
    if members is not None:
        for m in members:
            yield from _walk(m, path)
        return
    for key, value in node._own_items():
        yield path + (key,), node, value
        if is_collection_class(type(value)) and not isinstance(
            value, (NonTensorData, NonTensorStack)
        ):
            yield from _walk(value, path + (key,))


def _problems(
    td: Any,
    *,
    batch_size: bool,
    device: bool,
    lock: bool,
    names: bool,
    include_non_tensor: bool,
    include_unbatched: bool,
    strict: bool,
) -> Iterator[str]:
    for path, parent, child in _walk(td, ()):
        if isinstance(child, (NonTensorData, NonTensorStack)) and not include_non_tensor:
            continue
        pbs = parent.batch_size
        if pass_through(child):  # unbatched entries: their batch_size follows the holder's
            own = getattr(child, "batch_size", None)
            if include_unbatched and batch_size and own is not None and tuple(own) != tuple(pbs):
                yield (
                    f"Batch-size mismatch: parent batch_size={pbs}, unbatched entry "
                    f"batch_size={own} at key {path}."
                )
            continue
        cbs = child.shape if isinstance(child, torch.Tensor) else child.batch_size
        if batch_size and not is_unbatched(child) and tuple(cbs[: len(pbs)]) != tuple(pbs):
            yield f"Batch-size mismatch: parent batch_size={pbs}, child shape={cbs} at key {path}."
        cdev = getattr(child, "device", None)
        if device and parent.device is not None and cdev is not None and cdev != parent.device:
            what = "leaf" if isinstance(child, torch.Tensor) else "child"
            yield (
                f"Device mismatch: parent device={parent.device}, {what} device={cdev} at key "
                f"{path}."
            )
        if isinstance(child, (torch.Tensor, NonTensorData, NonTensorStack)):
            continue
        child = _inner(child)
        if lock and (
            (parent.is_locked and not child.is_locked)
            or (strict and parent.is_locked != child.is_locked)
        ):
            yield (
                f"Lock mismatch: parent is_locked={parent.is_locked}, child "
                f"is_locked={child.is_locked} at key {path}."
            )
        pnames = parent._names_or_none()
        cnames = child._names_or_none()
        if names and pnames is not None and list(cnames or [])[: len(pnames)] != list(pnames):
            yield f"Names mismatch: parent names={pnames}, child names={cnames} at key {path}."


def check_recursive_properties(
    tensordict: Any,
    *,
    batch_size: bool = True,
    shape: bool = True,
    device: bool = True,
    lock: bool = True,
    names: bool = True,
    requires_grad: bool | None = None,
    is_shared: bool | None = None,
    is_memmap: bool | None = None,
    allow_none: bool = False,
    include_non_tensor: bool = True,
    include_unbatched: bool = True,
    strict: bool = True,
    raise_exception: bool = True,
) -> bool:
    """Check that every entry of a tree agrees with its parent: batch size, device, lock, names.

    Meant for tests and debugging; each check can be turned off.

    Returns:
        ``True`` when consistent; ``False`` otherwise if ``raise_exception`` is False.

    Raises:
        TypeError: ``tensordict`` is not a tensordict or tensorclass.
        TensorDictPropertyError: an inconsistency (all of them listed), when
            ``raise_exception`` is True.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(3), nested=TensorDict(b=torch.ones(3, 2), batch_size=[3]),
        ...                 batch_size=[3])
        >>> check_recursive_properties(td)
        True
    """
    if not is_collection_class(type(tensordict)):
        raise TypeError(
            f"expected a tensordict or tensorclass instance, got {type(tensordict).__name__}."
        )
    found = list(
        _problems(
            tensordict,
            batch_size=batch_size,
            device=device,
            lock=lock,
            names=names,
            include_non_tensor=include_non_tensor,
            include_unbatched=include_unbatched,
            strict=strict,
        )
    )
    if found and raise_exception:
        raise TensorDictPropertyError("\n".join(found))
    return not found
