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

# A suite started by a runner may inherit SIGINT ignored (a non-interactive shell's background
# job, ``make test &``) or blocked (a CI runner's signal mask): Python leaves an ignored SIGINT
# ignored and a blocked one blocked, and both pass through exec to the harness of
# test_interrupts. The Ctrl-C tests (test_faults, test_interrupts) would then send SIGINTs that
# nothing receives. Give the suite what an interactive user's Python has: the default handler
# and SIGINT unblocked in the main thread (every thread the tests start inherits its mask).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.fixture
def plain_td() -> TensorDict:
    return TensorDict({"x": torch.arange(20.0), "z": torch.zeros(20, 3)}, [20])


@pytest.fixture
def memmap_td(tmp_path) -> TensorDict:
    td = TensorDict({"x": torch.arange(20.0), "z": torch.zeros(20, 3)}, [20])
    return td.memmap_(tmp_path / "src")
