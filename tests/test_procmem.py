"""The memory sampler: Pss_Anon of a process tree, Shmem growth, the peak of a sampled block."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tensordict.procmem import MemorySampler, process_tree, pss_anon, shmem, tree_pss_anon

pytestmark = pytest.mark.skipif(
    pss_anon(os.getpid()) is None, reason="needs /proc/PID/smaps_rollup with Pss_Anon (Linux)"
)

MIB = 2**20
#: a child that holds 64 MiB of touched anonymous memory until its stdin closes
_HOLDER = (
    "import sys; block = bytearray(64 * 2**20); block[::4096] = b'x' * len(block[::4096]); "
    "print('ready', flush=True); sys.stdin.read()"
)


@pytest.fixture
def holder():
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)


def test_process_tree_lists_this_process_and_its_children(holder):
    tree = process_tree()
    assert tree[0] == os.getpid()
    assert holder.pid in tree


def test_tree_pss_anon_counts_the_memory_of_children(holder):
    own = pss_anon(os.getpid())
    child = pss_anon(holder.pid)
    assert own is not None and child is not None and child >= 60 * MIB
    total = tree_pss_anon()
    assert total is not None and total >= own + 60 * MIB


def test_exited_process_reads_as_none():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    assert pss_anon(child.pid) is None


def test_sampler_keeps_the_peak_of_memory_allocated_inside():
    with MemorySampler() as sampler:
        before = sampler.peak
        block = torch.ones(64 * MIB // 4)
    assert before is not None and sampler.peak is not None
    assert sampler.peak >= before + 60 * MIB
    del block


def test_sampler_peak_includes_a_child_started_inside():
    with MemorySampler() as sampler:
        before = sampler.peak
        child = subprocess.Popen(
            [sys.executable, "-c", _HOLDER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        reading = sampler.sample()
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)
    assert before is not None and reading is not None
    assert sampler.peak is not None and sampler.peak >= before + 60 * MIB


def test_shmem_growth_counts_shared_memory_written_inside():
    if shmem() is None:
        pytest.skip("no Shmem in /proc/meminfo")
    with MemorySampler() as sampler:
        fd = os.memfd_create("procmem-test")
        try:
            os.ftruncate(fd, 64 * MIB)
            os.pwrite(fd, b"x" * (64 * MIB), 0)
            reading = sampler.sample()
        finally:
            os.close(fd)
    assert reading is not None
    # system-wide: other programs may free shared memory meanwhile, so allow some slack
    assert reading.shmem_growth >= 32 * MIB
