"""``tensordict.tensordict``: the legacy import path of the tensordict classes; re-exports only."""

from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.memmap.tensor import MemoryMappedTensor

__all__ = [
    "LazyStackedTensorDict",
    "MemoryMappedTensor",
    "NonTensorData",
    "NonTensorStack",
    "TensorDict",
    "TensorDictBase",
    "is_tensor_collection",
]
