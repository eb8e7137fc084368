"""Every script of examples/ runs, at a small size, as a user runs it (``python examples/X.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: script -> (small-size arguments, a line its output must contain)
RUNS = {
    "train_loop.py": (["--rows", "4096", "--epochs", "2"], "epoch 1: mean loss"),
    "build_memmap_dataset.py": (["--files", "8", "--rows-per-file", "256"], "2048 samples"),
    "replay_buffer.py": (["--capacity", "1000", "--steps", "300"], "300 transitions stored"),
    "stream_files.py": (["--rows", "20000"], "Parquet: sum of x"),
    "ray_cluster.py": (["--rows", "20000", "--cpus", "2"], "20000 row norms computed"),
}


def test_every_example_is_run_here():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(RUNS)


@pytest.mark.parametrize("script", sorted(RUNS))
def test_example_runs(script, tmp_path):
    args, expected = RUNS[script]
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "RAY_ADDRESS": ""}
    if script != "ray_cluster.py":  # Ray's socket paths must stay short: its own /tmp/ray
        env["TMPDIR"] = str(scratch)
    res = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=scratch,
        env=env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert expected in res.stdout, res.stdout
    left = set(os.listdir(scratch)) - {"torchinductor_root"}  # torch's own cache
    assert not left, f"the example left files behind: {left}"
