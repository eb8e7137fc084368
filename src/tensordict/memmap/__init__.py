"""Memory-mapped storage: MemoryMappedTensor, the on-disk format, and memmap_/load_memmap.

``tensordict.memmap`` is also upstream's import path of :class:`MemoryMappedTensor`.
"""

from tensordict.memmap.format import is_writable as _is_writable  # noqa: F401
from tensordict.memmap.tensor import MemoryMappedTensor

__all__ = ["MemoryMappedTensor"]
