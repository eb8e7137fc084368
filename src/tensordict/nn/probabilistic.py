"""Probabilistic modules: :class:`ProbabilisticTensorDictSequential` and the names upstream
serves from ``tensordict.nn.probabilistic``.

A :class:`ProbabilisticTensorDictSequential` runs deterministic modules that compute a
distribution's parameters, then a :class:`ProbabilisticTensorDictModule` that writes a value.
``get_dist`` returns the distribution; with ``return_composite`` (automatic when there are several
probabilistic modules, or the last module is not probabilistic) it is a
:class:`~tensordict.nn.distributions.CompositeDistribution` over every probabilistic module, the
intermediate ones being sampled on the way.
"""

from __future__ import annotations

import collections
from collections.abc import MutableSequence
from typing import Any

import torch
from torch import distributions as D

from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.dense import TensorDict
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.nn.common import dispatch
from tensordict.nn.distributions.composite import CompositeDistribution
from tensordict.nn.interaction import (  # noqa: F401 (private names served here, as upstream)
    _DETERMINISTIC_REGISTER,
    InteractionType,
    _use_generator,
    interaction_type,
    set_interaction_type,
)
from tensordict.nn.probabilistic_module import ProbabilisticTensorDictModule, _rename_entries
from tensordict.nn.sequence import TensorDictSequential
from tensordict.nn.utils import (  # noqa: F401 (served here too, as upstream)
    _set_skip_existing_None,
    composite_lp_aggregate,
    set_composite_lp_aggregate,
)

__all__ = [
    "InteractionType",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "interaction_type",
    "set_interaction_type",
]


def _is_probabilistic(module: Any) -> bool:
    return isinstance(module, (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))


