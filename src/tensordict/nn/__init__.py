"""``tensordict.nn``: modules that read and write tensordicts (placeholders until issue 14).

Every name here imports; using one raises :class:`~tensordict.errors.NotYetAvailableError`
until engineer "nn" lands the real modules.
"""

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
