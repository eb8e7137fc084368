"""``tensordict.base``: upstream's import path of ``TensorDictBase`` and its helpers; re-exports
only, each from its home."""

import torch

from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.behaviour.base import is_tensor_collection as _is_tensor_collection  # noqa: F401
from tensordict.core.behaviour.device import device_recorder as _device_recorder  # noqa: F401
from tensordict.core.behaviour.entries import NO_DEFAULT
from tensordict.core.functional import from_dict
from tensordict.core.keys import GENERIC_NESTED_ERR as _GENERIC_NESTED_ERR  # noqa: F401
from tensordict.core.keys import NESTED_TENSORS_AS_LISTS as _NESTED_TENSORS_AS_LISTS  # noqa: F401
from tensordict.core.keys import (
    NESTED_TENSORS_AS_LISTS_NONTENSOR as _NESTED_TENSORS_AS_LISTS_NONTENSOR,  # noqa: F401
)
from tensordict.core.keys import default_is_leaf, is_leaf_nontensor
from tensordict.core.keys import default_is_leaf as _default_is_leaf  # noqa: F401
from tensordict.core.keys import is_leaf_nontensor as _is_leaf_nontensor  # noqa: F401
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack
from tensordict.core.options import get_defaults_to_none, set_get_defaults_to_none
from tensordict.core.serial.convert import from_any, from_namedtuple, from_tuple
from tensordict.formats import (
    from_arrow,
    from_csv,
    from_h5,
    from_json,
    from_pandas,
    from_parquet,
    from_safetensors,
    from_struct_array,
    from_zarr,
)
from tensordict.tensorclass import TensorClass

# the classes TorchRL's ListStorage accepts as a batch of items (upstream's private tuple)
_ACCEPTED_CLASSES = (torch.Tensor, TensorDictBase, NonTensorData, NonTensorStack, TensorClass)

__all__ = [
    "NO_DEFAULT",
    "TensorDictBase",
    "default_is_leaf",
    "from_any",
    "from_arrow",
    "from_csv",
    "from_dict",
    "from_h5",
    "from_json",
    "from_namedtuple",
    "from_pandas",
    "from_parquet",
    "from_safetensors",
    "from_struct_array",
    "from_tuple",
    "from_zarr",
    "get_defaults_to_none",
    "is_leaf_nontensor",
    "is_tensor_collection",
    "set_get_defaults_to_none",
]
