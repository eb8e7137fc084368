"""The charts of the performance page, drawn from ``benchmarks/results.json`` (``make bench``).

``python docs/charts.py [RESULTS] [OUT]`` draws them by hand; the docs build calls
:func:`draw_all` when it starts, so the pictures always show the results file of the tree.
Each chart is an SVG file under ``docs/_generated/``:

- ``throughput.svg``: for each workload of the map_iter and io_stream suites, the throughput of
  each contender (map_iter, DataLoader, upstream tensordict, ...) over a plain loop in one
  process, measured in the same run;
- ``cpu_bound.svg``: the same for the cpu_bound suite, with the two bare forked processes that
  bound what any engine can reach on the machine of the run;
- ``limits.svg``: the workloads measured against a limit of the machine in the same run (data
  read cold from the disk, steady-state epochs on a persistent pool, tiny chunks whose results
  are sent back): each contender's throughput over that limit, the limits hatched;
- ``core_ops.svg``: the time of each core operation over upstream's, measured in the same run
  (below 1: faster).

A row of the results is ``{"suite", "name", "median", "unit", "ratios", "reference", ...}``
(see ``benchmarks/report.py``); a workload's rows are named ``"WORKLOAD: CONTENDER"``.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results.json"
RATES = ("GB/s", "chunks/s", "rows/s")
#: contenders drawn, in this order (others are left out), and their colours
COLOURS = {
    "map_iter": "#1f77b4",
    "map_iter shuffle": "#6baed6",
    "DataLoader": "#ff7f0e",
    "upstream map_iter": "#7f7f7f",
    "upstream (issues' figure)": "#bdbdbd",  # its ratio to its loop, quoted in the issues
    "bare processes": "#2ca02c",
}
#: the limit-bound workloads (``limits.svg``): a workload's name starts with the key; the value
#: is its limit (the contender every bar is divided by) and the target for this library
LIMITS = {
    "cold sequential": ("limit", 0.95),
    "cold shuffled": ("limit", 0.9),
    "steady": ("persistent limit", 0.95),
    "tiny": ("bare processes + send", 0.95),
}
#: contenders of ``limits.svg``, in this order, and their colours; limits are drawn hatched
LIMIT_COLOURS = {
    "map_iter": "#1f77b4",
    "WorkerPool": "#1f77b4",
    "loop": "#9467bd",
    "DataLoader": "#ff7f0e",
    "upstream map_iter": "#7f7f7f",
    "limit": "#2ca02c",
    "persistent limit": "#2ca02c",
    "bare processes + send": "#2ca02c",
    "persistent limit + send": "#98df8a",
    "persistent limit + shm x4": "#c7e9c0",
    "persistent limit + shm x16 in place": "#e5f5e0",
    "bare processes": "#98df8a",
}
HATCHED = {name for name in LIMIT_COLOURS if "limit" in name or name.startswith("bare")}


def load(path: Path = RESULTS) -> dict[str, Any] | None:
    """The results document, or None when there is none (``make bench`` writes it)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def workloads(
    rows: list[dict[str, Any]], suites: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """``{workload: {contender: throughput over the loop}}`` for the rate rows of ``suites``.

    The loop of a workload is its contender named ``loop`` (or ``... loop``: ``h5py loop``).
    Upstream ratios that the benchmarks quote instead of measuring (``upstream 3.1 GB/s
    (0.26x)`` in a row's reference: upstream over its loop, in the issue's run) are added as
    ``upstream (issues' figure)``.

    Examples:
        >>> rows = [
        ...     {"suite": "s", "name": "w: loop", "median": 2.0, "unit": "GB/s"},
        ...     {"suite": "s", "name": "w: map_iter", "median": 3.0, "unit": "GB/s",
        ...      "reference": "upstream 1.0 GB/s (0.5x)"},
        ... ]
        >>> workloads(rows, ("s",))
        {'w': {'map_iter': 1.5, "upstream (issues' figure)": 0.5}}
    """
    groups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        if (
            row.get("suite") in suites
            and row.get("unit") in RATES
            and ": " in row["name"]
        ):
            workload, contender = row["name"].split(": ", 1)
            groups[workload][contender] = row
    out: dict[str, dict[str, float]] = {}
    for workload, contenders in groups.items():
        loops = [c for c in contenders if c == "loop" or c.endswith(" loop")]
        if not loops or not contenders[loops[0]]["median"]:
            continue
        loop = contenders[loops[0]]
        ratios = {
            name: row["median"] / loop["median"]
            for name, row in contenders.items()
            if name in COLOURS
        }
        quoted = _quoted_upstream(contenders.get("map_iter", {}))
        if quoted is not None and "upstream map_iter" not in ratios:
            ratios["upstream (issues' figure)"] = quoted
        if ratios:
            out[workload] = ratios
    return out


def _quoted_upstream(row: dict[str, Any]) -> float | None:
    """Upstream's throughput over its loop, as the issues quote it in a row's reference:
    ``upstream 3.1 GB/s (0.26x)`` or ``upstream 0.26x loop``. Absolute figures alone (``upstream
    424/s``) were measured on another machine and are not comparable: None.

    Examples:
        >>> _quoted_upstream({"reference": "target >= 1.5x loop; upstream 3.1 GB/s (0.26x)"})
        0.26
        >>> _quoted_upstream({"reference": "upstream 424/s"}) is None
        True
    """
    text = row.get("reference", "") or ""
    match = re.search(r"upstream [\d.,]+ \S+ \(([\d.]+)x\)", text) or re.search(
        r"upstream ([\d.]+)x loop", text
    )
    return float(match.group(1)) if match else None


def limits(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """``{panel title: {contender: throughput over the workload's limit}}`` for the workloads
    of ``LIMITS``, whichever suite ran them (``cold``; ``epochs`` or ``steady``; ``cpu_bound``
    or ``tiny``). The title names the limit and the target.

    Examples:
        >>> rows = [
        ...     {"suite": "tiny", "name": "tiny: bare processes + send", "median": 4.0,
        ...      "unit": "chunks/s"},
        ...     {"suite": "tiny", "name": "tiny: map_iter", "median": 3.0, "unit": "chunks/s"},
        ... ]
        >>> panels = limits(rows)
        >>> list(panels)
        ['tiny (target >= 0.95x bare processes + send)']
        >>> panels['tiny (target >= 0.95x bare processes + send)']
        {'map_iter': 0.75, 'bare processes + send': 1.0}
    """
    groups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        workload, _, contender = row["name"].partition(": ")
        if (
            row.get("unit") in RATES
            and contender in LIMIT_COLOURS
            and row.get("median")
        ):
            groups[workload][contender] = row
    out: dict[str, dict[str, float]] = {}
    for workload, contenders in groups.items():
        family = next((f for f in LIMITS if f"{workload} ".startswith(f + " ")), None)
        if family is None or LIMITS[family][0] not in contenders:
            continue
        limit, target = LIMITS[family]
        title = f"{workload} (target >= {target}x {limit})"
        out[title] = {
            name: contenders[name]["median"] / contenders[limit]["median"]
            for name in LIMIT_COLOURS
            if name in contenders
        }
    return out


def core_ops(rows: list[dict[str, Any]]) -> dict[str, float]:
    """``{operation: its time over upstream's}`` for the core_ops suite."""
    return {
        row["name"]: row["ratios"]["upstream"]["median"]
        for row in rows
        if row.get("suite") == "core_ops" and "upstream" in row.get("ratios", {})
    }


def caption(document: dict[str, Any]) -> str:
    """Where and when the results were measured, for the charts' titles."""
    machine = document.get("machine", {})
    date = str(machine.get("date", "?"))[:16].replace("T", " ")
    quick = " (--quick: small sizes)" if document.get("quick") else ""
    load = machine.get("load_average")
    busy = ""
    if (
        load and load[0] > 1.5
    ):  # more than the benchmark's own workers: a shared machine
        busy = f", load {load[0]:.1f} (other processes shared the CPUs)"
    cpus = f"{machine.get('cpu', '?')}, {machine.get('usable_cores', '?')} cores"
    return f"make bench: {cpus}, {date}{quick}{busy}"


def _colour(name: str, value: float) -> str:
    """A contender's colour; an operation (not a contender) is green when faster than upstream."""
    if name in COLOURS:
        return COLOURS[name]
    if name in LIMIT_COLOURS:
        return LIMIT_COLOURS[name]
    return "#2ca02c" if value <= 1.0 else "#d62728"


def _bars(ax: Any, values: dict[str, float], title: str, hatched: bool = False) -> None:
    names = list(values)
    bars = ax.barh(
        range(len(names)),
        [values[n] for n in names],
        height=0.7,
        color=[_colour(n, values[n]) for n in names],
    )
    for bar, name in zip(bars, names):
        if name in HATCHED and hatched:  # a limit of the machine, not a contender
            bar.set_hatch("//")
            bar.set_edgecolor("white")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.axvline(1.0, color="black", linewidth=1)
    top = max([1.0, *values.values()])
    for i, n in enumerate(names):
        ax.text(
            values[n] + top * 0.015, i, f"{values[n]:.2f}x", va="center", fontsize=8
        )
    ax.set_xlim(0, top * 1.25)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title(title, fontsize=9, loc="left")


def _figure(
    panels: dict[str, dict[str, float]],
    reference: str,
    title: str,
    out: Path,
    hatched: bool = False,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = (
        "none"  # text stays text: small files, searchable
    )
    import matplotlib.pyplot as plt

    columns = 2 if len(panels) > 2 else 1
    rows = max(1, -(-len(panels) // columns))
    bars = max([len(v) for v in panels.values()] or [1])
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(
            5.2 * columns if columns > 1 else 8.0,
            rows * (0.32 * bars + 0.9) + 0.9,
        ),
        squeeze=False,
        layout="constrained",
    )
    for ax, (name, values) in zip(axes.flat, panels.items()):
        _bars(ax, values, name, hatched)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_axis_off()
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no rows in benchmarks/results.json", ha="center")
    fig.suptitle(title, fontsize=8, x=0.01, ha="left", color="#555555")
    fig.supxlabel(reference, fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None})  # same input, same file
    plt.close(fig)


def draw_all(out_dir: Path, results: Path = RESULTS) -> list[Path]:
    """Draw every chart into ``out_dir``; returns the files written."""
    document = load(results)
    out_dir = Path(out_dir)
    if document is None:
        document = {
            "rows": [],
            "machine": {"cpu": "no benchmarks/results.json: run make bench"},
        }
    rows, where = document.get("rows", []), caption(document)
    charts = {
        "throughput.svg": (
            workloads(rows, ("map_iter", "io_stream")),
            "throughput over a plain loop in one process (1 = the loop; higher is faster)",
        ),
        "cpu_bound.svg": (
            workloads(rows, ("cpu_bound",)),
            "throughput over a plain loop in one process (1 = the loop; higher is faster)",
        ),
        "limits.svg": (
            limits(rows),
            "throughput over the limit of the machine measured in the same run"
            " (1 = the limit, hatched; higher is faster)",
        ),
        "core_ops.svg": (
            {"core operations": core_ops(rows)} if core_ops(rows) else {},
            "time over upstream 0.15.3's in the same run (1 = upstream; lower is faster)",
        ),
    }
    written = []
    for name, (panels, reference) in charts.items():
        _figure(panels, reference, where, out_dir / name, hatched=name == "limits.svg")
        written.append(out_dir / name)
    return written


if __name__ == "__main__":
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS
    target = (
        Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent / "_generated"
    )
    for path in draw_all(target, source):
        print(path)
