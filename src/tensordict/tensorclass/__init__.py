"""``@tensorclass``: typed dataclasses whose tensor data lives in a TensorDict.

``builder`` builds the class; ``fields`` holds the field spec and the rules that store a value
(default, ``autocast``, ``nocast``); ``access`` reads and writes fields; ``construct`` makes
instances and converts them; ``forwarding`` declares the forwarded TensorDict API in one table;
``printing`` gives the upstream-style repr; ``inherit`` offers the same as a base class,
``TensorClass``. ``tensordict.tensorclass`` is also upstream's import path of these names.
"""

from tensordict.core.nontensor.data import (
    LinkedList,
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    NonTensorStack,
    is_non_tensor,
)
from tensordict.tensorclass.attrs import TensorAttrs
from tensordict.tensorclass.builder import is_tensorclass, tensorclass
from tensordict.tensorclass.dataclass import from_dataclass
from tensordict.tensorclass.forwarding import (
    _FALLBACK_METHOD_FROM_TD,
    _FALLBACK_METHOD_FROM_TD_FORCE,
    _FALLBACK_METHOD_FROM_TD_NOWRAP,
    _METHOD_FROM_TD,
)
from tensordict.tensorclass.inherit import TensorClass
from tensordict.tensorclass.shared_values import _from_shared_nontensor  # noqa: F401

__all__ = [
    "_FALLBACK_METHOD_FROM_TD",
    "_FALLBACK_METHOD_FROM_TD_FORCE",
    "_FALLBACK_METHOD_FROM_TD_NOWRAP",
    "_METHOD_FROM_TD",
    "LinkedList",
    "MetaData",
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "TensorAttrs",
    "TensorClass",
    "from_dataclass",
    "is_non_tensor",
    "is_tensorclass",
    "tensorclass",
]
