"""``tensordict.persistent``. Placeholder: ``PersistentTensorDict`` (h5) comes with the file
formats (issue 15)."""

from __future__ import annotations

import importlib.util

from tensordict.core.placeholders import coming_class

#: whether h5py is installed
_has_h5 = importlib.util.find_spec("h5py") is not None

_FEATURE, _ISSUE = "file formats and stores (engineer io)", 15
_MODULE = "tensordict.persistent"

PersistentTensorDict = coming_class("PersistentTensorDict", _MODULE, _FEATURE, _ISSUE)

__all__ = ["PersistentTensorDict"]
