"""The checks the demo makes on its results, and the table it prints.

Each check returns a :class:`Check`; the demo exits with :func:`exit_status` of all of them, so a
wrong result fails the run (non-zero exit) instead of only printing a different number.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tensordict.demo.stages import StageResult
from tensordict.sizes import format_bytes

__all__ = [
    "Check",
    "check_features_agree",
    "check_ids_once",
    "check_normalised",
    "check_reduces_agree",
    "check_statistics",
    "exit_status",
    "format_checks",
    "format_comparison",
    "format_table",
    "format_verdict",
]

#: how far the normalised copy's mean from 0 and std from 1 may be, per feature
NORMALISED_TOLERANCE = 1e-3
#: how far the moments computed by different methods may differ (relative)
AGREEMENT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Check:
    """One verified claim about the results."""

    name: str
    ok: bool
    detail: str


def exit_status(checks: Sequence[Check]) -> int:
    """0 when every check passed, else 1.

    Examples:
        >>> exit_status([Check("a", True, ""), Check("b", False, "off by one")])
        1
    """
    return 0 if all(c.ok for c in checks) else 1


def check_ids_once(counts: torch.Tensor, name: str = "epoch: every id once") -> Check:
    """Every row id came exactly once in the epoch (``counts[i]``: times id ``i`` was seen).

    Examples:
        >>> check_ids_once(torch.tensor([1, 1, 1])).ok, check_ids_once(torch.tensor([1, 2, 0])).ok
        (True, False)
    """
    missing = int((counts == 0).sum())
    repeated = int((counts > 1).sum())
    ok = missing == 0 and repeated == 0
    detail = f"each of the {counts.numel()} ids seen exactly once"
    if not ok:
        detail = f"{missing} ids never seen, {repeated} seen more than once"
    return Check(name, ok, detail)


def check_features_agree(results: dict[str, torch.Tensor]) -> Check:
    """The per-row features computed by each method are identical (same Python, same rows).

    Examples:
        >>> a = torch.ones(2, 3)
        >>> check_features_agree({"x": a, "y": a.clone()}).ok
        True
    """
    names = list(results)
    first = results[names[0]]
    ok = all(r.shape == first.shape and torch.equal(r, first) for r in results.values())
    detail = f"{', '.join(names)}: {first.shape[0]} rows, " + ("identical" if ok else "DIFFER")
    return Check("features agree", ok, detail)


def check_normalised(mean: torch.Tensor, std: torch.Tensor) -> Check:
    """The normalised copy has mean ~0 and standard deviation ~1 in every feature."""
    worst_mean = float(mean.abs().max())
    worst_std = float((std - 1).abs().max())
    ok = worst_mean < NORMALISED_TOLERANCE and worst_std < NORMALISED_TOLERANCE
    detail = (
        f"max |mean| {worst_mean:.1e}, max |std - 1| {worst_std:.1e} "
        f"(limit {NORMALISED_TOLERANCE:.0e})"
    )
    return Check("normalised: mean 0, std 1", ok, detail)


def check_reduces_agree(results: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> Check:
    """The (mean, std) computed by each method agree with the first method's."""
    names = list(results)
    ref_mean, ref_std = results[names[0]]
    scale = ref_std.abs().max().clamp_min(1e-12)
    # torch's max propagates NaN (Python's max would drop it), so a NaN fails the check
    diffs = []
    for mean, std in results.values():
        diffs += [(mean - ref_mean).abs() / scale, (std - ref_std).abs() / scale]
    worst = float(torch.cat(diffs).max())
    ok = worst <= AGREEMENT_TOLERANCE
    detail = f"{', '.join(names)}: max relative difference {worst:.1e}"
    return Check("reduces agree", ok, detail)


def check_statistics(
    mean: torch.Tensor, std: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor, rows: int
) -> Check:
    """The dataset's measured mean/std are those it was generated with (within 6 sigma)."""
    mean_sigma = scale / math.sqrt(rows)
    std_sigma = scale / math.sqrt(2 * max(rows - 1, 1))
    worst = float(
        torch.cat([(mean - loc).abs() / mean_sigma, (std - scale).abs() / std_sigma]).max()
    )
    ok = worst < 6
    detail = f"mean and std within {worst:.1f} standard errors of the generator's (limit 6)"
    return Check("dataset statistics", ok, detail)


def format_checks(checks: Sequence[Check]) -> str:
    """One line per check: ``ok`` or ``FAILED``, its name and detail."""
    return "\n".join(f"  {'ok' if c.ok else 'FAILED':<6}  {c.name}: {c.detail}" for c in checks)


_HEADER = ("stage", "workers", "seconds", "GB/s", "chunks/s", "peak private", "of which shm")


