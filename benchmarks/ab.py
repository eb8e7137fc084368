"""A/B runs: one part of the benchmark suite under several source trees, in alternating rounds.

Run: ``python -m benchmarks.ab --tree before=/path/to/old/src --tree after=src --only steady
[--rounds 4] [--quick]``.

Each round runs ``python -m benchmarks.run --only PART`` once per tree, in turn, with
``PYTHONPATH=TREE:REPO`` (the library from the tree, the benchmark code from this checkout), so
that every tree sees the same minutes of a shared machine. It prints, for every row, each
tree's value per round, the per-round ratio of each tree's value to the first tree's, and each
tree's own within-run ratios (e.g. ``WorkerPool`` over ``persistent limit``): a change is
credited when its within-run ratio moves in every round. The raw documents go to ``--output``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_once(src: Path, only: list[str], quick: bool, repeat: int | None = None) -> dict[str, Any]:
    """One ``benchmarks.run`` under the library at ``src``; its results document."""
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        output = Path(tmp) / "results.json"
        env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{REPO}"}
        args = [sys.executable, "-m", "benchmarks.run", "--output", str(output)]
        for name in only:
            args += ["--only", name]
        if quick:
            args.append("--quick")
        if repeat is not None:
            args += ["--repeat", str(repeat)]
        done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"benchmarks.run under {src} failed:\n{done.stderr[-3000:]}")
        return json.loads(output.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__)
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=SRC")
    parser.add_argument("--only", action="append", required=True, metavar="PART")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=None, help="passed to benchmarks.run")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    trees = {}
    for value in args.tree:
        name, _, src = value.partition("=")
        trees[name] = Path(src).resolve()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, src in trees.items():
            print(f"round {r + 1}: {name}", file=sys.stderr, flush=True)
            runs[name].append(run_once(src, args.only, args.quick, args.repeat))
    if args.output is not None:
        args.output.write_text(json.dumps(runs, indent=1, default=str))
    first = next(iter(trees))
    names = [row["name"] for row in runs[first][0]["rows"]]
    for row_name in names:
        print(f"\n{row_name}")
        for tree in trees:
            rows = [_row(doc, row_name) for doc in runs[tree]]
            values = [row["median"] for row in rows if row]
            ratios = {}
            for ref in rows[0]["ratios"] if rows and rows[0] else {}:
                ratios[ref] = [row["ratios"][ref]["median"] for row in rows if row]
            text = ", ".join(f"{v:.4g}" for v in values)
            line = f"  {tree:>10}: {text} {rows[0]['unit'] if rows and rows[0] else ''}"
            if tree != first:
                base = [_row(doc, row_name) for doc in runs[first]]
                per_round = [v / b["median"] for v, b in zip(values, base) if b and b["median"]]
                if per_round:
                    line += f"  (x{first}: {', '.join(f'{x:.3f}' for x in per_round)})"
            for ref, values_ref in ratios.items():
                line += f"  [{ref}: {', '.join(f'{x:.3f}' for x in values_ref)};"
                line += f" median {statistics.median(values_ref):.3f}]"
            print(line)
    return 0


def _row(document: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((row for row in document["rows"] if row["name"] == name), None)


if __name__ == "__main__":
    sys.exit(main())
