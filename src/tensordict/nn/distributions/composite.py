"""CompositeDistribution: several distributions, one per key, sampled into one tensordict.

``params`` holds one nested tensordict of keyword arguments per distribution
(``params["cont"] = {"loc": ..., "scale": ...}``); ``distribution_map`` names each
distribution's class. Samples are tensordicts with one entry per distribution (written under
``name_map`` keys when given). Log-probabilities and entropies are either summed into one tensor
of the batch shape (``composite_lp_aggregate()`` True) or returned as a tensordict with one
``<name>_log_prob`` / ``<name>_entropy`` entry per distribution (the default).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import distributions as d

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, leaf_or_non_tensor, unravel_key
from tensordict.nn.utils import composite_lp_aggregate, set_composite_lp_aggregate

__all__ = ["CompositeDistribution"]


def _add_suffix(key: NestedKey, suffix: str) -> NestedKey:
    """``"a"`` -> ``"a<suffix>"``, ``("a", "b")`` -> ``("a", "b<suffix>")``."""
    key = unravel_key(key)
    if isinstance(key, str):
        return key + suffix
    return (*key[:-1], key[-1] + suffix)


def _resolve_name_map(name_map: Mapping[Any, Any] | None, names: Any) -> dict[NestedKey, NestedKey]:
    """Where each distribution writes: its ``name_map`` entry, else its own key."""
    mapped = {unravel_key(k): unravel_key(v) for k, v in (name_map or {}).items()}
    return {unravel_key(n): mapped.get(unravel_key(n), unravel_key(n)) for n in names}


def _sum_event_dims(value: torch.Tensor, batch_dims: int) -> torch.Tensor:
    if value.ndim > batch_dims:
        return value.flatten(batch_dims, -1).sum(-1)
    return value


def _total_log_prob(per_key: TensorDictBase) -> torch.Tensor:
    """The sum of per-key log-probabilities, each summed over its non-batch dimensions."""
    total: Any = 0.0
    for value in per_key.values(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor):
        total = total + _sum_event_dims(value, per_key.ndim)
    return total  # type: ignore[no-any-return]


class CompositeDistribution(d.Distribution, Mapping):  # type: ignore[misc]
    """A product of distributions, one per (nested) key, whose samples are tensordicts.

    Args:
        params: per distribution, a tensordict of its keyword arguments.
        distribution_map: the class of each distribution, keyed like ``params``.

    Keyword Args:
        name_map: the key where each distribution's sample is written (defaults to its key).
        extra_kwargs: more keyword arguments per distribution.
        log_prob_key: the key of the summed log-probability. Defaults to ``"sample_log_prob"``.
        entropy_key: the key of the summed entropy. Defaults to ``"entropy"``.

    Raises:
        KeyError: a distribution has no parameters in ``params``.

    Examples:
        >>> import torch
        >>> from torch import distributions as d
        >>> from tensordict import TensorDict
        >>> params = TensorDict({"cont": {"loc": torch.zeros(3), "scale": torch.ones(3)},
        ...                      "disc": {"logits": torch.zeros(3, 4)}}, [3])
        >>> dist = CompositeDistribution(
        ...     params, distribution_map={"cont": d.Normal, "disc": d.Categorical})
        >>> sample = dist.sample()
        >>> sample.batch_size, sorted(dist.log_prob(sample).keys())
        (torch.Size([3]), ['cont_log_prob', 'disc_log_prob'])
    """

    def __init__(
        self,
        params: TensorDictBase,
        distribution_map: Mapping[Any, Any],
        *,
        name_map: Mapping[Any, Any] | None = None,
        extra_kwargs: Mapping[Any, Any] | None = None,
        log_prob_key: NestedKey | None = None,
        entropy_key: NestedKey | None = None,
    ) -> None:
        self._batch_shape = params.shape
        self._event_shape = torch.Size(())
        extra_kwargs = extra_kwargs or {}
        write_names = _resolve_name_map(name_map, distribution_map)
        self.dists: dict[NestedKey, d.Distribution] = {}
        for raw_name, dist_class in distribution_map.items():
            name = unravel_key(raw_name)
            dist_params = params.get(name, None)
            if dist_params is None:
                raise KeyError(
                    f"no param {name!r} found in params with keys "
                    f"{list(params.keys(True, True))}: give each distribution of "
                    "distribution_map a tensordict of its arguments."
                )
            kwargs = extra_kwargs.get(name, extra_kwargs.get(raw_name, {}))
            self.dists[write_names[name]] = dist_class(**dict(dist_params.items()), **kwargs)
        self.log_prob_key = log_prob_key
        self.entropy_key = entropy_key

    @classmethod
    def from_distributions(
        cls,
        params: TensorDictBase,
        distributions: Mapping[Any, d.Distribution],
        *,
        name_map: Mapping[Any, Any] | None = None,
        log_prob_key: NestedKey | None = None,
        entropy_key: NestedKey | None = None,
    ) -> CompositeDistribution:
        """A composite of distributions already built (``params`` gives the batch shape)."""
        self = cls.__new__(cls)
        self._batch_shape = params.shape
        self._event_shape = torch.Size(())
        write_names = _resolve_name_map(name_map, distributions)
        self.dists = {write_names[unravel_key(k)]: v for k, v in distributions.items()}
        self.log_prob_key = log_prob_key
        self.entropy_key = entropy_key
        self.__dict__["aggregate_probabilities"] = None
        return self

    # -- Mapping over the distributions --------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        return iter(self.dists)

    def __getitem__(self, item: Any) -> Any:
        return self.dists[item]

    def __len__(self) -> int:
        return len(self.dists)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dists})"

    @property
    def log_prob_key(self) -> NestedKey:
        return self._log_prob_key if self._log_prob_key is not None else "sample_log_prob"

    @log_prob_key.setter
    def log_prob_key(self, value: NestedKey | None) -> None:
        self._log_prob_key = value

    @property
    def entropy_key(self) -> NestedKey:
        return self._entropy_key if self._entropy_key is not None else "entropy"

    @entropy_key.setter
    def entropy_key(self, value: NestedKey | None) -> None:
        self._entropy_key = value

    # -- samples -------------------------------------------------------------------------------
    def _gather(self, values: dict[Any, Any], shape: Any = ()) -> TensorDict:
        out = TensorDict(batch_size=torch.Size(shape) + self.batch_shape)
        for name, value in values.items():
            out.set(name, value)
        return out

    def sample(self, shape: Any = None) -> TensorDictBase:  # type: ignore[override]
        shape = torch.Size(shape or ())
        return self._gather({n: dist.sample(shape) for n, dist in self.dists.items()}, shape)

    def rsample(self, shape: Any = None) -> TensorDictBase:  # type: ignore[override]
        shape = torch.Size(shape or ())
        return self._gather({n: dist.rsample(shape) for n, dist in self.dists.items()}, shape)

    @property
    def mode(self) -> TensorDictBase:  # type: ignore[override]
        return self._gather({n: dist.mode for n, dist in self.dists.items()})

    @property
    def mean(self) -> TensorDictBase:  # type: ignore[override]
        return self._gather({n: dist.mean for n, dist in self.dists.items()})

    @property
    def deterministic_sample(self) -> TensorDictBase:
        from tensordict.nn.interaction import deterministic_value

        return self._gather(
            {n: deterministic_value(dist, type(self).__name__) for n, dist in self.dists.items()}
        )

    def sample_and_log_prob(self, shape: Any = None) -> tuple[TensorDictBase, Any]:
        return self._sample_and_log_prob(shape, reparameterize=False)

    def rsample_and_log_prob(self, shape: Any = None) -> tuple[TensorDictBase, Any]:
        return self._sample_and_log_prob(shape, reparameterize=True)

    def _sample_and_log_prob(
        self, shape: Any, *, reparameterize: bool
    ) -> tuple[TensorDictBase, Any]:
        shape = torch.Size(shape or ())
        samples, log_probs = {}, {}
        for name, dist in self.dists.items():
            samples[name] = dist.rsample(shape) if reparameterize else dist.sample(shape)
            log_probs[name] = dist.log_prob(samples[name])
        sample = self._gather(samples, shape)
        if composite_lp_aggregate():
            total: Any = 0.0
            for lp in log_probs.values():
                total = total + _sum_event_dims(lp, sample.ndim)
            return sample, total
        return sample, self._per_key(
            sample, {_add_suffix(n, "_log_prob"): lp for n, lp in log_probs.items()}
        )

    @staticmethod
    def _per_key(like: TensorDictBase, values: dict[Any, Any]) -> TensorDictBase:
        out = like.empty(recurse=True)
        for key, value in values.items():
            out.set(key, value)
        return out.filter_empty_() if hasattr(out, "filter_empty_") else out

    # -- log-probabilities and entropies ----------------------------------------------------------
    def log_prob(self, sample: TensorDictBase) -> Any:  # type: ignore[override]
        """The summed log-probability (aggregate mode) or one entry per distribution."""
        if not composite_lp_aggregate():
            with set_composite_lp_aggregate(False):
                return self.log_prob_composite(sample)
        total: Any = 0.0
        for name, dist in self.dists.items():
            total = total + _sum_event_dims(dist.log_prob(sample.get(name)), sample.ndim)
        return total

    def log_prob_composite(
        self, sample: TensorDictBase, *, include_sum: bool | None = None
    ) -> TensorDictBase:
        """One ``<name>_log_prob`` entry per distribution (and the sum when ``include_sum``).

        In aggregate mode the entries are written into ``sample``; otherwise into a new
        tensordict of the same structure.
        """
        aggregate = composite_lp_aggregate()
        include_sum = aggregate if include_sum is None else include_sum
        if not isinstance(sample, TensorDictBase) and not hasattr(sample, "get"):
            raise RuntimeError(
                f"Expected a tensordict sample, but got a {type(sample).__name__} instead."
            )
        values: dict[Any, Any] = {}
        total: Any = 0.0
        for name, dist in self.dists.items():
            lp = dist.log_prob(sample.get(name))
            values[_add_suffix(name, "_log_prob")] = lp
            if include_sum:
                total = total + _sum_event_dims(lp, sample.ndim)
        if include_sum:
            values[self.log_prob_key] = total
        if aggregate:
            return sample.update(values)
        return self._per_key(sample, values)

    def _entropies(self, samples_mc: int) -> dict[Any, torch.Tensor]:
        out = {}
        for name, dist in self.dists.items():
            try:
                out[name] = dist.entropy()
            except NotImplementedError:
                draws = dist.rsample((samples_mc,))
                out[name] = -dist.log_prob(draws).mean(0)
        return out

    def entropy(
        self,
        samples_mc: int = 1,
        *,
        aggregate_probabilities: bool | None = None,
        include_sum: bool | None = None,
    ) -> Any:
        """The summed entropy (aggregate mode) or one ``<name>_entropy`` entry per distribution.

        Distributions without a closed-form entropy are estimated with ``samples_mc`` samples.
        """
        if aggregate_probabilities is not None:
            warnings.warn(
                "CompositeDistribution.entropy(aggregate_probabilities=...) has no effect; use "
                "set_composite_lp_aggregate.",
                DeprecationWarning,
                stacklevel=2,
            )
        if not composite_lp_aggregate():
            return self.entropy_composite(samples_mc, include_sum=include_sum)
        total: Any = 0.0
        for ent in self._entropies(samples_mc).values():
            total = total + _sum_event_dims(ent, len(self.batch_shape))
        return total

    def entropy_composite(
        self, samples_mc: int = 1, *, include_sum: bool | None = None
    ) -> TensorDictBase:
        """One ``<name>_entropy`` entry per distribution (and the sum when ``include_sum``)."""
        include_sum = composite_lp_aggregate() if include_sum is None else include_sum
        values: dict[Any, Any] = {}
        total: Any = 0.0
        for name, ent in self._entropies(samples_mc).items():
            values[_add_suffix(name, "_entropy")] = ent
            total = total + _sum_event_dims(ent, len(self.batch_shape))
        if include_sum:
            values[self.entropy_key] = total
        return self._gather(values)

    def cdf(self, sample: TensorDictBase) -> TensorDictBase:  # type: ignore[override]
        """Write ``<name>_cdf`` entries into ``sample`` and return it."""
        for name, dist in self.dists.items():
            sample.set(_add_suffix(name, "_cdf"), dist.cdf(sample.get(name)))
        return sample

    def icdf(self, sample: TensorDictBase) -> TensorDictBase:  # type: ignore[override]
        """Write ``<name>_icdf`` entries (from ``<name>_cdf``, else from the sample) into it.

        Raises:
            KeyError: neither ``<name>`` nor ``<name>_cdf`` is in ``sample``.
        """
        for name, dist in self.dists.items():
            prob = sample.get(_add_suffix(name, "_cdf"), None)
            if prob is None:
                value = sample.get(name, None)
                if value is None:
                    raise KeyError(
                        f"Neither {name!r} nor {_add_suffix(name, '_cdf')!r} could be found in the "
                        "sampled tensordict. Make sure one of these is available to icdf."
                    )
                prob = dist.cdf(value)
            sample.set(_add_suffix(name, "_icdf"), dist.icdf(prob))
        return sample
