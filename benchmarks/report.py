"""The benchmark table, the machine description and results.json.

A row is a dict: ``suite``, ``name``, ``median``, ``min``, ``max`` (``min``/``max`` may be None
when a suite reports medians only), ``unit``, ``ratios`` and ``reference``. ``ratios`` maps the
name of a reference to ``{"median", "min", "max"}`` of *this row's value over the reference's*,
in the row's unit, taken within the same run: ``0.30x loop`` on a GB/s row is 0.3 times the
loop's throughput, ``0.50x upstream`` on a µs row is half upstream's time.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any

import torch

Row = dict[str, Any]

COLUMNS = ("suite", "name", "median", "min", "max", "unit", "ratio", "target / upstream")


def number(x: float | None) -> str:
    """A figure with three significant digits or so, thousands separated."""
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def ratio_text(ratios: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{r['median']:.2f}x {name}" for name, r in ratios.items())


def table_cells(row: Row) -> list[str]:
    return [
        row.get("suite", ""),
        row["name"],
        number(row["median"]),
        number(row.get("min")),
        number(row.get("max")),
        row["unit"],
        ratio_text(row.get("ratios", {})),
        row.get("reference", ""),
    ]


def format_rows(rows: list[Row], markdown: bool = False) -> str:
    """The rows as an aligned text table (or a Markdown table)."""
    cells = [list(COLUMNS)] + [table_cells(r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(c) + " |" for c in cells]
        lines.insert(1, "|" + "|".join("---" for _ in COLUMNS) + "|")
        return "\n".join(lines)
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    numeric = {2, 3, 4}
    lines = []
    for c in cells:
        parts = [
            v.rjust(w) if i in numeric else v.ljust(w) for i, (v, w) in enumerate(zip(c, widths))
        ]
        lines.append("  ".join(parts).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _first_line(path: str, prefix: str) -> str | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    """CPU model, cores, RAM, kernel, Python and torch versions, date and load."""
    mem_kb = _first_line("/proc/meminfo", "MemTotal")
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    return {
        "cpu": _first_line("/proc/cpuinfo", "model name") or platform.processor(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "ram_gib": None if mem_kb is None else round(int(mem_kb.split()[0]) / 2**20, 1),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def machine_line(info: dict[str, Any]) -> str:
    load = info.get("load_average")
    load_text = "" if not load else f", load {load[0]:.1f}"
    return (
        f"{info['cpu']}, {info['usable_cores']} cores, {info['ram_gib']} GiB RAM, "
        f"{info['kernel']}, Python {info['python']}, torch {info['torch']}, "
        f"{info['date']}{load_text}"
    )


def write_json(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(document, indent=2, default=str) + "\n")
    os.replace(tmp, path)
