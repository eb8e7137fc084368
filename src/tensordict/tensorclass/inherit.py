"""``TensorClass``: the inheritance-based spelling of ``@tensorclass``.

``class Sample(TensorClass): ...`` builds ``Sample`` exactly as ``@tensorclass`` would (the same
:class:`~tensordict.tensorclass.builder.ClassBuilder`), when the class statement ends. Options
come as class keywords (``class Sample(TensorClass, nocast=True)``) or subscripts
(``TensorClass["nocast", "frozen"]``); subclasses inherit them and may override them.
"""

import dataclasses
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, overload

import torch

from tensordict.core.collection import publish_as
from tensordict.errors import TensorclassDefinitionError
from tensordict.tensorclass.access import setattr_
from tensordict.tensorclass.builder import ClassBuilder, api_members

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - python 3.10
    from typing_extensions import dataclass_transform

__all__ = ["TensorClass"]

OPTIONS = ("autocast", "frozen", "nocast", "shadow", "tensor_only")
_Get = TypeVar("_Get")
_Set = TypeVar("_Set")

if TYPE_CHECKING:
    from tensordict.core.behaviour.base import TensorDictBase

    class _Field(Generic[_Get, _Set]):
        """A field typed as a descriptor: the constructor takes ``_Set``, reading gives ``_Get``
        (PEP 681's descriptor-typed fields)."""

        @overload
        def __get__(self, instance: None, owner: Any) -> "_Field[_Get, _Set]": ...
        @overload
        def __get__(self, instance: object, owner: Any) -> _Get: ...
        def __get__(self, instance: Any, owner: Any) -> Any: ...
        def __set__(self, instance: Any, value: _Set) -> None: ...

    @dataclass_transform()
    @dataclasses.dataclass
    class _TypedTensorClass(TensorDictBase):
        """What type checkers see of a tensorclass: the TensorDict API, and the constructor's
        keyword-only arguments after the fields (a dataclass base brings them into the
        ``__init__`` that type checkers write for each subclass)."""

        _: dataclasses.KW_ONLY
        batch_size: _Field[torch.Size, Sequence[int] | torch.Size | int | None] = _Field()  # type: ignore[assignment]
        device: _Field[torch.device | None, torch.device | str | int | None] = _Field()  # type: ignore[assignment]
        names: _Field[list[str | None], Sequence[str | None] | None] = _Field()  # type: ignore[assignment]

else:
    _TypedTensorClass = object


@dataclass_transform()
class TensorClass(_TypedTensorClass):
    """Subclass it to declare a tensorclass; the subclass is built as ``@tensorclass`` builds.

    Examples:
        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Sample(TensorClass):
        ...     obs: torch.Tensor
        ...     label: str = "none"
        >>> s = Sample(obs=torch.zeros(4, 3), batch_size=[4])
        >>> type(s[1:3]).__name__, s[1:3].obs.shape
        ('Sample', torch.Size([2, 3]))
        >>> class Count(TensorClass["nocast", "frozen"]):  # or TensorClass, nocast=True, ...
        ...     n: int
        >>> Count(n=3).n
        3
    """

    #: options of this class and its subclasses (set by ``TensorClass[...]`` and class keywords)
    _tensorclass_options: ClassVar[dict[str, bool]] = {}
    _autocast: ClassVar[bool] = False
    _nocast: ClassVar[bool] = False
    _frozen: ClassVar[bool] = False
    _shadow: ClassVar[bool] = False
    _tensor_only: ClassVar[bool] = False

    def __setattr__(self, name: str, value: Any) -> None:
        # what ``super().__setattr__`` reaches from a subclass's own __setattr__
        setattr_(self, name, value)

    __setattr__.__tensorclass_generated__ = True  # type: ignore[attr-defined]
    #: True on the option-carrying bases ``TensorClass[...]`` makes (they are not built)
    _options_base: ClassVar[bool] = True

    def __class_getitem__(cls, item: str | tuple[str, ...]) -> type:
        names = (item,) if isinstance(item, str) else tuple(item)
        unknown = [n for n in names if n not in OPTIONS]
        if unknown or not names:
            raise TensorclassDefinitionError(
                f"TensorClass[...] takes option names among {list(OPTIONS)}, got "
                f"{list(names)}. Write e.g. TensorClass['nocast', 'frozen']."
            )
        options = {**cls._tensorclass_options, **dict.fromkeys(names, True)}
        name = f"TensorClass[{', '.join(repr(n) for n in names)}]"
        return type(
            name,
            (cls,),
            {
                "_tensorclass_options": options,
                "_options_base": True,
                "__module__": __name__,
                "__qualname__": name,
            },
        )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        options = {k: kwargs.pop(k) for k in OPTIONS if k in kwargs}
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_options_base", False):
            return
        merged = {**cls._tensorclass_options, **{k: bool(v) for k, v in options.items()}}
        cls._tensorclass_options = merged
        cls._options_base = False
        ClassBuilder(
            cls,
            autocast=merged.get("autocast", False),
            frozen=merged.get("frozen", False),
            nocast=merged.get("nocast", False),
            shadow=merged.get("shadow", False),
            tensor_only=merged.get("tensor_only", False),
        ).build()


def _give_base_api(base: type) -> None:
    """Put the tensorclass API on ``base`` itself (where it defines no name of its own), so a
    subclass method that overrides one reaches it with ``super()`` (``super().__getitem__(i)``),
    as upstream. Built subclasses share these members (a subclass's own definitions win)."""
    for name, make in api_members(base.__qualname__):
        if name not in base.__dict__:
            setattr(base, name, make())


_give_base_api(TensorClass)

__test__ = publish_as("tensordict.tensorclass", TensorClass)  # upstream's path; examples
