"""Type checkers see the real API: user code is checked by mypy and by pyright (basedpyright).

``user_code_ok.py`` must pass both; in ``user_code_mistakes.py`` each line marked
``# error: WORD`` must get an error whose message contains WORD from both, and no other line
any. The forwarded methods (``td.map_iter``, ``td.memmap_``, ``TensorDict.from_h5``, ...) are
typed with their function's parameters, and ``TensorClass`` subclasses take ``batch_size=`` /
``device=`` (``core.factory.forward``, ``tensorclass.inherit``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OK = HERE / "user_code_ok.py"
MISTAKES = HERE / "user_code_mistakes.py"


def expected_errors() -> dict[int, str]:
    """Line number -> the word its error must mention."""
    out = {}
    for number, line in enumerate(MISTAKES.read_text().splitlines(), start=1):
        match = re.search(r"# error: (\w+)$", line)
        if match:
            out[number] = match.group(1)
    return out


def check(found: dict[str, dict[int, list[str]]]) -> None:
    assert found.get(OK.name, {}) == {}, f"errors in correct code: {found[OK.name]}"
    got = found.get(MISTAKES.name, {})
    expected = expected_errors()
    assert len(expected) >= 5
    assert set(got) == set(expected), (sorted(got), sorted(expected), got)
    for line, word in expected.items():
        assert any(word in message for message in got[line]), (line, word, got[line])


def test_mypy_sees_the_real_api() -> None:
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--no-error-summary",
            "--show-error-codes",
            str(OK),
            str(MISTAKES),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,  # shares .mypy_cache with `make lint`: the package is not checked again
        env=env,
        timeout=300,
    )
    found: dict[str, dict[int, list[str]]] = {}
    for line in res.stdout.splitlines():
        match = re.match(r"(.+?):(\d+): error: (.*)", line)
        if match and Path(match.group(1)).name in (OK.name, MISTAKES.name):
            found.setdefault(Path(match.group(1)).name, {}).setdefault(
                int(match.group(2)), []
            ).append(match.group(3))
    assert res.returncode in (0, 1), res.stdout + res.stderr
    check(found)


def basedpyright() -> str:
    exe = shutil.which("basedpyright", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("basedpyright is missing: pip install -e '.[dev]' (it brings its own node)")
    return exe


def test_pyright_sees_the_real_api(tmp_path: Path) -> None:
    config = {
        "include": [str(OK), str(MISTAKES)],
        "extraPaths": [str(ROOT / "src")],
        "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
        "typeCheckingMode": "standard",
        "reportMissingModuleSource": False,
    }
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    res = subprocess.run(
        [
            basedpyright(),
            "--project",
            str(tmp_path / "pyrightconfig.json"),
            "--pythonpath",
            sys.executable,
            "--outputjson",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(res.stdout)
    found: dict[str, dict[int, list[str]]] = {}
    for diag in report["generalDiagnostics"]:
        if diag["severity"] != "error":
            continue
        line = diag["range"]["start"]["line"] + 1
        found.setdefault(Path(diag["file"]).name, {}).setdefault(line, []).append(diag["message"])
    check(found)
