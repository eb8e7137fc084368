"""``tensordict.typedtensordict``: upstream's path of ``TypedTensorDict``; re-exports only."""

from tensordict.tensorclass.coming import TensorAttrs, TypedTensorDict

__all__ = ["TensorAttrs", "TypedTensorDict"]
