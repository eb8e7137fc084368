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
    assert [p.name for p in written] == ["throughput.svg", "cpu_bound.svg", "core_ops.svg"]
    throughput = (tmp_path / "out" / "throughput.svg").read_text()
    for text in ("reduce 1 GiB", "DataLoader", "upstream map_iter", "0.75x", "Test CPU"):
        assert text in throughput, text
    assert "clone" in (tmp_path / "out" / "core_ops.svg").read_text()


def test_without_results_the_charts_say_how_to_make_them(tmp_path):
    charts.draw_all(tmp_path / "out", tmp_path / "missing.json")
    assert "run make bench" in (tmp_path / "out" / "throughput.svg").read_text()
