"""Fixtures of the format tests."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True, scope="module")
def _stop_zarr_threads():
    """zarr runs an event loop and a thread pool in the background once used; stop them after
    each module, so that later tests fork a process without them."""
    yield
    sync = sys.modules.get("zarr.core.sync")
    if sync is not None:
        sync.cleanup_resources()
