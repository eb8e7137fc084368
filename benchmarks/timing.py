"""Shared timing helpers: medians of repeated runs, with min and max."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_json(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> Any:
    """Run ``cmd`` (a measuring process, often under another interpreter) and return the JSON
    its last line of output holds; raise with the end of its standard error if it failed."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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


def summary(samples: list[float]) -> dict[str, float]:
    """Median, min and max of ``samples``."""
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def interleaved(contenders: dict[str, Callable[[], Any]], *, repeat: int) -> dict[str, list[float]]:
    """Wall seconds of each contender, run in turn ``repeat`` times (a, b, c, a, b, c, ...).

    Interleaving spreads the noise of a shared machine over all contenders alike, so that the
    ratio of two samples from the same round (see :func:`pair_ratios`) compares like with like.
    """
    # imported here: core_ops' measuring process imports this module under upstream's tensordict,
    # which has no tensordict.parallel
    from tensordict.parallel.reaper import wait_reaped

    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
            # map_iter returns before its workers have exited (they are reaped in the background):
            # let them go before the next contender's clock starts, so it is not charged for them
            wait_reaped()
    return samples


def pair_ratios(numerator: list[float], denominator: list[float]) -> dict[str, float]:
    """Median, min and max of ``numerator[i] / denominator[i]``, round by round.

    Both lists come from the same :func:`interleaved` rounds, so each ratio compares runs that
    saw the same machine; the median of the ratios shrugs off a round that was slow for everyone.
    For rates from wall seconds, the contender's rate over the reference's is
    ``pair_ratios(reference_seconds, contender_seconds)``.
    """
    return summary([a / b for a, b in zip(numerator, denominator, strict=True)])
