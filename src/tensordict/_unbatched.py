"""Upstream's import path for :class:`~tensordict.UnbatchedTensor` (code in ``core.unbatched``)."""

from tensordict.core.unbatched import UnbatchedTensor

__all__ = ["UnbatchedTensor"]
