"""Core operation latencies on a 10-key TensorDict of 1000x8 float32 leaves (microseconds per call),
and the cost of defining a tensorclass (by decorator, by subclassing ``TensorClass``).

Run: ``python -m benchmarks.core_ops``. Upstream tensordict 0.15.3 is measured in the same run: the
file starts itself with ``--measure`` under this interpreter and under upstream's
(``$TD_UPSTREAM_PYTHON``, default ``~/.cache/td-upstream-venv/bin/python``), in turn for several
rounds, and each ratio is ours over upstream's median of the same round (the median of the rounds'
ratios is reported). The measuring part imports only torch and the ``tensordict`` of the
interpreter running it. Without upstream's interpreter the times the issues quote
(``UPSTREAM_US``, measured on an earlier VM of the same size) stand in, and the rows say so.

A second table measures a ``@tensorclass`` with the same ten fields against the TensorDict inside
it, in the same run (issue [tensorclass]: attribute access, indexing and ``torch.stack`` must cost
at most ~1.5x the TensorDict).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.timing import per_call_us, run_json
from tensordict import TensorClass, TensorDict, tensorclass

UPSTREAM_PYTHON = Path(
    os.environ.get("TD_UPSTREAM_PYTHON", "~/.cache/td-upstream-venv/bin/python")
).expanduser()

#: upstream tensordict 0.15.3 on a 2-core machine (µs), as the issues quote it: the fallback
#: when upstream's interpreter is not there.
UPSTREAM_US = {
    "construct 10 keys": 22.0,
    "td[10:20]": 25.0,
    "td[5]": 22.0,
    'td["k"]': 0.23,
    "td.set": 2.3,
    "td.empty().set": 4.0,
    "clone": 35.0,
    "pickle round-trip of td[10:20]": 1438.0,
    "torch.stack of 2 rows": 83.0,
    "torch.cat of 2 slices": 100.0,
    "apply(x + 1)": 73.0,
}


def workloads() -> dict[str, Any]:
    leaves = {f"k{i}": torch.randn(1000, 8) for i in range(10)}
    td = TensorDict(leaves, batch_size=[1000])
    row0, row1 = td[0], td[1]
    a, b = td[0:10], td[10:20]
    sl = td[10:20]
    x = torch.randn(1000, 8)
    fields = {"obs": torch.Tensor, "reward": torch.Tensor}
    return {
        "construct 10 keys": lambda: TensorDict(leaves, batch_size=[1000]),
        "td[10:20]": lambda: td[10:20],
        "td[5]": lambda: td[5],
        'td["k"]': lambda: td["k0"],
        "td.set": lambda: td.set("k0", x),
        "td.empty().set": lambda: td.empty().set("y", x),
        "clone": lambda: td.clone(),
        "pickle round-trip of td[10:20]": lambda: pickle.loads(pickle.dumps(sl)),
        "torch.stack of 2 rows": lambda: torch.stack([row0, row1], 0),
        "torch.cat of 2 slices": lambda: torch.cat([a, b], 0),
        "apply(x + 1)": lambda: td.apply(lambda t: t + 1),
        # TorchRL defines dozens of tensorclasses at import: every spawned worker pays this
        "define a @tensorclass": lambda: tensorclass(type("Tc", (), {"__annotations__": fields})),
        "define a TensorClass subclass": lambda: type(
            "Tc", (TensorClass,), {"__annotations__": fields, "__module__": __name__}
        ),
    }


def tensorclass_workloads() -> dict[str, tuple[Any, Any]]:
    """name -> (operation on a tensorclass, the same operation on its inner TensorDict)."""
    fields = {f"k{i}": torch.Tensor for i in range(10)}
    sample_cls: Any = tensorclass(type("Sample", (), {"__annotations__": fields}))
    tc = sample_cls(**{k: torch.randn(1000, 8) for k in fields}, batch_size=[1000])
    td = tc._tensordict
    tc0, tc1, td0, td1 = tc[0], tc[1], td[0], td[1]
    return {
        "attribute (tc.k0 vs td['k0'])": (lambda: tc.k0, lambda: td["k0"]),
        'str key (tc["k0"] vs td["k0"])': (lambda: tc["k0"], lambda: td["k0"]),
        "index [10:20]": (lambda: tc[10:20], lambda: td[10:20]),
        "torch.stack of 2 rows": (
            lambda: torch.stack([tc0, tc1], 0),
            lambda: torch.stack([td0, td1], 0),
        ),
    }


def run_tensorclass(repeat: int = 7) -> dict[str, dict[str, float]]:
    """Tensorclass vs inner TensorDict: name -> {tensorclass, tensordict, ratio} medians (µs)."""
    results = {}
    for name, (on_tc, on_td) in tensorclass_workloads().items():
        tc_us = per_call_us(on_tc, repeat=repeat)["median"]
        td_us = per_call_us(on_td, repeat=repeat)["median"]
        results[name] = {"tensorclass": tc_us, "tensordict": td_us, "ratio": tc_us / td_us}
    return results


def measure(repeat: int = 7) -> dict[str, dict[str, float]]:
    """Median/min/max µs per call of every workload, in this interpreter's tensordict."""
    torch.set_num_threads(1)
    return {name: per_call_us(fn, repeat=repeat) for name, fn in workloads().items()}


