"""``from_dataclass``: a tensorclass from a dataclass type, an instance from a dataclass value."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import Any

import torch

from tensordict.errors import TensorclassDefinitionError
from tensordict.tensorclass.builder import is_tensorclass, tensorclass

__all__ = ["from_dataclass"]


def _copy_fields(source: type) -> dict[str, Any]:
    """A class namespace declaring the fields of the dataclass ``source``."""
    try:
        hints = typing.get_type_hints(source)
    except Exception:
        hints = {}
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {"__annotations__": annotations}
    for f in dataclasses.fields(source):
        annotations[f.name] = hints.get(f.name, f.type)
        if f.default is not dataclasses.MISSING:
            namespace[f.name] = dataclasses.field(default=f.default, kw_only=f.kw_only is True)
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f.name] = dataclasses.field(
                default_factory=f.default_factory, kw_only=f.kw_only is True
            )
        elif f.kw_only is True:
            namespace[f.name] = dataclasses.field(kw_only=True)
    return namespace


def _class_from(
    source: type,
    *,
    inplace: bool,
    frozen: bool,
    autocast: bool,
    nocast: bool,
    shadow: bool,
    tensor_only: bool,
) -> type:
    if is_tensorclass(source):
        return source
    if not dataclasses.is_dataclass(source):
        raise TypeError(
            f"from_dataclass expects a dataclass type or instance, got the class "
            f"{source.__name__}. Decorate it with @dataclasses.dataclass first."
        )
    if inplace:
        target = source
    else:
        namespace = _copy_fields(source)
        namespace["__module__"] = source.__module__
        namespace["__qualname__"] = f"{source.__qualname__}_tc"
        target = type(f"{source.__name__}_tc", (), namespace)
    return tensorclass(  # type: ignore[call-overload, no-any-return]
        target,
        autocast=autocast,
        frozen=frozen,
        nocast=nocast,
        shadow=shadow,
        tensor_only=tensor_only,
    )


def from_dataclass(
    obj: Any,
    *,
    dest_cls: type | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: Sequence[int] | torch.Size | None = None,
    frozen: bool = False,
    autocast: bool = False,
    nocast: bool = False,
    inplace: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    device: torch.device | str | None = None,
) -> Any:
    """A tensorclass made from a dataclass type, or a tensorclass instance from a dataclass value.

    For a type, the result is a new tensorclass ``<Name>_tc`` with the same fields (the type
    itself made a tensorclass with ``inplace=True``; a tensorclass is returned as it is). For an
    instance, the result is an instance of ``dest_cls`` (default: the class made from the
    instance's type) holding the instance's field values.

    Args:
        obj: a dataclass type or instance.
        dest_cls: for an instance, the tensorclass to build.
        auto_batch_size: for an instance, set the batch size to the leading dims shared by all
            entries (exclusive with ``batch_size``).
        batch_dims: with ``auto_batch_size``, at most this many batch dimensions.
        batch_size: for an instance, the batch size of the result.
        frozen: the ``frozen`` option of the made class.
        autocast: the ``autocast`` option of the made class.
        nocast: the ``nocast`` option of the made class.
        inplace: for a type, make the type itself a tensorclass.
        shadow: the ``shadow`` option of the made class.
        tensor_only: the ``tensor_only`` option of the made class.
        device: for an instance, the device of the result.

    Returns:
        A tensorclass (for a type) or a tensorclass instance.

    Raises:
        TypeError: ``obj`` is not a dataclass, or ``auto_batch_size`` with ``batch_size``.

    Examples:
        >>> import dataclasses, torch
        >>> from tensordict.tensorclass import from_dataclass
        >>> @dataclasses.dataclass
        ... class Point:
        ...     xy: torch.Tensor
        ...     label: str = "p"
        >>> PointTC = from_dataclass(Point)
        >>> PointTC.__name__
        'Point_tc'
        >>> p = from_dataclass(Point(torch.zeros(4, 2)), auto_batch_size=True, batch_dims=1)
        >>> p.batch_size, p.label
        (torch.Size([4]), 'p')
    """
    flags = dict(
        frozen=frozen, autocast=autocast, nocast=nocast, shadow=shadow, tensor_only=tensor_only
    )
    if isinstance(obj, type):
        return _class_from(obj, inplace=inplace, **flags)
    if not dataclasses.is_dataclass(obj):
        raise TypeError(
            f"from_dataclass expects a dataclass type or instance, got {type(obj).__name__}."
        )
    if auto_batch_size and batch_size is not None:
        raise TypeError("from_dataclass: auto_batch_size=True and batch_size are exclusive.")
    cls = dest_cls
    if cls is None:
        try:
            cls = _class_from(type(obj), inplace=False, **flags)
        except TensorclassDefinitionError as err:
            raise TypeError(str(err)) from err
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    out = cls(**values, batch_size=batch_size, device=device)
    if auto_batch_size:
        out.auto_batch_size_(batch_dims)
    return out
