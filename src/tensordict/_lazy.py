"""``tensordict._lazy``: upstream's module of lazy stacks; re-exports only, each from its home."""

from tensordict.core.coming_views import _CustomOpTensorDict, _PermutedTensorDict, _ViewedTensorDict  # noqa: F401
from tensordict.core.lazy_stack import LazyStackedTensorDict

__all__ = ["LazyStackedTensorDict"]
