"""tensordict.nn: modules that read and write tensordicts, and parameters held in tensordicts."""

from tensordict.core.pytree import register_pytree_nodes
from tensordict.nn.params import TensorDictParams
from tensordict.nn.vmap import install_vmap_support

register_pytree_nodes()
install_vmap_support()

__all__ = ["TensorDictParams"]
