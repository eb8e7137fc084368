"""``tensordict._td``: upstream's module of ``TensorDict``; re-exports only, each from its home."""

from tensordict.core.behaviour.base import is_tensor_collection
from tensordict.core.behaviour.combine import cat, stack
from tensordict.core.behaviour.consolidate import from_consolidated
from tensordict.core.dense import TensorDict
from tensordict.core.functional import fromkeys, lazy_stack, maybe_dense_stack
from tensordict.core.lazy.views import _str_to_index, _SubTensorDict  # noqa: F401
from tensordict.core.serial.convert import from_pytree
from tensordict.memmap.api import load, load_memmap, memmap, save
from tensordict.memmap.append import append_memmap
from tensordict.nn.functional_modules import from_module, from_modules

__all__ = [
    "TensorDict",
    "append_memmap",
    "cat",
    "from_consolidated",
    "from_module",
    "from_modules",
    "from_pytree",
    "fromkeys",
    "is_tensor_collection",
    "lazy_stack",
    "load",
    "load_memmap",
    "maybe_dense_stack",
    "memmap",
    "save",
    "stack",
]
