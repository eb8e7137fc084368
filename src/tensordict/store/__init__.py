"""Tensordicts kept on a Redis-compatible key-value server (redis-py, extra ``store``).

:class:`TensorDictStore` keeps a tensordict's entries on the server;
:class:`LazyStackedTensorDictStore` a lazy stack's members. Both keep upstream tensordict's
names, semantics and key layout.
"""

from tensordict.store._lazy import LazyStackedTensorDictStore, to_store
from tensordict.store._store import STORE_BACKENDS, TensorDictStore

__all__ = ["STORE_BACKENDS", "LazyStackedTensorDictStore", "TensorDictStore", "to_store"]
