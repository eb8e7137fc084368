"""tensordict.nn: modules that read and write tensordicts, and parameters held in tensordicts.

* modules: :class:`TensorDictModule` (any callable over keys), :class:`TensorDictSequential`,
  :class:`TensorDictModuleBase`, :class:`TensorDictModuleWrapper`, :class:`WrapModule`,
  :class:`EnsembleModule`, :class:`CudaGraphModule`, tensorclass-typed modules;
* probabilistic modules and distributions: :class:`ProbabilisticTensorDictModule`,
  :class:`ProbabilisticTensorDictSequential`, :class:`CompositeDistribution`, ...;
* parameters: :class:`TensorDictParams`, and ``TensorDict.from_module`` / ``to_module`` (with
  ``torch.vmap`` over tensordicts, installed on import).
"""

from tensordict.core.serial.pytree import register_pytree_nodes
from tensordict.nn.vmap import install_vmap_support

register_pytree_nodes()
install_vmap_support()

from tensordict.nn import (  # noqa: E402
    common,
    cudagraphs,
    distributions,
    ensemble,
    functional_modules,
    params,
    probabilistic,
    sequence,
    tensorclass_module,
    utils,
)
from tensordict.nn.common import (  # noqa: E402
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictModuleWrapper,
    WrapModule,
    as_tensordict_module,
)
from tensordict.nn.cudagraphs import CudaGraphModule  # noqa: E402
from tensordict.nn.distributions import (  # noqa: E402
    AddStateIndependentNormalScale,
    CompositeDistribution,
    NormalParamExtractor,
    OneHotCategorical,
    TruncatedNormal,
    rand_one_hot,
)
from tensordict.nn.ensemble import EnsembleModule  # noqa: E402
from tensordict.nn.interaction import InteractionType, interaction_type, set_interaction_type  # noqa: E402
from tensordict.nn.keyword_dispatch import dispatch  # noqa: E402
from tensordict.nn.params import TensorDictParams  # noqa: E402
from tensordict.nn.probabilistic import (  # noqa: E402
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
)
from tensordict.nn.sequence import TensorDictSequential  # noqa: E402
from tensordict.nn.tensorclass_module import (  # noqa: E402
    TensorClassModuleBase,
    TensorClassModuleWrapper,
)
from tensordict.nn.utils import (  # noqa: E402
    add_custom_mapping,
    biased_softplus,
    composite_lp_aggregate,
    inv_softplus,
    mappings,
    set_composite_lp_aggregate,
    set_skip_existing,
    skip_existing,
)

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "CudaGraphModule",
    "EnsembleModule",
    "InteractionType",
    "NormalParamExtractor",
    "OneHotCategorical",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "TensorDictParams",
    "TensorDictSequential",
    "TruncatedNormal",
    "WrapModule",
    "add_custom_mapping",
    "as_tensordict_module",
    "biased_softplus",
    "common",
    "composite_lp_aggregate",
    "cudagraphs",
    "dispatch",
    "distributions",
    "ensemble",
    "functional_modules",
    "interaction_type",
    "inv_softplus",
    "mappings",
    "params",
    "probabilistic",
    "rand_one_hot",
    "sequence",
    "set_composite_lp_aggregate",
    "set_interaction_type",
    "set_skip_existing",
    "skip_existing",
    "tensorclass_module",
    "utils",
]
