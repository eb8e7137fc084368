"""tensordict: dictionaries of tensors that share batch dimensions and behave like one tensor.

Memory-mapped tensordicts keep datasets on disk; ``map_iter`` / ``map`` stream them through a
function in worker processes. The top level offers the names of upstream tensordict 0.15.3.
"""

from tensordict import (
    # the modules named by the classes' __module__ (upstream's paths) must be loaded: cloudpickle
    # (Ray) pickles a class whose module is not in sys.modules by value, as a different class
    _lazy,  # noqa: F401
    _reductions,  # noqa: F401  (torch.load's safe globals, as upstream)
    _td,  # noqa: F401
    base,
    functional,
    nn,
    persistent,
    store,
    tensordict,
    typedtensordict,
    utils,
)
from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.behaviour.combine import cat, stack
from tensordict.core.behaviour.consolidate import from_consolidated
from tensordict.core.behaviour.padding import collate, pad, pad_sequence, unpad_sequence
from tensordict.core.checks import assert_close
from tensordict.core.checks import assert_close as assert_allclose_td
from tensordict.core.collection import TensorCollection
from tensordict.core.dense import TensorDict
from tensordict.core.factory import bind_forwarded as _bind_forwarded
from tensordict.core.functional import (
    dense_stack_tds,
    from_dict,
    fromkeys,
    group_by,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    lazy_stack,
    make_tensordict,
    maybe_dense_stack,
    merge_tensordicts,
)
from tensordict.core.keys import (
    KEY_SEPARATOR,
    NestedKey,
    default_is_leaf,
    is_leaf_nontensor,
    unravel_key_list,
    unravel_key_to_tuple,
)
from tensordict.core.keys import public_unravel_key as unravel_key
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.nontensor.data import NonTensorData, NonTensorStack, is_non_tensor
from tensordict.core.options import (
    capture_non_tensor_stack,
    get_defaults_to_none,
    get_printoptions,
    lazy_legacy,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_get_defaults_to_none,
    set_lazy_legacy,
    set_list_to_stack,
    set_printoptions,
)
from tensordict.core.serial.convert import from_any, from_namedtuple, from_pytree, from_tuple
from tensordict.core.serial.pack import PackLayout
from tensordict.core.serial.parse_repr import parse_tensor_dict_string
from tensordict.core.typed import TypedTensorDict
from tensordict.core.unbatched import UnbatchedTensor
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
    to_arrow,
    to_safetensors,
)
from tensordict.memmap.api import load, load_memmap, memmap, save
from tensordict.memmap.append import append_memmap
from tensordict.memmap.archive import (
    is_memmap_archive,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)
from tensordict.memmap.tensor import MemoryMappedTensor
from tensordict.nn.common import as_tensordict_module
from tensordict.nn.functional_modules import from_module, from_modules
from tensordict.nn.params import TensorDictParams
from tensordict.nn.tensorclass_module import TensorClassModuleBase, TensorClassModuleWrapper
from tensordict.parallel.worker import WorkerInfo, get_worker_info
from tensordict.persistent import PersistentTensorDict
from tensordict.store import LazyStackedTensorDictStore, TensorDictStore
from tensordict.tensorclass import (
    MetaData,
    NonTensorDataBase,
    TensorAttrs,
    TensorClass,
    from_dataclass,
    is_tensorclass,
    tensorclass,
)
from tensordict.tensorclass.forwarding import describe_pending as _describe_tensorclass_forwarders

__version__ = "0.16.0.dev0"

__all__ = [
    "KEY_SEPARATOR",
    "LazyStackedTensorDict",
    "LazyStackedTensorDictStore",
    "MemoryMappedTensor",
    "MetaData",
    "NestedKey",
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "PackLayout",
    "PersistentTensorDict",
    "TensorAttrs",
    "TensorClass",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "TensorCollection",
    "TensorDict",
    "TensorDictBase",
    "TensorDictParams",
    "TypedTensorDict",
    "UnbatchedTensor",
    "WorkerInfo",
    "from_arrow",
    "from_csv",
    "TensorDictStore",
    "append_memmap",
    "as_tensordict_module",
    "assert_allclose_td",
    "assert_close",
    "base",
    "capture_non_tensor_stack",
    "cat",
    "collate",
    "default_is_leaf",
    "dense_stack_tds",
    "from_any",
    "from_consolidated",
    "from_dataclass",
    "from_dict",
    "from_h5",
    "from_json",
    "from_module",
    "from_modules",
    "from_pandas",
    "from_parquet",
    "from_safetensors",
    "from_struct_array",
    "from_zarr",
    "from_namedtuple",
    "from_pytree",
    "from_tuple",
    "fromkeys",
    "functional",
    "get_defaults_to_none",
    "get_printoptions",
    "get_worker_info",
    "group_by",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "is_leaf_nontensor",
    "is_memmap_archive",
    "is_non_tensor",
    "is_tensor_collection",
    "is_tensorclass",
    "lazy_legacy",
    "lazy_stack",
    "list_to_stack",
    "load",
    "load_memmap",
    "make_tensordict",
    "maybe_dense_stack",
    "memmap",
    "merge_tensordicts",
    "nn",
    "pack_memmap",
    "pad",
    "pad_sequence",
    "parse_tensor_dict_string",
    "persistent",
    "refresh_archive_checksums",
    "save",
    "set_capture_non_tensor_stack",
    "set_get_defaults_to_none",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "stack",
    "store",
    "tensorclass",
    "to_arrow",
    "to_safetensors",
    "tensordict",
    "typedtensordict",
    "unpack_memmap",
    "unpad_sequence",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
    "utils",
]

# every module is loaded: bind the methods of the forwarding tables (tensordict.core.factory),
# then show them in the tensorclasses built meanwhile (help() lists their real parameters)
_bind_forwarded()
_describe_tensorclass_forwarders()
