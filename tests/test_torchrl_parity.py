"""The TorchRL side-by-side tool's venv comparison and upstream setup (no TorchRL run here)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks import torchrl_parity as parity


def test_package_differences_names_version_changes_and_one_sided_packages() -> None:
    here = {"ray": "2.60.0", "tqdm": "4.67.1", "numpy": "2.3.0", "ruff": "0.17.6"}
    upstream = {"tqdm": "4.67.1", "numpy": "2.2.0", "h5py": "3.14.0"}
    assert parity.package_differences(here, upstream) == [
        ("h5py", None, "3.14.0"),
        ("numpy", "2.3.0", "2.2.0"),
        ("ray", "2.60.0", None),
        ("ruff", "0.17.6", None),
    ]


def test_package_differences_skip_tensordict_and_the_installers() -> None:
    here = {"tensordict": "0.16.0.dev0", "pip": "26.3", "torch": "2.13.0"}
    upstream = {"tensordict": "0.15.3", "pip": "23.2.1", "torch": "2.13.0"}
    assert parity.package_differences(here, upstream) == []


def test_describe_differences_puts_what_torchrl_imports_on_its_own_line() -> None:
    diffs = [("ray", "2.60.0", None), ("ruff", "0.17.6", None), ("scipy", "1.17.1", "1.16.0")]
    first, second = parity.describe_differences(diffs).splitlines()
    assert first.endswith("ray 2.60.0 / -; scipy 1.17.1 / 1.16.0")
    assert second.endswith("(1): ruff 0.17.6 / -")
    same = parity.describe_differences([])
    assert "none" in same.splitlines()[0] and "(0)" in same.splitlines()[1]


def test_installed_packages_reads_this_interpreters_distributions() -> None:
    found = parity.installed_packages(sys.executable)
    assert found["torch"].startswith("2.13") and "pytest" in found


def test_setup_upstream_installs_the_optional_packages_at_the_here_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").touch()
    here = {"ray": "2.60.0", "h5py": "3.14.0", "torch": "2.13.0"}  # the rest are missing
    monkeypatch.setattr(parity, "installed_packages", lambda python: here)
    commands: list[list[str]] = []

    def run(cmd: list[str], **kwargs: Any) -> None:
        commands.append(cmd)

    monkeypatch.setattr(parity.subprocess, "run", run)
    parity.setup_upstream(tmp_path, "/here/python")
    installs = [c for c in commands if "install" in c]
    wanted = [c for c in installs if "tensordict==0.15.3" in c]
    assert len(wanted) == 1
    assert {"ray==2.60.0", "h5py==3.14.0"} <= set(wanted[0])
    assert not any(arg.startswith(("tqdm", "pandas", "zarr")) for c in installs for arg in c)
