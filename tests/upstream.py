"""Running code under upstream tensordict 0.15.3 (the venv the parity tool made), for interop.

The venv lives at ``~/.cache/td-upstream-venv`` (or ``$UPSTREAM_VENV``); tests that need it skip
when it is absent (a fresh CI machine), the checks with the formats' own libraries do not.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

VENV = Path(os.environ.get("UPSTREAM_VENV", Path.home() / ".cache" / "td-upstream-venv"))


def upstream_python(*modules: str) -> str:
    """The upstream venv's python, or skip the test if it (or one of ``modules``) is missing."""
    python = VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no upstream tensordict venv at {VENV}")
    probe = subprocess.run(
        [str(python), "-c", "import tensordict; " + "; ".join(f"import {m}" for m in modules)],
        capture_output=True,
        cwd="/",
    )
    if probe.returncode:
        pytest.skip(f"the upstream venv lacks one of {modules}")
    return str(python)


def run_upstream(python: str, code: str, cwd: Path) -> Any:
    """Run ``code`` under upstream tensordict; it prints one JSON document, returned parsed."""
    proc = subprocess.run(
        [python, "-W", "ignore", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
