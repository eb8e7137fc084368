"""``consolidate()`` and pickling a consolidated TensorDict, here and with upstream tensordict.

Run: ``python -m benchmarks.consolidate [--quick]``. The workload is a TensorDict of 100 float32
leaves (10 nested tensordicts of 10 leaves each, batch size ``[rows]``, leaves ``[rows, 8]``) of
~4 MiB and of ~64 MiB in all. Timed: ``td.consolidate()``, and ``pickle.dumps`` /
``pickle.loads`` of the consolidated tensordict with the default protocol (4; upstream's
format: the storage travels as a torch tensor) and with protocol 5.

The same file measures both packages: it starts itself as a subprocess with ``--measure``, once
with this interpreter and once with upstream's (``$TD_UPSTREAM_PYTHON``, default
``~/.cache/td-upstream-venv/bin/python``), in turn for several rounds so that machine noise hits
both alike; each prints its medians as JSON. The measuring part imports only torch and the
``tensordict`` of the interpreter running it. A ratio is ours over upstream's median time
(below 1: faster here).

Both measuring processes run with glibc's mmap threshold fixed at its default, 128 KiB
(``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072``, unless ``GLIBC_TUNABLES`` is set):
every buffer of 128 KiB or more is fresh memory, each of its 4 KiB pages faulted in on first
touch (~1.5 µs each here: most of a 4 MiB ``dumps``). Left dynamic, the threshold rises with
the frees a process happened to make, and whether pickle's output buffer reused memory an
earlier operation had freed decided the figure: upstream's protocol-5 ``dumps`` of 4 MiB took
0.34 ms right after its ``loads`` (whose ``torch.load`` frees fresh storages) and 2.3-2.9 ms
timed alone, so a row measured the previous row's leftovers rather than its operation.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIB = 1 << 20
UPSTREAM_PYTHON = Path(
    os.environ.get("TD_UPSTREAM_PYTHON", "~/.cache/td-upstream-venv/bin/python")
).expanduser()
SIZES_MIB = (4, 64)
#: the same allocator policy for both packages, whatever ran before (see the module's doc)
FIXED_MMAP_THRESHOLD = "glibc.malloc.mmap_threshold=131072"
OPS = ("consolidate", "dumps", "loads", "dumps (protocol 5)", "loads (protocol 5)")


def _workload(size_mib: int) -> Any:
    import torch

    from tensordict import TensorDict

    rows = size_mib * MIB // (100 * 8 * 4)
    groups = {
        f"g{g}": TensorDict({f"x{i}": torch.randn(rows, 8) for i in range(10)}, [rows])
        for g in range(10)
    }
    return TensorDict(groups, batch_size=[rows])


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3


def measure(repeat: int) -> dict[str, dict[str, float]]:
    """Median milliseconds of each operation, per size (in this interpreter's tensordict)."""
    import torch

    torch.set_num_threads(1)
    return {f"{size} MiB": _measure_size(size, repeat) for size in SIZES_MIB}


def _measure_size(size: int, repeat: int) -> dict[str, float]:
    td = _workload(size)
    tdc = td.consolidate()
    blob4, blob5 = pickle.dumps(tdc, protocol=4), pickle.dumps(tdc, protocol=5)
    back = pickle.loads(blob4)
    assert back.is_consolidated() and (back == td).all(), "round trip failed"
    return {
        "consolidate": _median_ms(td.consolidate, repeat),
        "dumps": _median_ms(lambda: pickle.dumps(tdc, protocol=4), repeat),
        "loads": _median_ms(lambda: pickle.loads(blob4), repeat),
        "dumps (protocol 5)": _median_ms(lambda: pickle.dumps(tdc, protocol=5), repeat),
        "loads (protocol 5)": _median_ms(lambda: pickle.loads(blob5), repeat),
    }


def _measure_in(python: Path | str, repeat: int) -> dict[str, dict[str, float]]:
    # (here: this file also runs as a script under upstream's interpreter, which has no
    # benchmarks package on its path)
    from benchmarks.timing import run_json

    script = str(Path(__file__).resolve())
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if str(python) != sys.executable:  # upstream's interpreter: never this tree's package
        env.pop("PYTHONPATH", None)
    env.setdefault("GLIBC_TUNABLES", FIXED_MMAP_THRESHOLD)  # (see the module's doc)
    cmd = [str(python), script, "--measure", "--repeat", str(repeat)]
    result: dict[str, dict[str, float]] = run_json(cmd, env)
    return result


def run(rounds: int = 2, repeat: int = 5) -> dict[str, Any]:
    """Rounds of (ours, upstream) measurements; per op and size: medians and the ratio."""
    have_upstream = UPSTREAM_PYTHON.exists()
    samples: dict[str, list[dict[str, dict[str, float]]]] = {"ours": [], "upstream": []}
    for _ in range(rounds):
        samples["ours"].append(_measure_in(sys.executable, repeat))
        if have_upstream:
            samples["upstream"].append(_measure_in(UPSTREAM_PYTHON, repeat))
    rows = []
    for size in SIZES_MIB:
        for op in OPS:
            key = f"{size} MiB"
            ours = [s[key][op] for s in samples["ours"]]
            row: dict[str, Any] = {"name": f"{op} {key}", "unit": "ms", **_stats(ours)}
            if samples["upstream"]:
                up = [s[key][op] for s in samples["upstream"]]
                ratios = [o / u for o, u in zip(ours, up)]  # per round: like with like
                row["upstream"] = statistics.median(up)
                row["ratio"] = statistics.median(ratios)
            rows.append(row)
    return {"rows": rows, "upstream_python": str(UPSTREAM_PYTHON) if have_upstream else None}


def _stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="measure in this interpreter")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and repeats")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.repeat)))
        return
    raw = run(rounds=1 if args.quick else 2, repeat=3 if args.quick else args.repeat)
    print(f"{'operation':<32} {'ours ms':>9} {'upstream ms':>12} {'ratio':>7}")
    for r in raw["rows"]:
        up = f"{r['upstream']:.2f}" if "upstream" in r else "-"
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else "-"
        print(f"{r['name']:<32} {r['median']:>9.2f} {up:>12} {ratio:>7}")


if __name__ == "__main__":
    main()
