"""The demo: end to end as a user runs it, the dataset cache, the checks and the exit status."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tensordict import TensorDict
from tensordict.demo import dataset, main, report
from tensordict.demo.main import parse_args
from tensordict.demo.stages import StageResult

TINY = ["--size", "8MiB", "--workers", "2", "--chunksize", "1024", "--batch-size", "1024"]
STAGES = [
    "reduce: map_iter",
    "reduce: in-process loop",
    "reduce: DataLoader",
    "features: map_iter",
    "features: in-process loop",
    "features: DataLoader",
    "normalise: map(out=memmap_like)",
    "shuffled epoch: map_iter(shuffle=True)",
    "shuffled epoch 2: same WorkerPool",
]


def run_demo(directory: Path) -> subprocess.CompletedProcess[str]:
    """``python -m tensordict.demo`` at a tiny size, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "tensordict.demo", *TINY, "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=240,
    )


def table_rows(stdout: str) -> dict[str, str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stage "))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.strip() or line.startswith("GB/s"):
            break
        name = line.split("  ")[0].strip()
        rows[name] = line
    return rows


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    directory = tmp_path_factory.mktemp("demo")
    return run_demo(directory), directory


# ---------------------------------------------------------------------- end to end
def test_demo_exits_0_and_every_check_passes(first_run):
    res, _ = first_run
    assert res.returncode == 0, res.stdout + res.stderr
    checks = [line for line in res.stdout.splitlines() if line.startswith("  ok ")]
    assert len(checks) == 6
    assert "FAILED" not in res.stdout


def test_demo_prints_a_row_per_stage(first_run):
    res, _ = first_run
    rows = table_rows(res.stdout)
    assert list(rows) == ["build dataset", *STAGES]
    header = next(line for line in res.stdout.splitlines() if line.startswith("stage "))
    for column in ("workers", "seconds", "GB/s", "chunks/s", "peak private"):
        assert column in header
    for name in STAGES:
        cells = rows[name][len(name) :].split()
        assert cells[0] == ("-" if "loop" in name else "2")
        assert all(float(c) >= 0 for c in cells[1:4])  # seconds, GB/s, chunks/s
        assert cells[5] in ("KiB", "MiB", "GiB")  # peak private, e.g. "154 MiB"
    assert "Same reduce, same run: map_iter " in res.stdout
    assert "in-process loop " in res.stdout and "DataLoader " in res.stdout


def test_every_progress_bar_names_its_stage(first_run):
    res, _ = first_run
    bars = [line for line in res.stderr.replace("\r", "\n").splitlines() if "100%|" in line]
    labels = {line.split(": 100%")[0].strip() for line in bars}
    assert labels == {
        "building the dataset",
        "reduce: map_iter",
        "features: map_iter",
        "normalise: map(out=)",
        "shuffled epoch 1",
        "shuffled epoch 2",
    }
    assert all(": 100%|" in line for line in bars), bars


def test_the_table_columns_are_explained_one_line_each(first_run):
    res, _ = first_run
    lines = res.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("GB/s ")))
    legend = lines[start : start + 4]
    assert [line.split("  ")[0] for line in legend] == [
        "GB/s",
        "chunks/s",
        "peak private",
        "of which shm",
    ]
    assert all(len(line) <= 100 for line in legend)
    assert "Pss_Anon" not in res.stdout and "Shmem" not in res.stdout


def test_demo_says_where_its_dataset_lives_and_how_to_remove_it(first_run):
    res, directory = first_run
    first_lines = res.stdout.splitlines()[:3]
    assert any(f"dataset folder {directory}" in line for line in first_lines)
    last = res.stdout.splitlines()[-1]
    assert f"stay in {directory}" in last and f"rm -r {directory}" in last
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    assert report_size(last) == pytest.approx(size, rel=0.01)


def test_the_default_folder_is_removed_by_make_clean(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    demo_main = sys.modules["tensordict.demo.main"]
    assert demo_main._removal(demo_main.default_cache_dir()).startswith("`make clean`")
    assert demo_main._removal(tmp_path / "elsewhere") == f"`rm -r {tmp_path / 'elsewhere'}`"
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    clean = makefile.split("\nclean:", 1)[1].split("\n\n", 1)[0]
    assert "$(DEMO_DIR)" in clean
    assert "DEMO_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tensordict-demo" in makefile


def report_size(line: str) -> float:
    """The bytes of the first ``(12.0 MiB)`` in ``line``."""
    number, unit = re.search(r"\(([\d.]+) (B|KiB|MiB|GiB)\)", line).groups()
    return float(number) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]


