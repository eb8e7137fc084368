"""Fixtures for the parallel tests: sources, and a check that no worker outlives a test."""

from __future__ import annotations

import time

import psutil
import pytest
import torch


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


#: processes multiprocessing keeps for the whole interpreter (one each, not workers)
_INFRASTRUCTURE = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def live_children() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if any(name in " ".join(p.cmdline()) for name in _INFRASTRUCTURE):
                continue
            out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.fixture(autouse=True)
def no_leftover_workers(request):
    """Every test must leave no worker process behind (pools passed by tests excepted)."""
    before = {p.pid for p in live_children()}
    yield
    if request.node.get_closest_marker("keeps_children"):
        return
    left = [p for p in live_children() if p.pid not in before]
    # workers of a finished call exit (and are reaped) in the background: give them a moment.
    # (psutil.wait_procs would reap them itself, behind multiprocessing's back: poll instead)
    deadline = time.monotonic() + 3
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [p for p in left if _running(p)]
    assert not left, f"worker processes left running: {[p.pid for p in left]}"


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
