"""tensordict: dictionaries of tensors that share batch dimensions and behave like one tensor.

Memory-mapped tensordicts keep datasets on disk; ``map_iter`` / ``map`` stream them through a
function in worker processes.
"""

from tensordict.core.base import TensorDictBase, is_tensor_collection
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, unravel_key, unravel_key_list
from tensordict.core.lazy_stack import LazyStackedTensorDict
from tensordict.core.non_tensor import MetaData, NonTensorData, NonTensorStack
from tensordict.core.typed import TypedTensorDict
from tensordict.core.unbatched import UnbatchedTensor
from tensordict.memmap.tensor import MemoryMappedTensor
from tensordict.nn.functional_modules import from_module, from_modules
from tensordict.nn.params import TensorDictParams
from tensordict.parallel.worker import WorkerInfo, get_worker_info
from tensordict.tensorclass import TensorAttrs, TensorClass, is_tensorclass, tensorclass

__version__ = "0.16.0.dev0"

__all__ = [
    "LazyStackedTensorDict",
    "MemoryMappedTensor",
    "MetaData",
    "NestedKey",
    "NonTensorData",
    "NonTensorStack",
    "TensorAttrs",
    "TensorClass",
    "TensorDict",
    "TensorDictBase",
    "TensorDictParams",
    "TypedTensorDict",
    "UnbatchedTensor",
    "WorkerInfo",
    "from_module",
    "from_modules",
    "get_worker_info",
    "is_tensor_collection",
    "is_tensorclass",
    "tensorclass",
    "unravel_key",
    "unravel_key_list",
]
