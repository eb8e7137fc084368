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


def run_all(*commands: tuple[str, ...]) -> list[str]:
    """Run ``python -m tests.memmap.interop ARGS`` for each (python, *args) at once."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [python, "-m", "tests.memmap.interop", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for python, *args in commands
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        outputs.append(out)
    return outputs


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What each library reads from the directories each library wrote."""
    up, here = tmp_path_factory.mktemp("by-upstream"), tmp_path_factory.mktemp("by-here")
    run_all((str(UPSTREAM), "write", str(up)), (sys.executable, "write", str(here)))
    by_upstream, by_here = run_all(
        (str(UPSTREAM), "read", str(up), str(here)), (sys.executable, "read", str(up), str(here))
    )
    read_up, read_here = json.loads(by_upstream), json.loads(by_here)
    return {
        "upstream_written": {"upstream": read_up[str(up)], "here": read_here[str(up)]},
        "written_here": {"upstream": read_up[str(here)], "here": read_here[str(here)]},
    }


@pytest.fixture
def upstream_written(summaries: dict[str, Any]) -> dict[str, Any]:
    return summaries["upstream_written"]


@pytest.fixture
def written_here(summaries: dict[str, Any]) -> dict[str, Any]:
    return summaries["written_here"]


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
