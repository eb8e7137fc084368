"""The performance charts are drawn from the benchmark results, whatever they hold."""

from __future__ import annotations

import json
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
sys.path.insert(0, str(DOCS))

import charts  # noqa: E402

GBS = {"unit": "GB/s"}


def results(tmp_path: Path) -> Path:
    rows = [
        {"suite": "map_iter", "name": "reduce 1 GiB: loop", "median": 10.0, "unit": "GB/s"},
        {
            "suite": "map_iter",
            "name": "reduce 1 GiB: map_iter",
            "median": 7.5,
            "unit": "GB/s",
            "reference": "target >= 1.5x loop; upstream 3.1 GB/s (0.26x)",
        },
        {"suite": "map_iter", "name": "reduce 1 GiB: DataLoader", "median": 5.0, "unit": "GB/s"},
        {"suite": "map_iter", "name": "first chunk (fork)", "median": 0.02, "unit": "s"},
        {"suite": "io_stream", "name": "h5 1 GiB: h5py loop", "median": 2.0, "unit": "GB/s"},
        {"suite": "io_stream", "name": "h5 1 GiB: map_iter", "median": 1.0, "unit": "GB/s"},
        {"suite": "io_stream", "name": "h5 1 GiB: upstream map_iter", "median": 0.5, **GBS},
        {
            "suite": "core_ops",
            "name": "clone",
            "median": 25.0,
            "unit": "µs",
            "ratios": {"upstream": {"median": 0.4}},
        },
    ]
    doc = {"machine": {"cpu": "Test CPU", "usable_cores": 2, "date": "2026-12-01T11:05"}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**doc, "rows": rows}))
    return path


def test_workloads_are_ratios_to_their_loop_within_the_run(tmp_path):
    rows = json.loads(results(tmp_path).read_text())["rows"]
    panels = charts.workloads(rows, ("map_iter", "io_stream"))
    assert panels == {
        "reduce 1 GiB": {
            "map_iter": 0.75,
            "DataLoader": 0.5,
            "upstream (issues' figure)": 0.26,
        },
        "h5 1 GiB": {"map_iter": 0.5, "upstream map_iter": 0.25},
    }
    assert charts.core_ops(rows) == {"clone": 0.4}


def test_draw_all_writes_three_svg_charts_naming_each_contender(tmp_path):
    written = charts.draw_all(tmp_path / "out", results(tmp_path))
    names = ["throughput.svg", "cpu_bound.svg", "limits.svg", "core_ops.svg"]
    assert [p.name for p in written] == names
    throughput = (tmp_path / "out" / "throughput.svg").read_text()
    for text in ("reduce 1 GiB", "DataLoader", "upstream map_iter", "0.75x", "Test CPU"):
        assert text in throughput, text
    assert "clone" in (tmp_path / "out" / "core_ops.svg").read_text()


def limit_rows() -> list[dict]:
    def row(suite: str, name: str, median: float) -> dict:
        return {"suite": suite, "name": name, "median": median, "unit": "GB/s"}

    return [
        row("cold", "cold sequential 4 GiB: loop", 1.0),
        row("cold", "cold sequential 4 GiB: map_iter", 1.9),
        row("cold", "cold sequential 4 GiB: map_iter before", 1.2),  # an A/B tree: left out
        row("cold", "cold sequential 4 GiB: limit", 2.0),
        row("cold", "cold shuffled 128 MiB: map_iter", 0.09),
        row("cold", "cold shuffled 128 MiB: limit", 0.03),
        row("epochs", "steady reduce 2 GiB: WorkerPool", 9.0),
        row("epochs", "steady reduce 2 GiB: persistent limit", 10.0),
        row("epochs", "steady reduce 2 GiB: persistent limit + send", 9.5),
        row("cpu_bound", "tiny 20 rows x 1: map_iter", 3.0),
        row("cpu_bound", "tiny 20 rows x 1: bare processes", 5.0),
        row("cpu_bound", "tiny 20 rows x 1: bare processes + send", 4.0),
        row("cpu_bound", "reduce 1 GiB: bare processes", 4.0),  # no limit of [perf-3]
        row("steady", "steady pyrows 8 MiB: WorkerPool", 1.0),  # its limit did not run
        {**row("cold", "cold sequential 4 GiB: map_iter peak private memory", 50), "unit": "MiB"},
    ]


def test_limit_bound_workloads_are_ratios_to_their_own_limit_in_the_run():
    panels = charts.limits(limit_rows())
    assert panels == {
        "cold sequential 4 GiB (target >= 0.95x limit)": {
            "map_iter": 0.95,
            "loop": 0.5,
            "limit": 1.0,
        },
        "cold shuffled 128 MiB (target >= 0.9x limit)": {"map_iter": 3.0, "limit": 1.0},
        "steady reduce 2 GiB (target >= 0.95x persistent limit)": {
            "WorkerPool": 0.9,
            "persistent limit": 1.0,
            "persistent limit + send": 0.95,
        },
        "tiny 20 rows x 1 (target >= 0.95x bare processes + send)": {
            "map_iter": 0.75,
            "bare processes + send": 1.0,
            "bare processes": 1.25,
        },
    }


def test_the_limits_chart_hatches_the_limits_only(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"machine": {"cpu": "Test CPU"}, "rows": limit_rows()}))
    charts.draw_all(tmp_path / "out", path)
    svg = (tmp_path / "out" / "limits.svg").read_text()
    for text in ("cold shuffled 128 MiB", "WorkerPool", "bare processes + send", "3.00x"):
        assert text in svg, text
    assert "<pattern" in svg  # the limits' hatching
    assert "map_iter before" not in svg
    assert "<pattern" not in (tmp_path / "out" / "cpu_bound.svg").read_text()


def test_without_results_the_charts_say_how_to_make_them(tmp_path):
    charts.draw_all(tmp_path / "out", tmp_path / "missing.json")
    assert "run make bench" in (tmp_path / "out" / "throughput.svg").read_text()
