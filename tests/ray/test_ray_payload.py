"""What travels to the Ray actors per chunk, and how the window is sized."""

from __future__ import annotations

import types

import pytest
import torch

from tensordict import TensorDict
from tensordict.parallel.ray_pool import ray_pool_size
from tests.parallel import helpers

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402


@pytest.fixture
def task_sizes(pool, monkeypatch):
    """Bytes of each task (function and arguments) under cloudpickle, Ray's serializer."""
    sizes: list[int] = []
    submit = pool.apply_async

    def spy(func, args=None, kwargs=None, **callbacks):
        sizes.append(len(cloudpickle.dumps((func, args, kwargs))))
        return submit(func, args, kwargs, **callbacks)

    monkeypatch.setattr(pool, "apply_async", spy)
    return sizes


def test_memmap_chunk_task_is_under_1kb(pool, task_sizes, tmp_path):
    td = TensorDict(
        {"x": torch.zeros(4096, 256), "nested": {"a": torch.zeros(4096, 3)}}, [4096]
    ).memmap_(tmp_path / "big")
    list(td.map_iter(helpers.add_one, chunksize=256, pool=pool))
    assert len(task_sizes) == 16
    assert max(task_sizes) < 1024


def test_shuffled_memmap_chunk_task_is_under_1kb(pool, task_sizes, tmp_path):
    td = TensorDict({"x": torch.zeros(4096, 256)}, [4096]).memmap_(tmp_path / "big")
    list(td.map_iter(helpers.add_one, chunksize=64, shuffle=True, pool=pool))
    assert max(task_sizes) < 1024  # 64 indices of 8 bytes and the reference


def test_split_up_front_memmap_chunk_task_is_under_1kb(pool, task_sizes, tmp_path):
    td = TensorDict({"x": torch.zeros(4096, 256)}, [4096]).memmap_(tmp_path / "big")
    td.map(helpers.add_one, chunksize=256, pool=pool, index_with_generator=False)
    assert max(task_sizes) < 1024


def test_plain_chunk_task_carries_only_its_own_rows(pool, task_sizes):
    td = TensorDict({"x": torch.randn(10_000, 256)}, [10_000])  # 10 MB
    list(td.map_iter(helpers.add_one, chunksize=100, pool=pool))
    rows_bytes = 100 * 256 * 4
    assert rows_bytes < max(task_sizes) < rows_bytes + 4096


def test_window_is_sized_from_the_actor_count(pool):
    assert ray_pool_size(pool) == 2


def test_window_falls_back_to_cluster_cpus_without_ray_private_attributes(ray_cluster):
    assert ray_pool_size(types.SimpleNamespace()) == 2  # num_cpus=2


@pytest.mark.parametrize("consolidated", [False, True])
def test_writing_a_fetched_tensordict_leaves_the_stored_object_alone(ray_cluster, consolidated):
    # Ray hands protocol-5 buffers back from its object store, read-only: a fetched tensordict
    # that aliased them wrote into the stored object (the next ray.get saw the write)
    td = TensorDict(a=torch.zeros(32 * 1024), n={"b": torch.zeros(3)}, batch_size=[])
    ref = ray.put(td.consolidate() if consolidated else td)
    fetched = ray.get(ref)
    fetched.apply_(lambda x: x.add_(1))
    assert (fetched == 1).all()
    assert (ray.get(ref) == 0).all()
