"""Shared timing helpers: medians of repeated runs, with min and max."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def per_call_us(
    fn: Callable[[], Any], *, number: int | None = None, repeat: int = 7
) -> dict[str, float]:
    """Microseconds per call: median/min/max over ``repeat`` runs of ``number`` calls each."""
    if number is None:
        number = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            if time.perf_counter() - t0 > 0.05:
                break
            number *= 2
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def seconds(fn: Callable[[], Any], *, repeat: int = 5) -> dict[str, float]:
    """Wall seconds per run: median/min/max over ``repeat`` runs."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}
