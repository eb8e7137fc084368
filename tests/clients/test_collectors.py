"""TorchRL's multi-process collectors on this package: workers step their environments, write
into shared buffers (exclude/update_ on locked tensordicts) and feed a replay buffer whose
storage is memory-mapped."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

# TorchRL 0.14.1 is installed by make setup (see the Makefile)
from torchrl.collectors import MultiAsyncCollector, MultiSyncCollector
from torchrl.data import LazyMemmapStorage, ReplayBuffer
from torchrl.testing.mocking_classes import CountingEnv

from tensordict import MemoryMappedTensor
from tensordict.nn import TensorDictModule, TensorDictSequential


@pytest.fixture(autouse=True)
def _restore_process_settings() -> Iterator[None]:
    """The collectors set the start method (if unset) and torch's thread count of the process
    that runs them: put both back for the tests that follow."""
    method, threads = multiprocessing.get_start_method(allow_none=True), torch.get_num_threads()
    yield
    multiprocessing.set_start_method(method, force=True)
    torch.set_num_threads(threads)


def policy() -> TensorDictSequential:
    """The action is 1 (the count increments by one each step), through a linear layer."""
    linear = nn.Linear(1, 1)
    linear.weight.data.fill_(0)
    linear.bias.data.fill_(1)
    return TensorDictSequential(
        TensorDictModule(lambda x: x.float(), in_keys=["observation"], out_keys=["action"]),
        TensorDictModule(linear, in_keys=["action"], out_keys=["action"]),
        TensorDictModule(lambda x: x.to(torch.int8), in_keys=["action"], out_keys=["action"]),
    )


@pytest.mark.parametrize("in_workers", [False, True])
@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_multi_process_collector_feeds_a_memory_mapped_replay_buffer(
    cls, in_workers: bool, tmp_path: Path
):
    storage = LazyMemmapStorage(max_size=200, scratch_dir=tmp_path)
    rb = ReplayBuffer(storage=storage, batch_size=8)
    collector = cls(
        [CountingEnv, CountingEnv],
        policy(),
        frames_per_batch=16,
        total_frames=48,
        replay_buffer=rb if in_workers else None,
    )
    try:
        for batch in collector:  # (in_workers: the workers extend the buffer themselves)
            if not in_workers:
                rb.extend(batch.reshape(-1))
    finally:
        collector.shutdown()
    if cls is MultiAsyncCollector and in_workers:
        # the async workers write their own batches: each may land one past total_frames before
        # the shutdown reaches it (TorchRL's behaviour, with upstream tensordict too)
        assert len(rb) in (48, 64, 80)
    else:
        assert len(rb) == 48
    data = storage[: len(rb)]
    # every transition counts one step further than where it started, or was reset to 0
    step = data["next", "observation"] - data["observation"]
    assert ((step == 1) | (data["next", "observation"] == 0)).all()
    assert isinstance(storage._storage["observation"], MemoryMappedTensor)
    assert list(tmp_path.rglob("*.memmap"))  # the storage's files are under scratch_dir
    sample = rb.sample()
    assert sample.batch_size == (8,) and (sample["action"] == 1).all()