def test_demo_closing_lines_are_computed_from_the_table(first_run):
    res, _ = first_run
    rows = table_rows(res.stdout)

    def seconds(name: str) -> float:
        return float(rows[name][len(name) :].split()[1])

    text = " ".join(res.stdout.split())

    def consistent(ratio: float, loop: str, engine: str) -> bool:
        # the table rounds seconds to 10 ms and the verdict its ratio to 0.01: the verdict holds
        # when its ratio lies between the extremes the rounded table allows
        a, b = seconds(loop), seconds(engine)
        low = max(a - 0.005, 0.0) / (b + 0.005)
        high = (a + 0.005) / max(b - 0.005, 1e-9)
        return low - 0.006 <= ratio <= high + 0.006

    match = re.search(r"([0-9.]+)x on the per-row Python features, ([0-9.]+)x on the reduce", text)
    assert match, text
    assert consistent(float(match[1]), "features: in-process loop", "features: map_iter")
    assert consistent(float(match[2]), "reduce: in-process loop", "reduce: map_iter")
    epoch = re.search(r"the first ([0-9.]+) s \(starts the workers\), the second ([0-9.]+) s", text)
    assert epoch, text
    assert float(epoch[1]) == seconds("shuffled epoch: map_iter(shuffle=True)")
    assert float(epoch[2]) == seconds("shuffled epoch 2: same WorkerPool")


def _stage(seconds: float, workers: int = 2) -> StageResult:
    return StageResult("s", workers, seconds, 10, 1, None)


@pytest.mark.parametrize(
    ("features", "reduce", "says"),
    [
        ((1.0, 2.0), (2.0, 1.0), ["map_iter wins where each byte needs CPU", "The loop wins"]),
        ((2.0, 1.0), (2.0, 1.0), ["did not beat the loop even on CPU-bound", "The loop wins"]),
        ((1.0, 2.0), (1.0, 2.0), ["map_iter wins where", "the reduce gains too"]),
    ],
)
def test_verdict_says_who_wins_from_the_figures(features, reduce, says):
    text = report.format_verdict(
        (_stage(reduce[0]), _stage(reduce[1], 0)),
        (_stage(features[0]), _stage(features[1], 0)),
        (_stage(1.0), _stage(0.25)),
    )
    flat = " ".join(text.split())
    for phrase in says:
        assert phrase in flat
    assert "the second 0.25 s (0.25x)" in flat


def test_features_that_differ_fail_the_agreement_check():
    a = torch.zeros(3, 3)
    assert report.check_features_agree({"a": a, "b": a.clone()}).ok
    assert not report.check_features_agree({"a": a, "b": a + 1}).ok
    assert not report.check_features_agree({"a": a, "b": a[:2]}).ok


def test_demo_writes_the_dataset_and_the_normalised_copy(first_run):
    _, directory = first_run
    rows = dataset.rows_for(8 * 2**20)
    assert dataset.load_if_intact(directory, rows) is not None
    normalised = TensorDict.load_memmap(directory / "normalised")
    assert normalised.batch_size == torch.Size([rows])
    assert torch.equal(normalised["id"], torch.arange(rows))
    assert normalised["obs"].mean(0).abs().max() < 1e-3


