"""Parallel map over chunks of a tensordict: ``map_iter`` / ``map``, ``WorkerPool`` and
``get_worker_info``."""

from tensordict.parallel.persistent import WorkerPool
from tensordict.parallel.worker import WorkerInfo, get_worker_info

__all__ = ["WorkerInfo", "WorkerPool", "get_worker_info"]
