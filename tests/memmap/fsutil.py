"""A private tmpfs for tests that need a file system of their own (a tiny one to fill, or one
whose free space no other process changes). Mounting needs root and a kernel that allows it
here; elsewhere the tests that need it skip with the reason."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def private_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (``"4m"``) at ``mnt`` for the block; skip the test if refused."""
    mnt.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a private tmpfs needs root; the injected-fault tests cover this")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}); fault tests cover this")
    try:
        yield mnt
    finally:
        # lazily: mappings of this process may still hold files of it
        subprocess.run(["umount", "-l", str(mnt)], check=False)
