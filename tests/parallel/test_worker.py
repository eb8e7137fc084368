"""Worker-side policies that need no process to test."""

from __future__ import annotations

from tensordict.parallel.channel import IDLE_SECONDS
from tensordict.parallel.worker import _HeapTrim


def test_heap_trim_waits_in_a_busy_pipeline_and_trims_at_once_for_a_slow_consumer():
    trim = _HeapTrim()
    assert trim.patience == IDLE_SECONDS  # a task late by a few ms costs no page faults
    trim.waited(IDLE_SECONDS * 2)  # the consumer made us wait: memory matters now
    assert trim.patience == 0.0
    trim.waited(IDLE_SECONDS * 3)
    assert trim.patience == 0.0
    trim.waited(IDLE_SECONDS / 10)  # busy again
    assert trim.patience == IDLE_SECONDS
