"""Modules typed by tensorclasses: ``forward(x: In) -> Out``, convertible to tensordict modules.

A subclass of ``TensorClassModuleBase[In, Out]`` records ``In`` / ``Out`` as ``input_type`` /
``output_type``; :meth:`TensorClassModuleBase.as_td_module` wraps it in a
:class:`TensorClassModuleWrapper`, a tensordict module whose keys are the fields (nested for
nested tensorclasses).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar, get_args, get_origin

from torch import nn

from tensordict.core.dense import TensorDict
from tensordict.nn.common import TensorDictModuleBase
from tensordict.nn.keyword_dispatch import dispatch

__all__ = ["TensorClassModuleBase", "TensorClassModuleWrapper"]

InputClass = TypeVar("InputClass")
OutputClass = TypeVar("OutputClass")


def _is_tensorclass_type(cls: Any) -> bool:
    return isinstance(cls, type) and bool(getattr(cls, "_is_tensorclass", False))


def _field_keys(cls: type) -> list[tuple[str, ...]]:
    """The keys of a tensorclass's fields, nested tensorclass fields expanded."""
    from tensordict.tensorclass.construct import spec_of

    spec = spec_of(cls)
    keys: list[tuple[str, ...]] = []
    for name in spec.order:
        sub = spec.tensorclass_of(name)
        if sub is not None:
            keys.extend((name, *k) for k in _field_keys(sub))
        else:
            keys.append((name,))
    return keys


class TensorClassModuleWrapper(TensorDictModuleBase):
    """A tensordict module around a :class:`TensorClassModuleBase` (see ``as_td_module``)."""

    def __init__(self, module: TensorClassModuleBase[Any, Any]) -> None:
        super().__init__()
        self.training = module.training
        self.tc_module = module
        self.in_keys = _field_keys(module.input_type)
        self.out_keys = _field_keys(module.output_type)

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict: TensorDict, *args: Any, **kwargs: Any) -> TensorDict:
        if args or kwargs:
            warnings.warn(
                f"TensorClassModuleWrapper ignores extra arguments ({len(args)} positional, "
                f"{sorted(kwargs)} by keyword).",
                FutureWarning,
                stacklevel=2,
            )
        input_type = self.tc_module.input_type
        fields = {k[0] for k in _field_keys(input_type)}
        extra = [k for k in tensordict.keys() if k not in fields]  # noqa: SIM118
        if extra:
            tensordict = tensordict.exclude(*extra)
        out = self.tc_module(input_type.from_tensordict(tensordict))  # type: ignore[attr-defined]
        return out.to_tensordict()  # type: ignore[no-any-return]


class TensorClassModuleBase(Generic[InputClass, OutputClass], ABC, nn.Module):
    """A module from one tensorclass to another, declared ``TensorClassModuleBase[In, Out]``.

    Raises:
        ValueError: subclassing ``TensorClassModuleBase`` without type arguments.

    Examples:
        >>> import torch
        >>> from tensordict import TensorClass, TensorDict
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     b: torch.Tensor
        >>> class Sum(TensorClass):
        ...     total: torch.Tensor
        >>> class Add(TensorClassModuleBase[Pair, Sum]):
        ...     def forward(self, x: Pair) -> Sum:
        ...         return Sum(total=x.a + x.b, batch_size=x.batch_size)
        >>> Add().as_td_module()(TensorDict(a=torch.ones(1), b=torch.ones(1)))["total"]
        tensor([2.])
    """

    input_type: type
    output_type: type

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is TensorClassModuleBase:
                args = get_args(base)
                if not args:
                    raise ValueError("Generic input/output types not set in TensorClassModuleBase")
                cls.input_type, cls.output_type = args

    @abstractmethod
    def forward(self, x: Any) -> Any:
        """Compute the output tensorclass from the input one."""

    def __call__(self, x: Any) -> Any:
        return super().__call__(x)

    def as_td_module(self) -> TensorClassModuleWrapper:
        """This module as a tensordict module (both types must be tensorclasses).

        Raises:
            ValueError: the types are not set, or one of them is not a tensorclass.
        """
        in_type = getattr(self, "input_type", None)
        out_type = getattr(self, "output_type", None)
        if not (isinstance(in_type, type) and isinstance(out_type, type)):
            raise ValueError(
                "Generic input/output types not set in TensorClassModuleBase. To convert "
                f"{type(self).__name__}, subclass TensorClassModuleBase[InputClass, OutputClass]."
            )
        if not (_is_tensorclass_type(in_type) and _is_tensorclass_type(out_type)):
            raise ValueError(
                "Only TensorClassModuleBase implementations with both input and output type as "
                "TensorClass can be converted to TensorDictModule"
            )
        return TensorClassModuleWrapper(self)
