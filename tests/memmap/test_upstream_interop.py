"""Directories and packed archives (``.tdz``) written by upstream tensordict 0.15.3 load here, and
ours load there, for every class upstream writes (TensorDict, nested, LazyStackedTensorDict,
NonTensorData, NonTensorStack, tensorclass, TypedTensorDict, sub-tensordicts, nested/jagged
tensors); both refuse UnbatchedTensor entries alike; ``append_memmap`` / ``pack_memmap`` of the
other's files work.

Needs upstream installed in ``~/.cache/td-upstream-venv`` (skipped otherwise, as on a fresh CI
machine); the layouts themselves are also covered by hand-written directories in
``test_upstream_compat.py``, which always run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from .interop import samples

ROOT = Path(__file__).parents[2]
UPSTREAM = Path.home() / ".cache" / "td-upstream-venv" / "bin" / "python"
CLASSES = sorted(samples())
SAVED = CLASSES + [f"{name}.tdz" for name in CLASSES]

pytestmark = pytest.mark.skipif(
    not UPSTREAM.exists(),
    reason=f"upstream tensordict is not installed in {UPSTREAM.parent.parent}",
)


def run_all(*commands: tuple[str, ...]) -> list[str]:
    """Run ``python -m tests.memmap.interop ARGS`` for each (python, *args) at once.

    This package's side imports the ``src`` beside these tests (a worktree or a clone tests its
    own code, not whichever copy the interpreter has installed); upstream's side gets only the
    repository root, for ``tests.memmap.interop``."""
    ours = f"{ROOT / 'src'}{os.pathsep}{ROOT}"
    procs = [
        subprocess.Popen(
            [python, "-m", "tests.memmap.interop", *args],
            cwd=ROOT,
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": ours if python == sys.executable else str(ROOT),
            },
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


@pytest.mark.parametrize("name", SAVED)
def test_upstream_directory_loads_here_with_the_same_values(upstream_written, name) -> None:
    assert upstream_written["here"][name] == upstream_written["upstream"][name]


@pytest.mark.parametrize("name", SAVED)
def test_directory_written_here_loads_in_upstream(written_here, name) -> None:
    assert written_here["upstream"][name] == written_here["here"][name]


def test_the_samples_cover_every_class_upstream_writes() -> None:
    kinds = {type(v).__name__ for v in samples().values()}
    nested = samples()["mixed"]
    assert {"TensorDict", "LazyStackedTensorDict", "Point"} <= kinds
    assert type(nested.get("lazy")).__name__ == "LazyStackedTensorDict"
    assert type(samples()["non_tensor_stack"].get("words")).__name__ == "NonTensorStack"
    assert type(samples()["non_tensor_data"].get("s")).__name__ == "NonTensorData"
    assert samples()["jagged"].get("nt").layout is torch.jagged
    assert type(samples()["typed"]).__name__ == "State"
    assert type(samples()["sub"]).__name__ == "_SubTensorDict"


UPSTREAM_FILES = """
import json, os, torch
from tensordict import TensorDict, UnbatchedTensor, append_memmap, pack_memmap
try:
    TensorDict({"u": UnbatchedTensor(torch.zeros(4))}, [3]).memmap("unbatched")
    refused = None
except Exception as err:
    refused = [c.__name__ for c in type(err).__mro__]
TensorDict({"a": torch.arange(3.0)}, [3]).memmap("grow_up")
append_memmap("grow_here", TensorDict({"a": torch.full((2,), 9.0)}, [2]))
pack_memmap("grow_up", "packed_up.tdz")
print(json.dumps({
    "refused": refused,
    "unbatched_meta": os.path.exists("unbatched/meta.json"),
    "grow_here": TensorDict.load_memmap("grow_here")["a"].tolist(),
    "packed_here": TensorDict.load_memmap("packed_here.tdz")["a"].tolist(),
}))
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Upstream refuses an UnbatchedTensor, writes a directory, appends to ours, packs its own;
    ours were written first (``grow_here``, ``packed_here.tdz``)."""
    from tensordict import TensorDict, pack_memmap

    from ..upstream import run_upstream

    root = tmp_path_factory.mktemp("files")
    TensorDict({"a": torch.arange(2.0)}, [2]).memmap(root / "grow_here")
    TensorDict({"a": torch.arange(2.0)}, [2]).memmap(root / "src")
    pack_memmap(root / "src", root / "packed_here.tdz")
    return root, run_upstream(str(UPSTREAM), UPSTREAM_FILES, root)


def test_both_libraries_refuse_an_unbatched_tensor_and_write_nothing(files, tmp_path) -> None:
    from tensordict import TensorDict, UnbatchedTensor

    _, up = files
    assert up["refused"] is not None and "NotImplementedError" in up["refused"]
    assert not up["unbatched_meta"]
    with pytest.raises(NotImplementedError):
        TensorDict({"u": UnbatchedTensor(torch.zeros(4))}, [3]).memmap(tmp_path / "u")
    assert not (tmp_path / "u" / "meta.json").exists()


def test_upstream_appends_to_a_directory_written_here(files) -> None:
    assert files[1]["grow_here"] == [0.0, 1.0, 9.0, 9.0]


def test_an_archive_packed_here_loads_in_upstream(files) -> None:
    assert files[1]["packed_here"] == [0.0, 1.0]


def test_rows_appended_here_to_an_upstream_directory_and_packed_there_load_here(files) -> None:
    from tensordict import TensorDict, append_memmap

    root, _ = files
    assert TensorDict.load_memmap(root / "packed_up.tdz")["a"].tolist() == [0.0, 1.0, 2.0]
    append_memmap(root / "grow_up", TensorDict({"a": torch.ones(1)}, [1]))
    assert TensorDict.load_memmap(root / "grow_up")["a"].tolist() == [0.0, 1.0, 2.0, 1.0]
