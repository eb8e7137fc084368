"""TorchRL replay buffers on this package: extend, sample, dumps/loads, upstream's dumps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

# TorchRL 0.14.1 is installed by make setup (see the Makefile)
from torchrl.data import LazyMemmapStorage, LazyTensorStorage, ReplayBuffer

from tensordict import TensorDict

UPSTREAM_DUMP = Path(__file__).parent / "data" / "upstream_rb"


def transitions(n: int) -> TensorDict:
    """The data of the upstream fixture (see data/README.md)."""
    return TensorDict(
        {
            "obs": torch.arange(n * 3, dtype=torch.float32).reshape(n, 3),
            "action": torch.arange(n, dtype=torch.int64),
            ("next", "reward"): torch.arange(n, dtype=torch.float32).reshape(n, 1) / 2,
            ("next", "done"): (torch.arange(n) % 4 == 3).reshape(n, 1),
        },
        [n],
    )


def make_storage(kind: str, size: int, tmp_path: Path):
    if kind == "memmap":
        return LazyMemmapStorage(size, scratch_dir=tmp_path / "scratch")
    return LazyTensorStorage(size)


@pytest.mark.parametrize("kind", ["tensor", "memmap"])
def test_extend_and_sample(kind, tmp_path):
    rb = ReplayBuffer(storage=make_storage(kind, 32, tmp_path), batch_size=5)
    rb.extend(transitions(12))
    assert len(rb) == 12
    batch = rb.sample()
    assert batch.batch_size == torch.Size([5])
    # every sampled row is a row of the data: obs = 3 * action + (0, 1, 2)
    torch.testing.assert_close(batch["obs"][:, 0], 3 * batch["action"].float())
    torch.testing.assert_close(batch["next", "reward"][:, 0], batch["action"].float() / 2)


@pytest.mark.parametrize("kind", ["tensor", "memmap"])
def test_circular_writes_wrap_around(kind, tmp_path):
    rb = ReplayBuffer(storage=make_storage(kind, 8, tmp_path), batch_size=4)
    rb.extend(transitions(12))
    assert len(rb) == 8
    assert sorted(rb[:]["action"].tolist()) == list(range(4, 12))


@pytest.mark.parametrize("kind", ["tensor", "memmap"])
def test_dumps_loads_round_trip(kind, tmp_path):
    rb = ReplayBuffer(storage=make_storage(kind, 16, tmp_path), batch_size=4)
    rb.extend(transitions(12))
    rb.dumps(tmp_path / "dump")
    other = ReplayBuffer(storage=make_storage(kind, 16, tmp_path / "other"), batch_size=4)
    other.loads(tmp_path / "dump")
    assert len(other) == 12
    assert (other[:12] == transitions(12)).all()
    other.extend(transitions(2))  # the writer state came back too
    assert len(other) == 14


def test_memmap_storage_files_are_memory_mapped(tmp_path):
    rb = ReplayBuffer(storage=LazyMemmapStorage(16, scratch_dir=tmp_path), batch_size=4)
    rb.extend(transitions(4))
    stored = rb.storage._storage
    assert stored.is_memmap()
    assert (tmp_path / "obs.memmap").exists() or any(tmp_path.rglob("obs.memmap"))


def test_loads_a_buffer_dumped_by_upstream(tmp_path):
    dump = tmp_path / "upstream_rb"
    shutil.copytree(UPSTREAM_DUMP, dump)
    rb = ReplayBuffer(storage=LazyMemmapStorage(16), batch_size=4)
    rb.loads(dump)
    assert len(rb) == 12
    assert (rb[:12] == transitions(12)).all()
    assert rb[:12]["next", "done"].dtype == torch.bool
