"""``tensordict.store``: tensordicts kept in a key-value store (placeholders until issue 15)."""

from tensordict.store._store import LazyStackedTensorDictStore, TensorDictStore

__all__ = ["LazyStackedTensorDictStore", "TensorDictStore"]
