"""EnsembleModule: several copies of a tensordict module, with independent parameters, run at
once with ``torch.vmap``.

The copies' parameters are stacked in one :class:`~tensordict.nn.TensorDictParams` (leading
dimension ``num_copies``), each copy re-initialised with the module's ``reset_parameters``; a call
maps the module over them, so outputs gain a leading ensemble dimension.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.nn.common import TensorDictModuleBase
from tensordict.nn.params import TensorDictParams

__all__ = ["EnsembleModule"]


class EnsembleModule(TensorDictModuleBase):
    """``num_copies`` copies of ``module``, with their own parameters, run in parallel.

    Args:
        module: the tensordict module to copy.
        num_copies: the number of copies.
        expand_input: every copy reads the same input (True, default); with False the input must
            already have a leading dimension of size ``num_copies`` (chained ensembles).

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> module = TensorDictModule(nn.Linear(2, 3), in_keys=["x"], out_keys=["y"])
        >>> ensemble = EnsembleModule(module, num_copies=4)
        >>> ensemble(TensorDict(x=torch.randn(5, 2), batch_size=[5]))["y"].shape
        torch.Size([4, 5, 3])
    """

    def __init__(
        self, module: TensorDictModuleBase, num_copies: int, expand_input: bool = True
    ) -> None:
        super().__init__()
        self.in_keys = module.in_keys
        self.out_keys = module.out_keys
        params = TensorDict.from_module(module).expand(num_copies).to_tensordict()
        self.module = module
        in_dims = (None, 0) if expand_input else 0
        self.vmapped_forward = torch.vmap(self._func_module_call, in_dims)
        self.reset_parameters_recursive(params)
        self.params_td = TensorDictParams(params)

    def _func_module_call(self, input: TensorDictBase, params: TensorDictBase) -> Any:
        with params.to_module(self.module, preserve_module_state=False):
            return self.module(input)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.vmapped_forward(tensordict, self.params_td)  # type: ignore[no-any-return]

    def reset_parameters_recursive(
        self, parameters: TensorDictBase | None = None
    ) -> TensorDictBase:
        """Re-initialise each copy in ``parameters`` (stacked copies, written in place).

        Raises:
            ValueError: no ``parameters`` (an ensemble's parameters live in a tensordict).
        """
        if parameters is None:
            raise ValueError(
                "Ensembles are functional and require passing a TensorDict of parameters to "
                "reset_parameters_recursive"
            )
        if parameters.ndim:
            copies = [parameters[i] for i in range(parameters.shape[0])]
            for copy in copies:
                self.reset_parameters_recursive(copy)
            return LazyStackedTensorDict.lazy_stack(copies, 0)
        others = [n for n, _ in self.named_children() if n not in ("module", "params_td")]
        if others:
            warnings.warn(
                "EnsembleModule.reset_parameters_recursive() only resets parameters of "
                f"self.module; the parameters of {others} are left as they are.",
                stacklevel=2,
            )
        return self.module.reset_parameters_recursive(parameters)  # type: ignore[return-value]
