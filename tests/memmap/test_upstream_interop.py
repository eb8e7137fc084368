"""Directories written by upstream tensordict 0.15.3 load here, and ours load there, for every class
upstream writes (TensorDict, nested, LazyStackedTensorDict, NonTensorData, NonTensorStack,
tensorclass).

Needs upstream installed in ``~/.cache/td-upstream-venv`` (skipped otherwise, as on a fresh CI
machine); the layouts themselves are also covered by hand-written directories in
``test_upstream_compat.py``, which always run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .interop import samples

ROOT = Path(__file__).parents[2]
UPSTREAM = Path.home() / ".cache" / "td-upstream-venv" / "bin" / "python"
CLASSES = sorted(samples())

pytestmark = pytest.mark.skipif(
    not UPSTREAM.exists(),
    reason=f"upstream tensordict is not installed in {UPSTREAM.parent.parent}",
)


def run(python: str, *args: str) -> str:
    proc = subprocess.run(
        [python, "-m", "tests.memmap.interop", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def upstream_written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("written-by-upstream")
    run(str(UPSTREAM), "write", str(root))
    return {
        "upstream": json.loads(run(str(UPSTREAM), "read", str(root))),
        "here": json.loads(run(sys.executable, "read", str(root))),
    }


@pytest.fixture(scope="module")
def written_here(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("written-here")
    run(sys.executable, "write", str(root))
    return {
        "upstream": json.loads(run(str(UPSTREAM), "read", str(root))),
        "here": json.loads(run(sys.executable, "read", str(root))),
    }


@pytest.mark.parametrize("name", CLASSES)
def test_upstream_directory_loads_here_with_the_same_values(upstream_written, name) -> None:
    assert upstream_written["here"][name] == upstream_written["upstream"][name]


@pytest.mark.parametrize("name", CLASSES)
def test_directory_written_here_loads_in_upstream(written_here, name) -> None:
    assert written_here["upstream"][name] == written_here["here"][name]


def test_the_samples_cover_every_class_upstream_writes() -> None:
    kinds = {type(v).__name__ for v in samples().values()}
    nested = samples()["mixed"]
    assert {"TensorDict", "LazyStackedTensorDict", "Point"} <= kinds
    assert type(nested.get("lazy")).__name__ == "LazyStackedTensorDict"
    assert type(samples()["non_tensor_stack"].get("words")).__name__ == "NonTensorStack"
    assert type(samples()["non_tensor_data"].get("s")).__name__ == "NonTensorData"
