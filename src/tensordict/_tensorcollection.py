"""``tensordict._tensorcollection``: upstream's path of the root class; re-exports only."""

from tensordict.core.collection import TensorCollection

__all__ = ["TensorCollection"]
