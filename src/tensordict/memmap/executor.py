"""Thread pools shared by threaded saves and loads (``num_threads=``), one per thread count.

A pool is created on first use and kept for the life of the process, so that repeated saves do
not pay for starting threads.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["shared_executor"]

_POOLS: dict[int, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def shared_executor(num_threads: int) -> ThreadPoolExecutor:
    """The process-wide pool of ``num_threads`` threads.

    Raises:
        ValueError: ``num_threads`` is not positive.

    Examples:
        >>> shared_executor(2) is shared_executor(2)
        True
        >>> shared_executor(2).submit(sum, [1, 2]).result()
        3
    """
    if num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads}.")
    with _LOCK:
        pool = _POOLS.get(num_threads)
        if pool is None:
            pool = _POOLS[num_threads] = ThreadPoolExecutor(
                max_workers=num_threads, thread_name_prefix=f"tensordict-io{num_threads}"
            )
        return pool