def _measure_in(python: Path | str, repeat: int) -> dict[str, dict[str, float]]:
    """:func:`measure` in a fresh process of ``python`` (ours or upstream's)."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    # upstream's interpreter must import its own tensordict: only the benchmarks package is
    # added to its path, never this tree's src
    env["PYTHONPATH"] = (
        str(root)
        if str(python) != sys.executable
        else os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(root)) if p)
    )
    cmd = [str(python), "-m", "benchmarks.core_ops", "--measure", "--repeat", str(repeat)]
    result: dict[str, dict[str, float]] = run_json(cmd, env, cwd=root)
    return result


def run(repeat: int = 7, rounds: int = 3) -> dict[str, dict[str, Any]]:
    """Every workload here and upstream, ``rounds`` fresh processes each, in turn.

    Returns name -> {median, min, max (ours, µs), upstream (µs), ratio_vs_upstream,
    upstream_source}:
    ours are the medians of the rounds' medians (min/max over the rounds), the ratio the median
    of the rounds' ratios.
    """
    have_upstream = UPSTREAM_PYTHON.exists()
    ours: list[dict[str, dict[str, float]]] = []
    theirs: list[dict[str, dict[str, float]]] = []
    for _ in range(rounds):
        ours.append(_measure_in(sys.executable, repeat))
        if have_upstream:
            theirs.append(_measure_in(UPSTREAM_PYTHON, repeat))
    results: dict[str, dict[str, Any]] = {}
    for name in ours[0]:
        medians = [r[name]["median"] for r in ours]
        stats: dict[str, Any] = {
            "median": statistics.median(medians),
            "min": min(medians),
            "max": max(medians),
        }
        if theirs:
            up = [r[name]["median"] for r in theirs]
            stats["upstream"] = statistics.median(up)
            stats["ratio_vs_upstream"] = statistics.median(o / u for o, u in zip(medians, up))
            stats["upstream_source"] = "measured in this run"
        else:
            stats["upstream"] = UPSTREAM_US.get(name, float("nan"))
            stats["ratio_vs_upstream"] = stats["median"] / stats["upstream"]
            stats["upstream_source"] = "the issues' figure"
        results[name] = stats
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="print this process's medians")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.repeat)))
        return
    torch.set_num_threads(1)
    results = run(args.repeat, args.rounds)
    print(
        f"{'operation':34s} {'median µs':>10s} {'min':>8s} {'max':>8s} "
        f"{'upstream':>9s} {'ratio':>6s}"
    )
    for name, s in results.items():
        print(
            f"{name:34s} {s['median']:10.2f} {s['min']:8.2f} {s['max']:8.2f} "
            f"{s['upstream']:9.2f} {s['ratio_vs_upstream']:6.2f}"
        )
    print(f"(upstream: {next(iter(results.values()))['upstream_source']})")
    print()
    print(f"{'tensorclass vs inner TensorDict':34s} {'tc µs':>10s} {'td µs':>8s} {'ratio':>6s}")
    for name, r in run_tensorclass().items():
        print(f"{name:34s} {r['tensorclass']:10.3f} {r['tensordict']:8.3f} {r['ratio']:6.2f}")


if __name__ == "__main__":
    main()
