"""tensordict.nn: modules that read and write tensordicts, and parameters held in tensordicts.

Names of upstream's ``tensordict.nn`` that are not built yet import, and raise
:class:`~tensordict.errors.NotYetAvailableError` when used (issue 14).
"""

from tensordict.core.pytree import register_pytree_nodes
from tensordict.nn.common import (
    TensorClassModuleBase,
    TensorClassModuleWrapper,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictModuleWrapper,
    as_tensordict_module,
    dispatch,
)
from tensordict.nn.cudagraphs import CudaGraphModule
from tensordict.nn.distributions import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    Delta,
    NormalParamExtractor,
)
from tensordict.nn.ensemble import EnsembleModule
from tensordict.nn.functional_modules import from_module, from_modules
from tensordict.nn.params import TensorDictParams
from tensordict.nn.probabilistic import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    interaction_type,
    set_interaction_type,
)
from tensordict.nn.sequence import TensorDictSequential
from tensordict.nn.utils import (
    composite_lp_aggregate,
    set_composite_lp_aggregate,
    set_skip_existing,
    skip_existing,
)
from tensordict.nn.vmap import install_vmap_support

register_pytree_nodes()
install_vmap_support()

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "CudaGraphModule",
    "Delta",
    "EnsembleModule",
    "InteractionType",
    "NormalParamExtractor",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "TensorDictParams",
    "TensorDictSequential",
    "as_tensordict_module",
    "composite_lp_aggregate",
    "dispatch",
    "from_module",
    "from_modules",
    "interaction_type",
    "set_composite_lp_aggregate",
    "set_interaction_type",
    "set_skip_existing",
    "skip_existing",
]
