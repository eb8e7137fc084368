"""``tensordict._td_memmap``: upstream's module of private memmap helpers of ``TensorDict``.

Upstream's helpers there are internal (no client imports them); this package writes and reads the
same on-disk format in ``tensordict.memmap``. The module exists so that the path imports.
"""

__all__: list[str] = []
