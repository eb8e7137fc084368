"""Smoke test of the benchmark suite: it runs and its table and results.json have their shape.

No timing is asserted: speed is what ``make bench`` reports, not what a test checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from benchmarks import map_iter
from benchmarks.core_ops import UPSTREAM_US
from benchmarks.data import ROW_BYTES, cache_root, dataset, rows_for
from benchmarks.report import COLUMNS, format_rows
from benchmarks.workloads import reduce_chunk

REPO = Path(__file__).resolve().parents[1]
ROW_KEYS = {"suite", "name", "median", "min", "max", "unit", "ratios", "reference"}


def test_run_quick_writes_table_and_results(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "core_ops"]
        + ["--output", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert all(column in done.stdout for column in COLUMNS)
    assert "td[10:20]" in done.stdout
    document = json.loads(output.read_text())
    assert {"cpu", "cores", "ram_gib", "kernel", "torch", "date"} <= set(document["machine"])
    assert set(document["suites"]) == {"core_ops"}
    assert document["quick"] is True
    for row in document["rows"]:
        assert set(row) >= ROW_KEYS
        assert row["suite"] == "core_ops"
        assert row["median"] > 0
    # upstream in the same run, or the issues' figure (UPSTREAM_US) when it is not installed:
    # rows the issues never timed (tensorclass, definitions) have a reference only in the former
    ops = [
        row
        for row in document["rows"]
        if row["name"] in UPSTREAM_US or "measured in this run" in row["reference"]
    ]
    assert {row["name"] for row in ops} >= {"td[10:20]", "clone", "apply(x + 1)"}
    for row in document["rows"]:
        if row not in ops and not row["name"].startswith("tensorclass"):
            assert row["ratios"] == {} and row["reference"] == "upstream venv missing"
    for row in ops:
        assert row["ratios"]["upstream"]["median"] > 0
        assert "measured in this run" in row["reference"] or "issues' figure" in row["reference"]


def test_merge_replaces_only_the_suites_run(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    other = {"suite": "epochs", "name": "kept", "median": 1.0, "unit": "s", "ratios": {}}
    stale = {"suite": "core_ops", "name": "stale", "median": 1.0, "unit": "µs", "ratios": {}}
    previous = {
        "machine": {"date": "earlier"},
        "quick": True,
        "suites": {"epochs": {"raw": 1}, "core_ops": {"raw": 2}},
        "rows": [other, stale],
    }
    output.write_text(json.dumps(previous))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "core_ops", "--merge"]
        + ["--output", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        # merging is what is tested: upstream's side (when installed) would double the run
        env={**os.environ, "TD_UPSTREAM_PYTHON": str(tmp_path / "no-upstream")},
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(output.read_text())
    assert document["machine"] == {"date": "earlier"}
    assert document["suites"]["epochs"] == {"raw": 1}
    assert document["suites"]["core_ops"] != {"raw": 2}
    names = [row["name"] for row in document["rows"]]
    assert "kept" in names and "stale" not in names and "td[10:20]" in names
    assert document["suite_machines"]["core_ops"]["date"] != "earlier"


def test_merge_refuses_a_run_of_the_other_size(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    output.write_text(json.dumps({"machine": {}, "quick": False, "suites": {}, "rows": []}))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "core_ops", "--merge"]
        + ["--output", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "full-size run" in done.stderr
    assert json.loads(output.read_text())["rows"] == []


def test_only_rejects_an_unknown_suite() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--only", "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_map_iter_rows_have_ratios_to_the_loop_and_dataloader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    td, reused = dataset(256 * ROW_BYTES)
    assert not reused
    rows = map_iter.throughput(td, reduce_chunk, "reduce", repeat=1, shuffle=True)
    rows += map_iter.tiny_chunks(td[:50], repeat=1)
    names = [row["name"].split(": ")[1] for row in rows]
    assert names == ["loop", "map_iter", "map_iter shuffle", "DataLoader"] + [
        "loop",
        "map_iter",
        "DataLoader",
    ]
    by_name = {row["name"]: row for row in rows}
    assert set(by_name["reduce 256 KiB: map_iter"]["ratios"]) == {"loop", "DataLoader"}
    assert by_name["tiny 50 rows: map_iter"]["unit"] == "chunks/s"
    table = format_rows([{"suite": "map_iter", **row} for row in rows])
    assert len(table.splitlines()) == len(rows) + 2  # header and rule


def test_dataset_is_reused_when_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    first, reused_first = dataset(100 * ROW_BYTES)
    second, reused_second = dataset(100 * ROW_BYTES)
    assert (reused_first, reused_second) == (False, True)
    assert first["x"].equal(second["x"])


def test_dataset_is_rebuilt_without_its_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    dataset(100 * ROW_BYTES)
    (cache_root() / f"rows-{rows_for(100 * ROW_BYTES)}" / "manifest.json").unlink()
    _, reused = dataset(100 * ROW_BYTES)
    assert not reused


def test_cpu_bound_rows_compare_every_contender_with_the_bare_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import cpu_bound

    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    td = cpu_bound._source("images", 64)
    rows = cpu_bound.workload("decode", td, 32, repeat=1)
    names = [row["name"].split(": ")[1] for row in rows]
    assert names == ["loop", "loop, default threads", "map_iter", "DataLoader", "bare processes"]
    by_name = {row["name"].split(": ")[1]: row for row in rows}
    assert set(by_name["map_iter"]["ratios"]) == {"loop", "bare processes"}
    assert set(by_name["bare processes"]["ratios"]) == {"loop"}
    assert all(row["unit"] == "rows/s" and row["median"] > 0 for row in rows)


def test_cpu_bound_workloads_compute_the_same_in_a_loop_and_in_map_iter() -> None:
    import torch
    from benchmarks import cpu_bound

    from tensordict import TensorDict

    td = TensorDict({"x": torch.randn(40, 256)}, [40])
    for name in ("pyrows", "matmul"):
        fn = cpu_bound.WORKLOADS[name][0]
        got = td.map(fn, num_workers=2, chunksize=16, generator=torch.Generator())["y"]
        assert torch.allclose(got, fn(td)["y"])


def test_epochs_rows_report_the_persistent_pool_against_both_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import epochs

    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(epochs, "CHUNK", 64)
    rows = epochs.run(size=256 * ROW_BYTES, epochs=2, repeat=1)["rows"]
    assert [row["name"].split(": ")[1] for row in rows] == [
        "persistent pool (mean epoch)",
        "fresh pool per epoch (mean epoch)",
        "DataLoader persistent (mean epoch)",
    ]
    assert set(rows[0]["ratios"]) == {"fresh pool", "DataLoader"}


def test_shuffle_gather_visits_every_row_once_in_permuted_chunks() -> None:
    import torch
    from benchmarks import cpu_bound

    from tensordict import TensorDict

    td = TensorDict({"x": torch.arange(40.0)}, [40])
    gather = cpu_bound.Gather(lambda chunk: chunk["x"], td)
    positions = TensorDict({"i": torch.arange(40)}, [40])
    chunks = [gather(positions[s : s + 16]) for s in range(0, 40, 16)]
    seen = torch.cat(chunks)
    assert torch.equal(seen.sort().values, td["x"])
    assert not torch.equal(seen, td["x"])  # permuted, not in order


def test_chunk_cost_defaults_when_no_workload_is_named_and_rejects_unknown_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import chunk_cost

    assert chunk_cost.parse_args([]).workloads == chunk_cost.DEFAULT_WORKLOADS
    assert chunk_cost.parse_args(["transform", "tiny"]).workloads == ["transform", "tiny"]
    with pytest.raises(SystemExit) as exit_info:
        chunk_cost.parse_args(["tiny", "nope"])
    assert exit_info.value.code == 2
    assert "nope" in capsys.readouterr().err


def test_distributed_rows_rate_here_against_upstream_and_the_limits() -> None:
    from benchmarks import distributed

    ops = ("send/recv", "broadcast")
    limits = (*ops, "broadcast (fresh buffer)", "broadcast + source copy")
    medians = {
        "here": [dict.fromkeys(ops, 0.5)],
        "upstream": [dict.fromkeys(ops, 1.0)],
        "limit": [dict.fromkeys(limits, 0.4)],
    }
    row = distributed._row("broadcast", "here", medians, 10**9)
    assert row["unit"] == "GB/s" and row["median"] == 2.0  # 1 GB in 0.5 s
    assert row["ratios"] == {
        "upstream": {"median": 2.0},  # twice upstream's rate
        "limit": {"median": 0.8},
        "limit, fresh buffer": {"median": 0.8},
        "limit + source copy": {"median": 0.8},
    }
    assert set(distributed._row("send/recv", "here", medians, 10**9)["ratios"]) == {
        "upstream", "limit",
    }  # fmt: skip


def test_compiled_workloads_run_and_write_what_they_should() -> None:
    import torch
    from benchmarks import compiled

    policy, policy_args = compiled._BUILDERS["policy"]()
    td = policy.step(policy)(*policy_args())
    assert {"action", "action_log_prob"} <= set(td.keys()) and not td["action"].requires_grad
    loss, loss_args = compiled._BUILDERS["ppo loss"]()
    losses = loss(*loss_args())
    assert set(losses.keys()) == {"loss_objective", "loss_critic", "loss_entropy"}
    loss.step(loss)(*loss_args())  # forward + backward, gradients dropped after the step
    chain, chain_args = compiled._BUILDERS["arithmetic + apply"]()
    (td,) = chain_args()
    assert (chain(td)["nested", "n0"] >= 0).all() and chain(td).batch_size == torch.Size([1000])


def test_compiled_rows_take_per_round_ratios_to_upstream_and_to_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import compiled

    figures = {"ours": (2.0, 50.0, 100.0), "upstream": (4.0, 40.0, 80.0)}

    def fake(python: object, repeat: int) -> dict[str, dict[str, float]]:
        side = "upstream" if python == compiled.UPSTREAM_PYTHON else "ours"
        return {w: dict(zip(compiled.FIGURES, figures[side])) for w in compiled.WORKLOADS}

    monkeypatch.setattr(compiled, "_measure_in", fake)
    monkeypatch.setattr(compiled, "UPSTREAM_PYTHON", Path(sys.executable))  # (exists)
    monkeypatch.setattr(compiled.sys, "executable", "ours")
    rows = {r["name"]: r for r in compiled.run(rounds=2, repeat=1)["rows"]}
    assert rows["policy: compile"]["ratios"] == {"upstream": 0.5}
    assert rows["policy: compiled step"]["ratios"] == {"upstream": 1.25, "eager": 0.5}
    assert rows["ppo loss: eager step"]["median"] == 100.0


# ---------------------------------------------------------------------- [perf-3]
def test_cold_read_plan_names_each_chunks_bytes_in_file_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from benchmarks import cold

    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    td, _ = dataset(64 * ROW_BYTES, read=False)
    assert cold.read_plan(td, None, 16) == [
        [(0, 16 * s * ROW_BYTES, 16 * ROW_BYTES)] for s in range(4)
    ]
    sparse = td[::8]  # rows 0, 8, ..., 56 of the file
    perm = torch.tensor([3, 0, 7, 5, 1, 2, 6, 4])
    plan = cold.read_plan(sparse, perm, 4)
    assert plan[0] == [(0, r * 8 * ROW_BYTES, ROW_BYTES) for r in (0, 3, 5, 7)]
    assert plan[1] == [(0, r * 8 * ROW_BYTES, ROW_BYTES) for r in (1, 2, 4, 6)]


def test_cold_rows_compare_every_contender_with_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import cold

    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(cold, "UPSTREAM_PYTHON", tmp_path / "no-upstream-python")
    monkeypatch.setattr(cold, "CHUNK", 64)
    raw = cold.run(256 * ROW_BYTES, repeat=1, shuffled_rows=64, shuffled_chunk=16)
    names = [row["name"].split(": ", 1)[1] for row in raw["rows"]]
    contenders = ["loop", "map_iter", "DataLoader", "limit"]
    memory = ["map_iter peak private memory"]
    assert names == contenders + memory + contenders + memory
    by_name = {row["name"]: row for row in raw["rows"]}
    assert set(by_name["cold sequential 256 KiB: map_iter"]["ratios"]) == {"limit", "loop"}
    assert all(row["median"] > 0 for row in raw["rows"])
    assert raw["setting"]["shuffled_stride"] == 4
    assert raw["setting"]["resident_after_eviction"] <= 0.01 or not _evicts(tmp_path)


def _evicts(folder: Path) -> bool:
    """Whether the file system under ``folder`` drops evicted pages (not tmpfs)."""
    from tensordict.memmap import MemoryMappedTensor, pagecache

    x = MemoryMappedTensor.zeros(4096, filename=folder / "probe.memmap")
    pagecache.unmap_pages(x)
    pagecache.evict_file(x.filename)
    vec = pagecache.residency(*pagecache.mapping(x))
    return vec is not None and not vec.any()


def test_bare_processes_that_send_deliver_every_result() -> None:
    import torch
    from benchmarks.workloads import bare_processes

    from tensordict import TensorDict

    td = TensorDict({"x": torch.randn(50, 4)}, [50])
    assert bare_processes(td, reduce_chunk, 1, send=True) == 50
    assert bare_processes(td, reduce_chunk, 7, send=True) == 8


def test_steady_epochs_rows_compare_the_pool_with_both_persistent_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import epochs

    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    monkeypatch.setitem(epochs.STEADY, "reduce", (reduce_chunk, 256 * ROW_BYTES, 32, "GB/s"))
    rows = epochs.steady(["reduce"], epochs=2, repeat=1, scale=0.5)["rows"]
    assert [row["name"].split(": ")[1] for row in rows] == [
        "loop",
        "WorkerPool",
        "persistent limit",
        "persistent limit + send",
        "persistent limit + shm x4",
        "persistent limit + shm x16 in place",
    ]
    pool = rows[1]
    assert set(pool["ratios"]) == {
        "loop",
        "persistent limit",
        "persistent limit + send",
        "persistent limit + shm x4",
        "persistent limit + shm x16 in place",
        "by CPU: persistent limit",
    }
    for floor in rows[4:]:
        assert set(floor["ratios"]) == {"loop", "persistent limit", "by CPU: persistent limit"}
    assert "by CPU: persistent limit" not in rows[2]["ratios"]  # the limit itself
    assert pool["ratios"]["by CPU: persistent limit"]["median"] > 0
    assert pool["cpu_workers_us_per_chunk"]["median"] > 0
    assert rows[0]["cpu_workers_us_per_chunk"]["median"] == 0  # the loop has no workers


@pytest.mark.parametrize("name", ["ShmEpochs", "ShmBatchEpochs", "ShmInPlaceEpochs"])
def test_the_shm_limit_runs_a_dataset_that_is_not_whole_chunks(name: str) -> None:
    # its last chunk is shorter, and so is that chunk's result (one row of features per row)
    from benchmarks import epochs
    from benchmarks.workloads import pyrows_chunk

    source, _ = dataset(rows_for(1 << 20) * ROW_BYTES, read=False)
    contender = getattr(epochs, name)(source[: 64 * 3 + 10], pyrows_chunk, 64)
    contender.start()
    try:
        contender.epoch()  # raises when a process dies or a result is missing
        contender.epoch()
    finally:
        contender.close()
    assert contender.shapes == [(64, 3)] * 3 + [(10, 3)]


@pytest.mark.parametrize("name", ["ShmBatchEpochs", "ShmInPlaceEpochs"])
def test_the_shm_limits_read_each_result_from_its_slot(name: str) -> None:
    # what a floor wraps (a copy, or a view of the slot) is the result fn returned for the chunk
    from benchmarks import epochs
    from benchmarks.workloads import pyrows_chunk

    source, _ = dataset(rows_for(1 << 20) * ROW_BYTES, read=False)
    td = source[: 64 * 3 + 10]
    contender = getattr(epochs, name)(td, pyrows_chunk, 64)
    contender.start()
    try:
        contender.epoch()
        starts = range(0, 64 * 3 + 10, 64)
        for wid in range(epochs.WORKERS):
            ring = contender._ring(wid)
            for i, s in enumerate(starts[wid :: epochs.WORKERS]):
                shape = contender.shapes[wid + i * epochs.WORKERS]
                got = contender._result(ring, i * contender.slot, shape)
                assert torch.equal(got, pyrows_chunk(td[s : s + 64])["y"])
            del ring, got
    finally:
        contender.close()


def test_the_stalls_probe_records_every_chunk_of_every_epoch_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import epochs, stalls

    monkeypatch.setenv("TENSORDICT_BENCH_CACHE", str(tmp_path))
    monkeypatch.setitem(epochs.STEADY, "reduce", (reduce_chunk, 256 * ROW_BYTES, 32, "GB/s"))
    results = stalls.measure("reduce", rounds=2, count=2, scale=0.5)
    assert set(results) == {"WorkerPool", "persistent limit", "in-place floor"}
    for figures in results.values():
        assert len(figures) == 4  # 2 rounds of 2 epochs
        for epoch in figures:
            assert sum(epoch["calls"]) == 128 // 32  # each chunk's fn, recorded once
            assert len(epoch["calls"]) == epochs.WORKERS  # both workers ran chunks
            for start, gaps, tail in zip(epoch["start"], epoch["gaps"], epoch["tail"]):
                assert min(start, gaps, tail) >= 0
                assert start + gaps + tail <= epoch["wall"]
            assert epoch["spread"] == pytest.approx(max(epoch["tail"]) - min(epoch["tail"]))
        assert stalls.summary(figures)["wall"] > 0
