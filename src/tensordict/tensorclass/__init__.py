"""``@tensorclass``: typed dataclasses whose tensor data lives in a TensorDict.

``builder`` builds the class; ``fields`` holds the field spec and the rules that store a value
(default, ``autocast``, ``nocast``); ``access`` reads and writes fields; ``construct`` makes
instances and converts them; ``forwarding`` declares the forwarded TensorDict API in one table;
``printing`` gives the upstream-style repr; ``inherit`` offers the same as a base class,
``TensorClass``.
"""

from tensordict.core.non_tensor import MetaData, NonTensorData, NonTensorStack
from tensordict.tensorclass.attrs import TensorAttrs
from tensordict.tensorclass.builder import is_tensorclass, tensorclass
from tensordict.tensorclass.inherit import TensorClass

__all__ = [
    "MetaData",
    "NonTensorData",
    "NonTensorStack",
    "TensorAttrs",
    "TensorClass",
    "is_tensorclass",
    "tensorclass",
]
