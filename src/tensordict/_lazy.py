"""``tensordict._lazy``: upstream's module of lazy stacks; re-exports only, each from its home."""

from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.core.lazy.views import (  # noqa: F401
    _CustomOpTensorDict,
    _PermutedTensorDict,
    _SqueezedTensorDict,
    _TransposedTensorDict,
    _UnsqueezedTensorDict,
    _ViewedTensorDict,
)

__all__ = ["LazyStackedTensorDict"]
