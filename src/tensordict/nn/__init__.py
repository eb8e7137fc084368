"""tensordict.nn: modules that read and write tensordicts, and parameters held in tensordicts."""

from tensordict.nn.params import TensorDictParams

__all__ = ["TensorDictParams"]
