"""Fixtures shared by the test packages."""

from __future__ import annotations

import multiprocessing
import signal

import pytest
import torch

# Pin the platform's default start method (fork on Linux) before any test module is collected:
# importing torchrl (tests/clients) otherwise makes spawn the process-wide default, and every
# later map_iter test would start its workers by spawning (about 0.8 s each instead of ~10 ms).
multiprocessing.get_start_method()

from tensordict import TensorDict  # noqa: E402 (after pinning the start method)

# A suite started in the background by a non-interactive shell (``make test &``, a CI runner)
# inherits SIGINT ignored, and Python then leaves it ignored: the Ctrl-C tests (test_faults,
# test_interrupts, whose harness inherits the disposition through exec) would send SIGINTs that
# nothing receives. Give the suite the handler an interactive user's Python has.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def plain_td() -> TensorDict:
    return TensorDict({"x": torch.arange(20.0), "z": torch.zeros(20, 3)}, [20])


@pytest.fixture
def memmap_td(tmp_path) -> TensorDict:
    td = TensorDict({"x": torch.arange(20.0), "z": torch.zeros(20, 3)}, [20])
    return td.memmap_(tmp_path / "src")