def format_table(stages: Sequence[StageResult]) -> str:
    """The results table: one row per stage, columns aligned."""
    rows = [_HEADER] + [_row(s) for s in stages]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells))
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _row(s: StageResult) -> tuple[str, ...]:
    workers = str(s.workers) if s.workers else "-"
    private = format_bytes(s.memory.private) if s.memory is not None else "n/a"
    shm = format_bytes(s.memory.shmem_growth) if s.memory is not None else "n/a"
    if s.note is not None:
        return (f"{s.name} ({s.note})", workers, f"{s.seconds:.2f}", "-", "-", private, shm)
    speed, rate = f"{s.gb_per_s:.2f}", f"{s.chunks_per_s:.1f}"
    return (s.name, workers, f"{s.seconds:.2f}", speed, rate, private, shm)


def format_comparison(label: str, reference: StageResult, others: dict[str, StageResult]) -> str:
    """The times of one job done several ways, as ratios to ``reference`` (wrapped at 100).

    A ratio is the other's time over the reference's: above 1 when the reference is faster.

    Examples:
        >>> fast = StageResult("a", 2, 1.0, 10, 1, None)
        >>> slow = StageResult("b", 0, 2.5, 10, 1, None)
        >>> print(format_comparison("map_iter", fast, {"a loop": slow}))
        Same reduce, same run: map_iter 1.00 s, a loop 2.50 s (ratio 2.50). Ratio: their time over
        map_iter's, above 1 when map_iter is faster.
    """
    parts = [
        f"{name} {o.seconds:.2f} s (ratio {o.seconds / reference.seconds:.2f})"
        for name, o in others.items()
    ]
    text = (
        f"Same reduce, same run: {label} {reference.seconds:.2f} s, {', '.join(parts)}. "
        f"Ratio: their time over {label}'s, above 1 when {label} is faster."
    )
    if any(o.seconds < reference.seconds for o in others.values()):
        text += (
            f" This reduce is bound by memory bandwidth, which the workers share on this machine,"
            f" and starting them costs a few tens of ms; {label} pays off as each chunk needs"
            " more computation per byte."
        )
    return textwrap.fill(text, 100)


def format_verdict(
    reduce: tuple[StageResult, StageResult],
    features: tuple[StageResult, StageResult],
    epochs: tuple[StageResult, StageResult],
) -> str:
    """Where ``map_iter`` wins and where the loop wins in this run, and why, from its figures.

    Args:
        reduce: (map_iter, in-process loop) of the memory-bound reduce.
        features: (map_iter, in-process loop) of the CPU-bound per-row features.
        epochs: the first and second shuffled epoch on one ``WorkerPool``.

    Examples:
        >>> def st(seconds):
        ...     return StageResult("s", 2, seconds, 10, 1, None)
        >>> print(format_verdict((st(2.0), st(1.0)), (st(1.0), st(1.8)), (st(1.0), st(0.5))))
        ... # doctest: +NORMALIZE_WHITESPACE
        Speed of map_iter over the in-process loop in this run: 1.80x on the per-row Python
        features, 0.50x on the reduce. map_iter wins where each byte needs CPU work: its 2 workers
        run Python at once, each with its own interpreter. The loop wins on the reduce, which is
        bound by memory bandwidth: one core already reads the data about as fast as memory
        delivers it, so more processes share that bandwidth and add the cost of starting them.
        Shuffled epochs on one WorkerPool: the first 1.00 s (starts the workers), the second 0.50 s
        (0.50x).
    """
    r = reduce[1].seconds / reduce[0].seconds
    f = features[1].seconds / features[0].seconds
    workers = features[0].workers
    text = (
        f"Speed of map_iter over the in-process loop in this run: {f:.2f}x on the per-row Python "
        f"features, {r:.2f}x on the reduce."
    )
    if f > 1:
        text += (
            f" map_iter wins where each byte needs CPU work: its {workers} workers run Python at "
            "once, each with its own interpreter."
        )
    else:
        text += (
            " map_iter did not beat the loop even on CPU-bound work here: either the job was too "
            "short to repay starting the workers, or the machine gave them less than one extra "
            "core (other processes share the CPUs; see `uptime`)."
        )
    if r < 1:
        text += (
            " The loop wins on the reduce, which is bound by memory bandwidth: one core already "
            "reads the data about as fast as memory delivers it, so more processes share that "
            "bandwidth and add the cost of starting them."
        )
    else:
        text += " On this machine one core does not saturate memory, so the reduce gains too."
    first, second = epochs
    text += (
        f" Shuffled epochs on one WorkerPool: the first {first.seconds:.2f} s (starts the "
        f"workers), the second {second.seconds:.2f} s ({second.seconds / first.seconds:.2f}x)."
    )
    return textwrap.fill(text, 100)
