"""Placeholder: ``TensorDictStore`` (Redis) comes with the stores (issue 15)."""

from __future__ import annotations

import importlib.util

from tensordict.core.placeholders import coming_class

#: whether redis is installed
_has_redis = importlib.util.find_spec("redis") is not None

_FEATURE, _ISSUE = "file formats and stores (engineer io)", 15
_MODULE = "tensordict.store._store"

TensorDictStore = coming_class("TensorDictStore", _MODULE, _FEATURE, _ISSUE)
LazyStackedTensorDictStore = coming_class("LazyStackedTensorDictStore", _MODULE, _FEATURE, _ISSUE)

__all__ = ["LazyStackedTensorDictStore", "TensorDictStore"]