class ProbabilisticTensorDictSequential(TensorDictSequential):
    """Deterministic modules followed by a probabilistic one (or several, ``return_composite``).

    Args:
        *modules: as for :class:`TensorDictSequential`.

    Keyword Args:
        partial_tolerant: as for :class:`TensorDictSequential`.
        return_composite: build a composite distribution over every probabilistic module.
            Defaults to True when there are several of them or the last module is not
            probabilistic.
        selected_out_keys: as for :class:`TensorDictSequential`.
        inplace: as for :class:`TensorDictSequential`.

    Raises:
        ValueError: no module.
        TypeError: ``return_composite=False`` and the last module is not probabilistic.

    Examples:
        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> policy = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(
        ...         NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]),
        ...     ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
        ...                                   distribution_class=Normal),
        ... )
        >>> td = policy(TensorDict(params=torch.zeros(3, 4), batch_size=[3]))
        >>> td["action"].shape, type(policy.get_dist(td)).__name__
        (torch.Size([3, 2]), 'Normal')
    """

    def __init__(
        self,
        *modules: Any,
        partial_tolerant: bool = False,
        return_composite: bool | None = None,
        selected_out_keys: list[Any] | None = None,
        inplace: bool | str | None = None,
    ) -> None:
        if not modules:
            raise ValueError(
                "ProbabilisticTensorDictSequential must consist of zero or more "
                "TensorDictModules followed by a ProbabilisticTensorDictModule"
            )
        if (
            len(modules) == 1
            and isinstance(modules[0], dict)
            and not isinstance(modules[0], collections.OrderedDict)
        ):
            modules = (collections.OrderedDict(modules[0]),)
        self._ordered_dict = len(modules) == 1 and isinstance(modules[0], collections.OrderedDict)
        if self._ordered_dict:
            listed = list(modules[0].values())
        elif len(modules) == 1 and isinstance(modules[0], MutableSequence):
            modules = tuple(modules[0])
            listed = list(modules)
        else:
            listed = list(modules)
        listed = self._convert_modules(listed)
        if return_composite is False and not _is_probabilistic(listed[-1]):
            raise TypeError(
                "The final module passed to ProbabilisticTensorDictSequential must be an instance "
                "of ProbabilisticTensorDictModule or another ProbabilisticTensorDictSequential "
                "(unless return_composite is set to ``True``)."
            )
        if return_composite is None:
            return_composite = (
                not _is_probabilistic(listed[-1])
                or sum(isinstance(m, ProbabilisticTensorDictModule) for m in listed) > 1
            )
        kwargs: dict[str, Any] = {"partial_tolerant": partial_tolerant, "inplace": inplace}
        if selected_out_keys is not None:
            kwargs["selected_out_keys"] = selected_out_keys
        names = list(modules[0]) if self._ordered_dict else None
        if not any(_is_probabilistic(m) for m in listed):
            TensorDictSequential.__init__(self, *modules, **kwargs)
            self.return_composite = True
            self._set_det_part(listed)
            return
        self._set_det_part(listed, names)
        super().__init__(*modules, **kwargs)
        self.return_composite = return_composite

    def _set_det_part(self, listed: list[Any], names: list[Any] | None = None) -> None:
        """The deterministic modules before the last one, and whether the last must sample."""
        if not any(_is_probabilistic(m) for m in listed):
            self._requires_sample = False
            self.__dict__["_det_part"] = None
            return
        _, before = self._compute_in_and_out_keys(listed[:-1])
        self._requires_sample = any(
            k not in set(before) for k in getattr(listed[-1], "dist_sample_keys", [None])
        )
        if names is not None:
            items = collections.OrderedDict(zip(names[:-1], listed[:-1]))
            self.__dict__["_det_part"] = TensorDictSequential(items)
        else:
            self.__dict__["_det_part"] = TensorDictSequential(*listed[:-1])

    def _edit_modules(self, edit: Any) -> None:
        super()._edit_modules(edit)
        listed = list(self._module_iter())
        if not listed:
            raise ValueError(
                "ProbabilisticTensorDictSequential must consist of zero or more "
                "TensorDictModules followed by a ProbabilisticTensorDictModule"
            )
        names = list(self.module) if isinstance(self.module, torch.nn.ModuleDict) else None
        self._set_det_part(listed, names)

    def __getitem__(self, index: int | slice | str) -> Any:
        if isinstance(index, (int, str)):
            return self.module[index]
        mods = self.module[index]
        if self.return_composite and any(_is_probabilistic(m) for m in mods):
            return self._keep_options(type(self)(*mods, return_composite=True))
        if _is_probabilistic(mods[-1]):
            return self._keep_options(type(self)(*mods))
        return self._keep_options(TensorDictSequential(*mods))

    _dist_sample = ProbabilisticTensorDictModule._dist_sample
    _draw_dist_sample = ProbabilisticTensorDictModule._draw_dist_sample

    @property
    def det_part(self) -> Any:
        """Deprecated: the deterministic modules (use :meth:`get_dist_params`)."""
        return self._det_part

    @property
    def _last_module(self) -> Any:
        modules = list(self._module_iter())
        return modules[-1] if modules else None

    def get_dist_params(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Run the deterministic modules (under the interaction type of the last module)."""
        det = self._det_part
        kind = interaction_type()
        if kind is None:
            kind = next(
                (
                    m.default_interaction_type
                    for m in reversed(list(self._module_iter()))
                    if hasattr(m, "default_interaction_type")
                ),
                None,
            )
            if kind is None:
                raise ValueError("Could not find a default interaction in the modules.")
        with set_interaction_type(kind):
            if not kwargs:
                return det(tensordict, tensordict_out)  # type: ignore[no-any-return]
            work = tensordict if tensordict_out is None else tensordict.copy()
            for m in det._module_iter():
                work = det._run_module(
                    m, work, **({} if isinstance(m, ProbabilisticTensorDictModule) else kwargs)
                )
            if tensordict_out is None:
                return work
            return tensordict_out.update(work, keys_to_update=det.out_keys)

    @property
    def log_prob_keys(self) -> list[Any]:
        keys: list[Any] = []
        for m in reversed(list(self._module_iter())):
            keys.extend(getattr(m, "log_prob_keys", []))
        return keys

    @property
    def log_prob_key(self) -> Any:
        try:
            keys = self.log_prob_keys
        except RuntimeError as err:
            raise AttributeError("log_prob_key") from err
        if len(keys) == 1:
            return keys[0]
        raise AttributeError(
            f"log_prob_key needs exactly one log-probability key, got {keys}. Use log_prob_keys "
            "instead."
        )

    @property
    def dist_params_keys(self) -> list[Any]:
        keys: list[Any] = []
        for m in reversed(list(self._module_iter())):
            keys.extend(getattr(m, "dist_params_keys", []))
        return keys

    @property
    def dist_sample_keys(self) -> list[Any]:
        keys: list[Any] = []
        for m in reversed(list(self._module_iter())):
            keys.extend(getattr(m, "dist_sample_keys", []))
        return keys

    @property
    def num_samples(self) -> tuple[int, ...]:
        total: tuple[int, ...] = ()
        for m in self._module_iter():
            if _is_probabilistic(m):
                total = tuple(m.num_samples or ()) + total
        return total

    @property
    def n_empirical_estimate(self) -> int:
        """That of the last probabilistic module (samples averaged for a MEAN without a mean);
        TorchRL's advantage modules sample through the sequence (``_dist_sample``)."""
        for m in reversed(list(self._module_iter())):
            count = getattr(m, "n_empirical_estimate", None)
            if count is not None:
                return int(count)
        return 1000

    @property
    def default_interaction_type(self) -> Any:
        for m in reversed(list(self._module_iter())):
            kind = getattr(m, "default_interaction_type", None)
            if kind is not None:
                return kind
        return interaction_type()

    def _log_prob_renames(self) -> tuple[list[Any], bool]:
        renames: list[Any] = []
        aggregated = False
        for m in self._module_iter():
            if isinstance(m, ProbabilisticTensorDictSequential):
                sub, sub_aggregated = m._log_prob_renames()
            elif isinstance(m, ProbabilisticTensorDictModule):
                sub, sub_aggregated = m._custom_log_prob_keys, m._composite_lp_aggreate_at_init
            else:
                continue
            renames.extend(sub)
            aggregated = aggregated or sub_aggregated
        return renames, aggregated

    def build_dist_from_params(self, tensordict: TensorDictBase) -> D.Distribution:
        """The distribution of the last probabilistic module, from parameters already computed."""
        for module in reversed(list(self.modules())):
            if isinstance(module, ProbabilisticTensorDictModule):
                return module.get_dist(tensordict)
        raise RuntimeError("Could not find any ProbabilisticTensorDictModule in the sequence.")

    def get_dist(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> D.Distribution:
        """The distribution (a composite over every probabilistic module with return_composite)."""
        if not self.return_composite:
            params = self.get_dist_params(tensordict, tensordict_out, **kwargs)
            return self.build_dist_from_params(params)
        work = tensordict.copy()
        dists: dict[Any, Any] = {}
        modules = list(self._module_iter())
        for i, m in enumerate(modules):
            if not _is_probabilistic(m):
                work = m(work)
                continue
            dist = m.get_dist(work)
            if i < len(modules) - 1:
                work = self._write_intermediate_sample(m, dist, work)
            if isinstance(dist, CompositeDistribution):
                dists.update(dict(dist))
            else:
                dists[m.dist_sample_keys[0]] = dist
        if not dists:
            raise RuntimeError(f"No distribution module found in {self}.")
        return CompositeDistribution.from_distributions(work, dists)

    @staticmethod
    def _write_intermediate_sample(module: Any, dist: Any, work: TensorDictBase) -> TensorDictBase:
        gen, writeback = (
            module._resolve_generator(work)
            if isinstance(module, ProbabilisticTensorDictModule)
            else (None, None)
        )
        sample = module._dist_sample(dist, interaction_type=interaction_type(), generator=gen)
        if writeback is not None:
            writeback(gen)
        if module.num_samples not in ((), None):
            work = work.expand(tuple(module.num_samples) + tuple(work.shape))
        if isinstance(sample, torch.Tensor):
            sample = [sample]
        if isinstance(sample, TensorDictBase):
            work.update(sample)
        else:
            work.update(dict(zip(module.dist_sample_keys, sample)))
        return work

    def log_prob(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        *,
        dist: D.Distribution | None = None,
        **kwargs: Any,
    ) -> Any:
        """The log-probability of the values in ``tensordict``."""
        inputs = tensordict.copy() if tensordict_out is not None else tensordict
        if dist is None:
            dist = (
                self.get_dist(inputs, **kwargs)
                if kwargs and not self.return_composite
                else self.get_dist(inputs)
            )
            if not self.return_composite:
                kwargs = {}
        if self.return_composite and isinstance(dist, CompositeDistribution):
            lp = dist.log_prob(tensordict, **kwargs)
            if is_tensor_collection(lp):
                renames, aggregated = self._log_prob_renames()
                if renames and not aggregated:
                    present = set(lp.keys(True, True, is_leaf=leaf_or_non_tensor))
                    _rename_entries(lp, [r for r in renames if r[0] in present])
            return lp
        out = self._last_module.log_prob(inputs, dist=dist, **kwargs)
        if is_tensor_collection(out) and tensordict_out is not None:
            tensordict_out.update(out)
            return tensordict_out
        return out

    @dispatch(auto_batch_size=False)
    @_set_skip_existing_None()
    def forward(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        _requires_sample: bool | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Run the modules; the last probabilistic one samples unless its output is given."""
        requires = (
            self._requires_sample
            if _requires_sample is None
            else (_requires_sample and self._requires_sample)
        )
        separate = (
            tensordict_out is not None
            or self._select_before_return
            or self.inplace is False
            or self.inplace == "empty"
        )
        work = tensordict.copy() if separate else tensordict
        if self.return_composite:
            work = self._run_all(work, requires, kwargs)
        else:
            work = self.get_dist_params(work, **kwargs)
            last = self._last_module
            if isinstance(last, ProbabilisticTensorDictSequential):
                work = last(work, _requires_sample=requires, **kwargs)
            elif isinstance(last, ProbabilisticTensorDictModule):
                work = last(work, _requires_sample=requires)
            else:
                work = last(work, **kwargs)
        if self.inplace is True:
            tensordict_out = tensordict
        elif self.inplace is False:
            tensordict_out = TensorDict()
        elif self.inplace == "empty":
            tensordict_out = tensordict.empty()
        if tensordict_out is not None:
            tensordict_out.update(work, keys_to_update=self.out_keys)
            return tensordict_out
        if self._select_before_return:
            keys = list(
                set(self.out_keys).union(tensordict.keys(True, True, is_leaf=leaf_or_non_tensor))
            )
            return tensordict.update(work, keys_to_update=keys)
        return work

    def _run_all(
        self, work: TensorDictBase, requires: bool, kwargs: dict[str, Any]
    ) -> TensorDictBase:
        modules = list(self._module_iter())
        for i, m in enumerate(modules):
            try:
                if _is_probabilistic(m):
                    sub_kwargs = kwargs if isinstance(m, ProbabilisticTensorDictSequential) else {}
                    work = m(
                        work,
                        _requires_sample=requires if i == len(modules) - 1 else True,
                        **sub_kwargs,
                    )
                else:
                    work = m(work, **kwargs)
            except Exception as err:
                raise RuntimeError(
                    f"Failed while executing module '{self._module_name(m)}'. Scroll up for more "
                    "info."
                ) from err
        return work
