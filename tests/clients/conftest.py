"""TorchRL's replay buffers install a SIGTERM handler in the process that uses them (to clean
their storage up). Restore the previous handlers after each client test, so that processes the
later tests fork (a stdlib pool's workers, for one) still stop on SIGTERM."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_signal_handlers() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
