"""The one entry point of the benchmark suite: ``python -m benchmarks.run [--quick] [--only NAME]``.

Runs every suite (core_ops, memmap_io, map_iter, cpu_bound, epochs, cold, io_stream,
consolidate, distributed, compiled, and ray_pool when ray is installed), prints one table and
writes ``benchmarks/results.json`` (the machine, the table rows and each suite's raw results).
``make bench ARGS="--quick"`` runs the same at small sizes, as a smoke run; ``--only steady`` and
``--only tiny`` run one part of the epochs and cpu_bound suites; ``make bench ARGS=--big`` runs
the cold suite over a dataset of 1.5x the machine's RAM (into ``benchmarks/results-big.json``);
``--merge`` keeps the suites of the output file that did not run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.report import Row, format_rows, machine, machine_line, write_json
from tensordict.sizes import format_bytes

RESULTS = Path(__file__).with_name("results.json")
#: the helper measurements issue [ray] quotes for this machine
RAY_REFERENCE = {
    "ray Pool.apply round trip": "issue: ~1.2 ms",
    "stdlib Pool.apply round trip": "issue: 0.04 ms",
}
MIB = 1 << 20


def core_ops(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import core_ops as suite

    repeat = 3 if quick else 7
    ops = suite.run(repeat=repeat, rounds=1 if quick else 3)
    classes = suite.run_tensorclass(repeat=repeat)
    rows = []
    for name, s in ops.items():
        up = s["upstream"]
        row = {**_stats(s), "name": name, "unit": "µs"}
        if math.isnan(up):  # upstream not installed, and the issues quote no figure for it
            rows.append({**row, "ratios": {}, "reference": "upstream venv missing"})
            continue
        ratio = {"median": s["ratio_vs_upstream"]}
        ref = f"upstream {up:.3g} µs ({s['upstream_source']}); target <= upstream"
        rows.append({**row, "ratios": {"upstream": ratio}, "reference": ref})
    for name, r in classes.items():
        rows.append(
            {
                "name": f"tensorclass {name}",
                "median": r["tensorclass"],
                "min": None,
                "max": None,
                "unit": "µs",
                "ratios": {"TensorDict": {"median": r["ratio"]}},
                "reference": "target <= 1.5x TensorDict",
            }
        )
    return {"ops": ops, "tensorclass": classes}, rows


def memmap_io(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import memmap_io as suite

    raw = suite.run(repeat=1 if quick else 3, total_bytes=(64 * MIB) if quick else (1 << 30))
    io, rows = raw["io"], []
    for name, s in io.items():
        numpy = io[name.split(" ")[0] + " numpy"]
        if "gbps_median" in s:  # a rate: ours over numpy's is numpy's time over ours
            stats = {k: s[f"gbps_{k}"] for k in ("median", "min", "max")}
            ratio, unit = numpy["s_median"] / s["s_median"], "GB/s"
        else:
            stats = {k: s[f"s_{k}"] * 1e3 for k in ("median", "min", "max")}
            ratio, unit = s["s_median"] / numpy["s_median"], "ms"
        ratios = {} if "numpy" in name else {"numpy": {"median": ratio}}
        rows.append({**stats, "name": name, "unit": unit, "ratios": ratios, "reference": ""})
    for name, s in raw["pickle"].items():
        for op in ("dumps", "loads"):
            stats = {k: s[f"{op}_{k}"] for k in ("median", "min", "max")}
            label = f"{name}.{op} of a 16,384-row slice ({int(s['bytes'])} B)"
            rows.append({**stats, "name": label, "unit": "µs", "ratios": {}, "reference": ""})
    return raw, rows


def map_iter(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import map_iter as suite

    if quick:
        raw = suite.run(size=64 * MIB, repeat=2, tiny_rows=2_000, epochs=2, first_chunk_repeat=2)
    else:
        raw = suite.run()
    rows = [{k: v for k, v in r.items() if k != "samples"} for r in raw["rows"]]
    return raw, rows


def cpu_bound(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import cpu_bound as suite

    raw = suite.run(scale=1 / 32 if quick else 1.0, repeat=2 if quick else 5)
    return raw, [{k: v for k, v in r.items() if k != "samples"} for r in raw["rows"]]


def epochs(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import epochs as suite

    if quick:
        raw = suite.run(size=16 * MIB, epochs=5, repeat=2)
    else:
        raw = suite.run()
    steady_raw, steady_rows = steady(quick)
    raw = {**raw, "steady": steady_raw}
    return raw, [{k: v for k, v in r.items() if k != "samples"} for r in raw["rows"]] + steady_rows


#: ``--repeat``: rounds of the steady, tiny and cold parts (None: their defaults)
REPEAT: int | None = None


def steady(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import epochs as suite

    if quick:
        raw = suite.steady(scale=1 / 64, repeat=REPEAT or 1, epochs=2)
    else:
        raw = suite.steady(repeat=REPEAT or 5)
    return raw, [{k: v for k, v in r.items() if k != "samples"} for r in raw["rows"]]


def tiny(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import cpu_bound as suite

    repeat = REPEAT or (2 if quick else 5)
    raw = suite.run(scale=1 / 32 if quick else 1.0, repeat=repeat, only=["tiny"])
    return raw, [{k: v for k, v in r.items() if k != "samples"} for r in raw["rows"]]


def cold(quick: bool, big: bool = False) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import cold as suite

    kw = suite.sizes(quick, big)
    if REPEAT is not None:
        kw["repeat"] = REPEAT
    raw = suite.run(**kw)
    return raw, [{k: v for k, v in r.items() if k != "samples"} for r in raw["rows"]]


def ray_pool(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    suite = importlib.import_module("benchmarks.ray_pool")
    if quick:
        raw = suite.run(size_mib=64, tiny_rows=500, repeat=2, tiny_repeat=1)
    else:
        raw = suite.run()
    try:
        return raw, _ray_rows(raw)
    except (KeyError, TypeError):  # the suite changed its shape: show what it has
        return raw, generic_rows(raw)


def _ray_rows(raw: dict[str, Any]) -> list[Row]:
    """Rates from the suite's seconds; ratios of medians (the suite interleaves its contenders)."""
    rows: list[Row] = []
    config = raw["config"]
    amounts = {"reduce": config["size_bytes"] / 1e9, "tiny": config["tiny_rows"]}
    workload_size = {
        "reduce": format_bytes(config["size_bytes"]),
        "tiny": f"{config['tiny_rows']:,} rows",
    }
    for workload, unit in (("reduce", "GB/s"), ("tiny", "chunks/s")):
        seconds, amount = raw[workload], amounts[workload]
        for name, s in seconds.items():
            rate = {"median": amount / s["median"], "min": amount / s["max"]}
            rate["max"] = amount / s["min"]
            ratios = {
                ref: {"median": seconds[ref]["median"] / s["median"]}
                for ref in ("loop", "stdlib pool")
                if ref in seconds and ref != name and name != "loop"
            }
            label = f"{workload} {workload_size[workload]}: {name}"
            rows.append({**rate, "name": label, "unit": unit, "ratios": ratios, "reference": ""})
    for name, value in raw["ray costs"].items():
        label, _, unit = name.rpartition(" (")
        row = {"name": label, "median": value, "min": None, "max": None, "unit": unit.rstrip(")")}
        rows.append({**row, "ratios": {}, "reference": RAY_REFERENCE.get(label, "")})
    return rows