def test_second_run_reuses_the_dataset(first_run):
    _, directory = first_run
    obs = directory / "source" / "obs.memmap"
    before = os.stat(obs)
    res = run_demo(directory)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"reused {directory / 'source'}" in res.stdout
    assert "dataset (reused, verified)" in table_rows(res.stdout)
    after = os.stat(obs)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_corrupted_cache_is_rebuilt(tmp_path):
    rows = dataset.rows_for(8 * 2**20)
    dataset.build(tmp_path, rows, progress=False)
    with open(tmp_path / "source" / "obs.memmap", "r+b") as f:
        f.truncate(4096)
    res = run_demo(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"built {tmp_path / 'source'}" in res.stdout
    assert dataset.load_if_intact(tmp_path, rows) is not None


# ---------------------------------------------------------------------- the dataset cache
ROWS = 300


@pytest.fixture
def built(tmp_path) -> Path:
    dataset.build(tmp_path, ROWS, progress=False)
    return tmp_path


def test_built_dataset_has_its_shapes_and_ids(built):
    data = dataset.load_if_intact(built, ROWS)
    assert data is not None
    assert data["obs"].shape == (ROWS, dataset.FEATURES) and data["obs"].dtype == torch.float32
    assert torch.equal(data["id"], torch.arange(ROWS))
    assert int(data["label"].min()) >= 0 and int(data["label"].max()) < 10


def test_open_dataset_reuses_an_intact_dataset(built):
    data, reused = dataset.open_dataset(built, ROWS, progress=False)
    assert reused and data.batch_size == torch.Size([ROWS])


def test_dataset_of_another_size_is_not_reused(built):
    assert dataset.load_if_intact(built, ROWS + 1) is None
    data, reused = dataset.open_dataset(built, ROWS + 1, progress=False)
    assert not reused and data.batch_size == torch.Size([ROWS + 1])


def test_interrupted_build_without_manifest_is_not_reused(built):
    os.unlink(dataset.manifest_path(built))
    assert dataset.load_if_intact(built, ROWS) is None


def test_missing_metadata_is_not_reused(built):
    os.unlink(built / "source" / "meta.json")
    assert dataset.load_if_intact(built, ROWS) is None


def test_changed_rows_are_not_reused(built):
    data = TensorDict.load_memmap(built / "source")
    data["obs"][0] += 1  # row 0 is one of the fingerprinted rows
    assert dataset.load_if_intact(built, ROWS) is None


def test_wrong_ids_are_not_reused(built):
    data = TensorDict.load_memmap(built / "source")
    data["id"][ROWS // 3] = 0
    assert dataset.load_if_intact(built, ROWS) is None


def test_manifest_of_another_generator_version_is_not_reused(built):
    path = dataset.manifest_path(built)
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "version": manifest["version"] + 1}))
    assert dataset.load_if_intact(built, ROWS) is None


# ---------------------------------------------------------------------- options
def test_options_default_to_1gib_usable_cpus_and_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = parse_args([])
    assert args.size == 2**30 and args.chunksize == 16384
    assert args.workers == len(os.sched_getaffinity(0))
    assert args.dir == tmp_path / "tensordict-demo"


def test_bad_size_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--size", "lots"])
    assert exc.value.code == 2
    assert "is not a size" in capsys.readouterr().err


# ---------------------------------------------------------------------- checks
def test_ids_seen_once_pass_and_missing_or_repeated_ids_fail():
    assert report.check_ids_once(torch.ones(5, dtype=torch.int32)).ok
    failed = report.check_ids_once(torch.tensor([1, 2, 0, 1], dtype=torch.int32))
    assert not failed.ok and failed.detail == "1 ids never seen, 1 seen more than once"


@pytest.mark.parametrize(
    ("mean", "std", "ok"),
    [(0.0, 1.0, True), (0.01, 1.0, False), (0, 1.1, False), (float("nan"), 1.0, False)],
)
def test_normalised_check_has_a_tolerance(mean, std, ok):
    check = report.check_normalised(torch.full((4,), float(mean)), torch.full((4,), float(std)))
    assert check.ok is ok


def test_reduces_that_differ_fail_the_agreement_check():
    mean, std = torch.zeros(3), torch.ones(3)
    assert report.check_reduces_agree({"a": (mean, std), "b": (mean.clone(), std.clone())}).ok
    assert not report.check_reduces_agree({"a": (mean, std), "b": (mean + 0.1, std)}).ok
    nan = torch.full((3,), float("nan"))
    assert not report.check_reduces_agree({"a": (mean, std), "b": (mean, nan)}).ok


def test_statistics_far_from_the_generator_fail():
    loc, scale = dataset.feature_params()
    assert report.check_statistics(loc, scale, loc, scale, 1000).ok
    assert not report.check_statistics(loc + 1, scale, loc, scale, 1000).ok
    assert not report.check_statistics(loc, scale * float("nan"), loc, scale, 1000).ok


def test_exit_status_is_1_when_any_check_fails():
    ok, bad = report.Check("a", True, ""), report.Check("b", False, "")
    assert report.exit_status([ok, ok]) == 0
    assert report.exit_status([ok, bad]) == 1


def test_demo_exits_1_when_a_check_fails(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(report, "NORMALISED_TOLERANCE", 0.0)  # nothing is that exact
    status = main([*TINY, "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 1
    assert "FAILED  normalised: mean 0, std 1" in out
    assert "FAILED: a check did not pass" in out
