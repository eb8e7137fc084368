"""Upstream's import path for :class:`~tensordict.TypedTensorDict` (code in ``core.typed``)."""

from tensordict.core.typed import TypedTensorDict

__all__ = ["TypedTensorDict"]
