"""Checking the arguments that ``map_iter``, ``map`` and ``WorkerPool`` share: counts, the
generator, and how many workers the CPUs can serve.

A count must be an ``int`` (a ``bool`` is refused, and so is ``"2"`` or ``2.5``, never read as 1);
a generator a ``torch.Generator``. Every error names the argument, what came and what to pass.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import torch

from tensordict.errors import WorkerCountWarning

__all__ = ["MAX_WORKERS_PER_CPU", "capped_workers", "check_count", "check_generator"]

#: at most this many workers per CPU the process may run on (more are capped, with a warning)
MAX_WORKERS_PER_CPU = 4


def check_count(name: str, value: Any, minimum: int, none_ok: bool = True) -> int | None:
    """``value`` if it is an int of at least ``minimum`` (or None when ``none_ok``).

    Raises:
        TypeError: not an int (a bool, a str, a float...).
        ValueError: below ``minimum``.

    Examples:
        >>> check_count("chunksize", 4, 0)
        4
        >>> check_count("chunksize", 2.5, 0)
        Traceback (most recent call last):
        ...
        TypeError: chunksize must be an int, got float 2.5: pass a whole number ...
    """
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{name} must be an int, got {type(value).__name__} {value!r}: pass a whole number "
            f"(at least {minimum}){', or None' if none_ok else ''}."
        )
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}.")
    return value


def check_generator(generator: Any) -> None:
    """Raise unless ``generator`` is a ``torch.Generator`` or None."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__} "
            f"{generator!r}: pass torch.default_generator (the global seed) or "
            "torch.Generator().manual_seed(n)."
        )


def user_stacklevel() -> int:
    """The stacklevel of the first caller outside this package (so warnings point at user code)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def capped_workers(num_workers: int | None, cpus: int) -> int:
    """``num_workers`` (None: one per usable CPU), at most :data:`MAX_WORKERS_PER_CPU` per
    usable CPU (``cpus``), with a :class:`~tensordict.errors.WorkerCountWarning` when capped."""
    if num_workers is None:
        return cpus
    cap = MAX_WORKERS_PER_CPU * cpus
    if num_workers > cap:
        warnings.warn(
            f"num_workers={num_workers} is more than {MAX_WORKERS_PER_CPU} processes for each of "
            f"the {cpus} CPUs this process may run on: starting {cap} workers instead. More "
            "only compete for the same CPUs (and memory); for I/O-bound work, use threads in "
            "fn or pass pool= a pool of the size you want.",
            WorkerCountWarning,
            stacklevel=user_stacklevel(),
        )
        return cap
    return num_workers