def generic_rows(raw: Any, prefix: str = "") -> list[Row]:
    """Rows from a suite's own dict: its ``rows`` if it has them, else every dict with a median."""
    if isinstance(raw, dict) and isinstance(raw.get("rows"), list):
        return [{"ratios": {}, "reference": "", "unit": "", **r} for r in raw["rows"]]
    rows: list[Row] = []
    if not isinstance(raw, dict):
        return rows
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and "median" in value:
            rows.append(
                {
                    **_stats(value),
                    "name": name,
                    "unit": str(value.get("unit", "")),
                    "ratios": value.get("ratios", {}),
                    "reference": str(value.get("reference", "")),
                }
            )
        elif isinstance(value, dict):
            rows += generic_rows(value, f"{name} ")
    return rows


def _stats(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s.get(k) for k in ("median", "min", "max")}


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return Path(__file__).with_name("ray_pool.py").exists()


def consolidate(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import consolidate as suite

    raw = suite.run(rounds=1 if quick else 3, repeat=3 if quick else 21)
    rows = []
    for r in raw["rows"]:
        row = {k: r[k] for k in ("name", "unit", "median", "min", "max")}
        if "ratio" in r:
            row["ratios"] = {"upstream": {"median": r["ratio"]}}
            row["reference"] = f"upstream {r['upstream']:.3g} ms; target <= upstream"
        else:
            row["ratios"], row["reference"] = {}, "upstream venv missing"
        rows.append(row)
    return raw, rows


def io_stream(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import io_stream as suite

    raw = suite.run(size_mib=64 if quick else 1024, repeat=1 if quick else 3)
    return raw, raw["rows"]


def distributed(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import distributed as suite

    raw = suite.run(rounds=2, repeat=3, size_mib=16) if quick else suite.run()
    keys = ("name", "unit", "median", "min", "max", "ratios", "reference")
    return raw, [{k: r[k] for k in keys} for r in raw["rows"]]


def compiled(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    from benchmarks import compiled as suite

    raw = suite.run(rounds=1 if quick else 3, repeat=3 if quick else 7)
    rows = []
    for r in raw["rows"]:
        row = {k: r[k] for k in ("name", "unit", "median", "min", "max")}
        row["ratios"] = {name: {"median": value} for name, value in r["ratios"].items()}
        if "upstream" in r:
            figure = r["name"].rsplit(": ", 1)[-1]
            targets = {
                "compile": "; target <= upstream",
                "compiled step": "; target <= upstream; < eager",
            }
            row["reference"] = f"upstream {r['upstream']:.3g} {r['unit']}{targets.get(figure, '')}"
        else:
            row["reference"] = "upstream venv missing"
        rows.append(row)
    return raw, rows


SUITES: dict[str, Callable[[bool], tuple[dict[str, Any], list[Row]]]] = {
    "core_ops": core_ops,
    "memmap_io": memmap_io,
    "map_iter": map_iter,
    "cpu_bound": cpu_bound,
    "epochs": epochs,
    "cold": cold,
    "ray_pool": ray_pool,
    "io_stream": io_stream,
    "consolidate": consolidate,
    "distributed": distributed,
    "compiled": compiled,
}
#: parts of the suites above, run only when named (``--only steady``): quick to re-run alone
PARTS: dict[str, Callable[[bool], tuple[dict[str, Any], list[Row]]]] = {
    "steady": steady,  # the steady-state epochs of the epochs suite
    "tiny": tiny,  # the tiny-chunks workload of the cpu_bound suite
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted([*SUITES, *PARTS]),
        help="run this suite, or this part of one (repeatable)",
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="rounds of the steady, tiny and cold parts"
    )
    parser.add_argument(
        "--big",
        action="store_true",
        help="the cold suite over a dataset of 1.5x the machine's RAM (built on first use)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other suites of an existing output: replace only the suites run "
        "(each merged suite's machine and date go in suite_machines)",
    )
    return parser.parse_args(argv)


def merged(previous: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """``previous`` with the suites of ``document`` replaced (rows, raw results, machine).

    The top-level machine stays the one of ``previous``'s run; each suite merged in records the
    machine of its own run under ``suite_machines``.

    Examples:
        >>> old = {"machine": {"date": "d0"}, "quick": False, "suites": {"a": 1, "b": 2},
        ...        "rows": [{"suite": "a", "name": "x"}, {"suite": "b", "name": "y"}]}
        >>> new = {"machine": {"date": "d1"}, "quick": False, "suites": {"b": 3},
        ...        "rows": [{"suite": "b", "name": "z"}], "seconds": 5.0}
        >>> out = merged(old, new)
        >>> out["suites"], [r["name"] for r in out["rows"]], out["suite_machines"]
        ({'a': 1, 'b': 3}, ['x', 'z'], {'b': {'date': 'd1'}})
        >>> out["machine"]
        {'date': 'd0'}
    """
    names = set(document["suites"])
    out = dict(previous)
    out["suites"] = {**previous.get("suites", {}), **document["suites"]}
    kept = [row for row in previous.get("rows", []) if row.get("suite") not in names]
    out["rows"] = kept + document["rows"]
    machines = dict(previous.get("suite_machines", {}))
    machines.update({name: document["machine"] for name in names})
    out["suite_machines"] = machines
    return out


def main(argv: list[str] | None = None) -> int:
    global REPEAT
    args = parse_args(argv)
    REPEAT = args.repeat
    torch.set_num_threads(1)  # every suite measures one thread of work per process
    names = args.only or (["cold"] if args.big else list(SUITES))
    if args.big and args.output == RESULTS:  # keep the results of the usual run
        args.output = RESULTS.with_name("results-big.json")
    if args.merge and args.output.exists():
        quick = json.loads(args.output.read_text()).get("quick")
        if quick is not args.quick:
            print(
                f"--merge: {args.output} holds a {'quick' if quick else 'full-size'} run; this "
                f"run is {'quick' if args.quick else 'full-size'}. Merge runs of one kind, or "
                "write elsewhere with --output.",
                file=sys.stderr,
            )
            return 2
    info, started = machine(), time.perf_counter()
    document: dict[str, Any] = {"machine": info, "quick": args.quick, "suites": {}, "rows": []}
    for name in names:
        if name == "ray_pool" and not ray_available():
            print("ray_pool: skipped (ray or benchmarks/ray_pool.py missing)", file=sys.stderr)
            document["suites"][name] = {"skipped": "ray or benchmarks/ray_pool.py missing"}
            continue
        print(f"{name}: running ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        if name == "cold":
            raw, rows = cold(args.quick, args.big)
        else:
            raw, rows = {**SUITES, **PARTS}[name](args.quick)
        print(f"{name}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        document["suites"][name] = raw
        document["rows"] += [{"suite": name, **row} for row in rows]
    seconds = document["seconds"] = round(time.perf_counter() - started, 1)
    document["machine"]["load_average_end"] = machine()["load_average"]
    print(machine_line(info))
    print(format_rows(document["rows"]))
    if args.merge and args.output.exists():
        document = merged(json.loads(args.output.read_text()), document)
    write_json(args.output, document)
    print(f"\n{len(document['rows'])} rows in {seconds} s; written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
