"""Parallel map over chunks of a tensordict: ``map_iter`` / ``map`` and ``get_worker_info``."""

from tensordict.parallel.worker import WorkerInfo, get_worker_info

__all__ = ["WorkerInfo", "get_worker_info"]
