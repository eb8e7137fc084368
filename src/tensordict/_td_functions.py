"""``tensordict._td_functions``: upstream's module of the module-level functions of
``tensordict._td`` (stacking, loading, saving, building); re-exports only, each from its home."""

from tensordict.core.behaviour.combine import cat, stack
from tensordict.core.behaviour.consolidate import from_consolidated
from tensordict.core.functional import fromkeys, lazy_stack, maybe_dense_stack
from tensordict.core.serial.convert import from_pytree
from tensordict.memmap.api import load, load_memmap, memmap, save
from tensordict.memmap.append import append_memmap
from tensordict.nn.functional_modules import from_module, from_modules

__all__ = [
    "append_memmap",
    "cat",
    "from_consolidated",
    "from_module",
    "from_modules",
    "from_pytree",
    "fromkeys",
    "lazy_stack",
    "load",
    "load_memmap",
    "maybe_dense_stack",
    "memmap",
    "save",
    "stack",
]
