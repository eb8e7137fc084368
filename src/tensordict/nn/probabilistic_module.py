"""ProbabilisticTensorDictModule: build a distribution from tensordict entries, write a value.

The module reads the distribution's parameters (``in_keys``, or a dict from the distribution's
keyword names to keys), builds ``distribution_class(**params, **distribution_kwargs)``, and writes
a value of it under ``out_keys`` according to the interaction type (see
:mod:`tensordict.nn.interaction`); with ``return_log_prob`` it also writes the log-probability.

Log-probability keys: with ``composite_lp_aggregate()`` False (the default), each sample key
``k`` gets ``k + "_log_prob"`` (``("a", "b")`` -> ``("a", "b_log_prob")``), or the keys given as
``log_prob_keys`` / a single ``log_prob_key``; with True, a single summed ``"sample_log_prob"``
(or ``log_prob_key``). The mode is read when the module is built and must not change afterwards.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable
from textwrap import indent
from typing import Any

import torch
from torch import distributions as D

from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.keys import NestedKey, unravel_key
from tensordict.core.nontensor.data import NonTensorData, is_non_tensor
from tensordict.nn.common import TensorDictModuleBase, dispatch
from tensordict.nn.distributions.composite import (
    CompositeDistribution,
    _add_suffix,
    _resolve_name_map,
    _total_log_prob,
)
from tensordict.nn.distributions.continuous import Delta
from tensordict.nn.interaction import InteractionType, _use_generator, draw, interaction_type
from tensordict.nn.utils import (
    _set_skip_existing_None,
    composite_lp_aggregate,
    set_composite_lp_aggregate,
)

__all__ = ["ProbabilisticTensorDictModule"]


def _rename_entries(tensordict: TensorDictBase, renames: list[tuple[NestedKey, NestedKey]]) -> None:
    values = [tensordict.pop(old) for old, _ in renames]
    for (_, new), value in zip(renames, values):
        tensordict.set(new, value)


def _joint_sampler(dist: Any) -> Callable[[torch.Size], Any] | None:
    """The distribution's ``(r)sample_and_log_prob`` method, if it has one."""
    if not isinstance(dist, D.Distribution):
        return None
    name = "rsample_and_log_prob" if dist.has_rsample else "sample_and_log_prob"
    return getattr(dist, name) if callable(getattr(type(dist), name, None)) else None


def _is_inside(key: NestedKey, other: NestedKey) -> bool:
    a = (key,) if isinstance(key, str) else tuple(key)
    b = (other,) if isinstance(other, str) else tuple(other)
    return len(a) > len(b) and a[: len(b)] == b


def _default_out_keys(
    distribution_class: Any, distribution_kwargs: dict[str, Any]
) -> list[Any] | None:
    """out_keys=None: the composite's sample keys, or None for "_" (with a warning later)."""
    if distribution_class is not CompositeDistribution:
        return None
    distribution_map = distribution_kwargs.get("distribution_map")
    if distribution_map is None:
        raise KeyError(
            "'distribution_map' must be provided within distribution_kwargs whenever the "
            "distribution is of type CompositeDistribution."
        )
    name_map = distribution_kwargs.get("name_map")
    if name_map is None:
        return list(distribution_map)
    mapped = {unravel_key(k) for k in name_map}
    if any(unravel_key(k) not in mapped for k in distribution_map):
        warnings.warn(
            "ProbabilisticTensorDictModule got a name_map that leaves out components of "
            "distribution_map and no out_keys: these components are written but are not in "
            "out_keys. Pass out_keys to choose the keys.",
            FutureWarning,
            stacklevel=4,
        )
    return list(name_map.values())


class ProbabilisticTensorDictModule(TensorDictModuleBase):
    """Read distribution parameters from a tensordict and write a value of the distribution.

    Args:
        in_keys: the parameter keys (passed under the key's last name), or a dict from the
            distribution's keyword names to keys.
        out_keys: where the value goes. Defaults to the composite's keys for a
            ``CompositeDistribution``, else ``"_"`` (deprecated).

    Keyword Args:
        default_interaction_type: used outside :class:`set_interaction_type` blocks. Defaults
            to ``DETERMINISTIC``.
        distribution_class: the distribution class (or factory, or a name such as ``"delta"``).
            Defaults to :class:`Delta`.
        distribution_kwargs: more keyword arguments for the distribution.
        return_log_prob: also write the log-probability of the value.
        log_prob_keys, log_prob_key: where log-probabilities go (see the module docs).
        cache_dist: deprecated, accepted.
        n_empirical_estimate: samples used for a mean without closed form. Defaults to 1000.
        num_samples: draw this many samples (a leading dimension); the output tensordict is
            expanded to match.
        generator: a ``torch.Generator``, an int seed (an owned generator), or a key of the
            input holding a generator or a seed (written back advanced).

    Raises:
        ValueError: a dict ``in_keys`` with non-string keyword names; a log-probability key
            inside a sample key.
        RuntimeError: ``log_prob_keys`` with aggregation on, or ``log_prob_key`` for several
            samples with aggregation off.
        TypeError: a ``generator`` of another type.

    Examples:
        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> module = ProbabilisticTensorDictModule(
        ...     in_keys=["loc", "scale"], out_keys=["action"], distribution_class=Normal,
        ...     return_log_prob=True, default_interaction_type="mode")
        >>> td = module(TensorDict(loc=torch.zeros(2), scale=torch.ones(2)))
        >>> td["action"], sorted(td.keys())
        (tensor([0., 0.]), ['action', 'action_log_prob', 'loc', 'scale'])
    """

    _warn_default_out_key = False
    _CHANGE_IN_C_LP_A = (
        "The value returned by composite_lp_aggregate changed between init of {} and its "
        "execution ({} -> {}). Make sure the mode matches."
    )

    def __init__(
        self,
        in_keys: NestedKey | list[NestedKey] | dict[str, NestedKey],
        out_keys: NestedKey | list[NestedKey] | None = None,
        *,
        default_interaction_type: InteractionType | str = InteractionType.DETERMINISTIC,
        distribution_class: Any = Delta,
        distribution_kwargs: dict[str, Any] | None = None,
        return_log_prob: bool = False,
        log_prob_keys: list[NestedKey] | None = None,
        log_prob_key: NestedKey | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        num_samples: int | torch.Size | None = None,
        generator: torch.Generator | int | NestedKey | None = None,
    ) -> None:
        super().__init__()
        distribution_kwargs = distribution_kwargs if distribution_kwargs is not None else {}
        if isinstance(in_keys, (str, tuple)):
            in_keys = [in_keys]
        if isinstance(out_keys, (str, tuple)):
            out_keys = [out_keys]
        elif out_keys is None:
            out_keys = _default_out_keys(distribution_class, distribution_kwargs)
            if out_keys is None:
                out_keys = ["_"]
                self._warn_default_out_key = True
        if isinstance(in_keys, dict):
            dist_keys, params = zip(*in_keys.items()) if in_keys else ((), ())
            if any(not isinstance(k, str) for k in dist_keys):
                raise ValueError(
                    "If in_keys is dict, its keys must be strings matching to the distribution "
                    f"kwargs. {type(self).__name__} got {dist_keys}"
                )
            in_keys = list(params)
        else:
            dist_keys = tuple(in_keys)
        self._out_keys = [unravel_key(k) for k in out_keys]
        self.in_keys = in_keys
        self.dist_keys = dist_keys
        self._composite_lp_aggreate_at_init = composite_lp_aggregate()
        self._set_log_prob_keys(log_prob_keys, log_prob_key)
        self.default_interaction_type = InteractionType(default_interaction_type)
        if isinstance(distribution_class, str):
            from tensordict.nn.distributions import _distributions_maps

            distribution_class = _distributions_maps.get(distribution_class.lower())
        self.distribution_class = distribution_class
        self.distribution_kwargs = distribution_kwargs
        if return_log_prob:
            self._check_log_prob_keys(self._log_prob_keys, self._log_prob_key)
        self.n_empirical_estimate = n_empirical_estimate
        self._dist = None
        if cache_dist:
            warnings.warn(
                "ProbabilisticTensorDictModule(cache_dist=True) is deprecated and has no effect.",
                DeprecationWarning,
                stacklevel=2,
            )
        self.cache_dist = cache_dist if hasattr(distribution_class, "update") else False
        self.return_log_prob = return_log_prob
        if isinstance(num_samples, int):
            num_samples = torch.Size((num_samples,))
        self.num_samples = num_samples
        self._generator, self._generator_key = self._parse_generator(generator)

    # ================================================================== keys
    def _set_log_prob_keys(self, log_prob_keys: Any, log_prob_key: Any) -> None:
        aggregate = self._composite_lp_aggreate_at_init
        n_out = len(self._out_keys)
        if log_prob_keys is None:
            if n_out == 1 and log_prob_key is not None:
                log_prob_keys = [log_prob_key]
            elif aggregate:
                log_prob_keys = ["sample_log_prob"] if n_out == 1 else None
            else:
                log_prob_keys = [_add_suffix(k, "_log_prob") for k in self._out_keys]
        elif aggregate:
            raise RuntimeError(
                "composite_lp_aggregate is set to True but log_prob_keys were passed. When "
                "composite_lp_aggregate() returns ``True``, log_prob_key must be used instead."
            )
        if log_prob_key is None:
            if aggregate:
                log_prob_key = "sample_log_prob"
            elif n_out == 1:
                log_prob_key = _add_suffix(self._out_keys[0], "_log_prob")
        elif n_out > 1 and not aggregate:
            raise RuntimeError(
                "composite_lp_aggregate is set to `False` but a `log_prob_key` was passed. When "
                "composite_lp_aggregate() returns ``False``, log_prob_keys must be used instead."
            )
        self._log_prob_key = log_prob_key
        self._log_prob_keys = (
            [unravel_key(k) for k in log_prob_keys] if log_prob_keys else log_prob_keys
        )
        self._custom_log_prob_keys = []
        if log_prob_keys is not None and len(log_prob_keys) == n_out:
            for out_key, lp_key in zip(self._out_keys, self._log_prob_keys):
                expected = _add_suffix(out_key, "_log_prob")
                if lp_key != expected:
                    self._custom_log_prob_keys.append((expected, lp_key))

    def _check_log_prob_keys(self, log_prob_keys: Any, log_prob_key: Any) -> None:
        """A custom log-probability key must not overwrite (or sit inside) a sample key."""
        if not isinstance(self.distribution_class, type):
            return
        if issubclass(self.distribution_class, CompositeDistribution):
            distribution_map = self.distribution_kwargs.get("distribution_map")
            if distribution_map is None:
                return
            names = _resolve_name_map(self.distribution_kwargs.get("name_map"), distribution_map)
            sample_keys = list(names.values())
        else:
            sample_keys = list(self._out_keys)
        defaults = {_add_suffix(k, "_log_prob") for k in [*self._out_keys, *sample_keys]}
        defaults.add("sample_log_prob")
        candidates = log_prob_keys if log_prob_keys is not None else [log_prob_key]
        clashes = [
            (lp, sample)
            for lp in (unravel_key(k) for k in candidates if isinstance(k, (str, tuple)))
            if lp not in defaults
            for sample in sample_keys
            if lp == sample or _is_inside(lp, sample) or _is_inside(sample, lp)
        ]
        if clashes:
            raise ValueError(
                "A custom log-probability key cannot be a sample key, lie inside one or hold one, "
                "since writing the log-probability would overwrite the sample. Got "
                + ", ".join(f"log-probability key {lp!r} for sample key {s!r}" for lp, s in clashes)
                + "."
            )

    def _check_aggregate(self, what: str) -> bool:
        now = composite_lp_aggregate()
        if now != self._composite_lp_aggreate_at_init:
            raise RuntimeError(
                f"composite_lp_aggregate is set to `{now}`, but the class was instantiated with "
                f"`{self._composite_lp_aggreate_at_init}` which may affect the {what} property."
            )
        return now

    @property  # type: ignore[misc]
    def out_keys(self) -> list[NestedKey]:  # type: ignore[override]
        keys = list(self._out_keys)
        if self.return_log_prob:
            if not composite_lp_aggregate():
                lp_keys = self.log_prob_keys
                if keys[-len(lp_keys) :] != lp_keys:
                    keys.extend(lp_keys)
            elif self.log_prob_key not in keys:
                keys.append(self.log_prob_key)
        return keys

    @property
    def log_prob_key(self) -> NestedKey:
        """The one log-probability key (raises if there are several, with aggregation off)."""
        if not self._check_aggregate("log_prob_key"):
            if len(self.log_prob_keys) == 1:
                return self.log_prob_keys[0]  # type: ignore[no-any-return]
            raise RuntimeError(
                f"composite_lp_aggregate is set to ``False``, hence {type(self).__name__}."
                "log_prob_key cannot be accessed unless there is one and only one element in "
                f"log_prob_keys (got log_prob_keys={self.log_prob_keys}). Use "
                f"{type(self).__name__}.log_prob_keys instead."
            )
        return self._log_prob_key  # type: ignore[no-any-return]

    @property
    def log_prob_keys(self) -> list[NestedKey]:
        """The log-probability keys, one per sample key (one summed key with aggregation on)."""
        if self._check_aggregate("log_prob_keys"):
            return [self.log_prob_key]
        return self._log_prob_keys  # type: ignore[no-any-return]

    @property
    def dist_params_keys(self) -> list[NestedKey]:
        return list(self.in_keys)

    @property
    def dist_sample_keys(self) -> list[NestedKey]:
        return list(self._out_keys)

    def __repr__(self) -> str:
        fields = [
            f"in_keys={self.in_keys}",
            f"out_keys={self.out_keys}",
            f"distribution_class={self.distribution_class}",
            f"distribution_kwargs={self.distribution_kwargs}",
            f"default_interaction_type={self.default_interaction_type}",
            f"num_samples={self.num_samples}",
        ]
        body = indent(",\n".join(fields), "    ")
        return f"{type(self).__name__}(\n{body})"

    # ================================================================== distribution
    def get_dist(self, tensordict: TensorDictBase) -> D.Distribution:
        """The distribution built from the parameters in ``tensordict``.

        Raises:
            TypeError: the keyword names do not match the distribution's arguments.
        """
        kwargs = {}
        for dist_key, td_key in zip(self.dist_keys, self.in_keys):
            name = dist_key[-1] if isinstance(dist_key, tuple) else dist_key
            kwargs[name] = tensordict.get(td_key, None)
        try:
            return self.distribution_class(**kwargs, **self.distribution_kwargs)  # type: ignore[no-any-return]
        except TypeError as err:
            if "an unexpected keyword argument" in str(err):
                raise TypeError(
                    "distribution keywords and tensordict keys indicated by "
                    f"ProbabilisticTensorDictModule.dist_keys must match. Got this error "
                    f"message: \n{indent(str(err), '    ')}\nwith dist_keys={self.dist_keys}"
                ) from err
            if re.search("missing.*required positional arguments", str(err)):
                raise TypeError(
                    f"TensorDict with keys {list(tensordict.keys())} does not match the "
                    f"distribution {self.distribution_class} keywords."
                ) from err
            raise

    build_dist_from_params = get_dist

    def log_prob(self, tensordict: TensorDictBase, *, dist: D.Distribution | None = None) -> Any:
        """The log-probability of the value(s) in ``tensordict`` under the distribution."""
        if dist is None:
            dist = self.get_dist(tensordict)
        if not isinstance(dist, CompositeDistribution):
            return dist.log_prob(tensordict.get(self.out_keys[0]))
        aggregate = composite_lp_aggregate()
        if aggregate != self._composite_lp_aggreate_at_init:
            raise RuntimeError(
                self._CHANGE_IN_C_LP_A.format(
                    type(self).__name__, self._composite_lp_aggreate_at_init, aggregate
                )
            )
        if aggregate:
            with set_composite_lp_aggregate(False):
                per_key = dist.log_prob(tensordict)
                tensordict.update(per_key)
            return _total_log_prob(per_key)
        lp = dist.log_prob(tensordict)
        self._update_td_lp(lp)
        return lp

    def _update_td_lp(self, lp: TensorDictBase) -> None:
        """Move default-named log-probabilities to the custom ``log_prob_keys``."""
        renames: list[tuple[NestedKey, NestedKey]] = []
        for out_key, lp_key in zip(self.dist_sample_keys, self.log_prob_keys):
            expected = _add_suffix(out_key, "_log_prob")
            if lp_key != expected:
                renames.append((expected, lp_key))
        if renames:
            _rename_entries(lp, renames)

    # ================================================================== forward
    @dispatch(auto_batch_size=False)
    @_set_skip_existing_None()
    def forward(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        _requires_sample: bool = True,
    ) -> TensorDictBase:
        """Write a value of the distribution (and its log-probability if asked)."""
        if tensordict_out is None:
            tensordict_out = tensordict
        dist = self.get_dist(tensordict)
        if not _requires_sample:
            if self.return_log_prob:
                self._write_log_prob_of_existing(tensordict, tensordict_out, dist)
            return tensordict_out
        generator, writeback = self._resolve_generator(tensordict)
        sample, log_prob = self._sample(dist, generator)
        if writeback is not None:
            writeback(generator)
        if self.num_samples is not None:
            tensordict_out = tensordict_out.expand(self.num_samples + tensordict_out.shape)
        if isinstance(sample, TensorDictBase):
            if self.return_log_prob:
                self._add_composite_log_prob(sample, log_prob, dist)
            tensordict_out.update(sample)
            return tensordict_out
        if isinstance(sample, torch.Tensor):
            sample = (sample,)
        if self._warn_default_out_key and not torch.compiler.is_dynamo_compiling():
            self._warn_default_out_key = False
            warnings.warn(
                'ProbabilisticTensorDictModule got no out_keys and writes its sample at "_". '
                "Pass out_keys to write the sample at a key of your choice.",
                FutureWarning,
                stacklevel=2,
            )
        for key, value in zip(self.dist_sample_keys, sample):
            tensordict_out.set(key, value)
        if self.return_log_prob:
            if log_prob is None:
                log_prob = dist.log_prob(*sample)
            tensordict_out.set(self.log_prob_key, log_prob)
        return tensordict_out

    def _sample(self, dist: Any, generator: Any) -> tuple[Any, Any]:
        """The value, and its log-probability when sampled jointly (else None)."""
        joint = None
        if (
            self.return_log_prob
            and (interaction_type() or self.default_interaction_type) is InteractionType.RANDOM
        ):
            joint = _joint_sampler(dist)
        if joint is None:
            return self._dist_sample(
                dist, interaction_type=interaction_type(), generator=generator
            ), None
        per_key = (
            set_composite_lp_aggregate(False)
            if isinstance(dist, CompositeDistribution)
            else contextlib.nullcontext()
        )
        with _use_generator(generator), per_key:
            return joint(self.num_samples or torch.Size(()))

    def _add_composite_log_prob(self, sample: TensorDictBase, log_prob: Any, dist: Any) -> None:
        aggregate = composite_lp_aggregate()
        if aggregate != self._composite_lp_aggreate_at_init:
            raise RuntimeError(
                self._CHANGE_IN_C_LP_A.format(
                    type(self).__name__, self._composite_lp_aggreate_at_init, aggregate
                )
            )
        if aggregate:
            if log_prob is None:
                with set_composite_lp_aggregate(False):
                    log_prob = dist.log_prob(sample)
            if log_prob is not sample:
                sample.update(log_prob)
            sample.set(self.log_prob_key, _total_log_prob(log_prob))
            return
        if log_prob is None:
            log_prob = dist.log_prob(sample)
        self._update_td_lp(log_prob)
        sample.update(log_prob)

    def _write_log_prob_of_existing(self, tensordict: Any, tensordict_out: Any, dist: Any) -> None:
        values = [tensordict.get(k) for k in self.out_keys if k not in self.log_prob_keys]
        if isinstance(dist, CompositeDistribution) and not (
            len(values) == 1 and is_tensor_collection(values[0])
        ):
            log_prob = self.log_prob(tensordict, dist=dist)
            if is_tensor_collection(log_prob):
                tensordict_out.update(log_prob)
            else:
                tensordict_out.set(self.log_prob_key, log_prob)
            return
        tensordict_out.set(self.log_prob_key, dist.log_prob(*values))

    # ================================================================== random streams
    @staticmethod
    def _parse_generator(generator: Any) -> tuple[torch.Generator | None, NestedKey | None]:
        if generator is None:
            return None, None
        if isinstance(generator, torch.Generator):
            return generator, None
        if isinstance(generator, int) and not isinstance(generator, bool):
            owned = torch.Generator()
            owned.manual_seed(generator)
            return owned, None
        if isinstance(generator, (str, tuple)):
            return None, unravel_key(generator)
        raise TypeError(
            "generator must be a torch.Generator, int, NestedKey, or None; got "
            f"{type(generator).__name__}."
        )

    def _resolve_generator(self, tensordict: TensorDictBase) -> tuple[Any, Any]:
        """(the generator to draw from or None, a function writing the advanced seed back)."""
        if self._generator is not None:
            return self._generator, None
        if self._generator_key is None:
            return None, None
        value = tensordict.get(self._generator_key, None)
        if value is None:
            return None, None
        value = value.data if is_non_tensor(value) else value
        if isinstance(value, torch.Generator):
            return value, None
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(
                    f"Generator key {self._generator_key!r} resolved to a tensor of "
                    f"{value.numel()} elements; expected a scalar seed."
                )
            seed, device, as_tensor = int(value.item()), value.device, True
        elif isinstance(value, int) and not isinstance(value, bool):
            seed, device, as_tensor = value, self._infer_param_device(tensordict), False
        else:
            raise TypeError(
                f"Generator key {self._generator_key!r} resolved to a value of type "
                f"{type(value).__name__}; expected torch.Generator, int, or scalar Tensor."
            )
        local = torch.Generator(device=device)
        local.manual_seed(seed)
        key = self._generator_key

        def writeback(gen: torch.Generator) -> None:
            nxt = torch.randint(0, 2**62, (), generator=gen, dtype=torch.int64, device=device)
            tensordict.set(key, nxt if as_tensor else NonTensorData(int(nxt.item())))

        return local, writeback

    def _infer_param_device(self, tensordict: TensorDictBase) -> torch.device:
        for key in self.in_keys:
            value = tensordict.get(key, None)
            if isinstance(value, torch.Tensor):
                return value.device
        return torch.device("cpu")

    def _dist_sample(
        self,
        dist: D.Distribution,
        interaction_type: InteractionType | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> Any:
        """The value of ``dist`` for ``interaction_type`` (expanded to ``num_samples`` when it
        is not random)."""
        kind = interaction_type if interaction_type is not None else self.default_interaction_type
        sample = self._draw_dist_sample(dist, kind, generator=generator)
        if self.num_samples and kind is not InteractionType.RANDOM:
            if isinstance(sample, tuple):
                return tuple(s.expand(self.num_samples + s.shape) for s in sample)
            return sample.expand(self.num_samples + sample.shape)
        return sample

    def _draw_dist_sample(
        self,
        dist: D.Distribution,
        interaction_type: InteractionType | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> Any:
        kind = interaction_type if interaction_type is not None else self.default_interaction_type
        return draw(
            dist,
            kind,
            num_samples=self.num_samples,
            n_empirical_estimate=self.n_empirical_estimate,
            generator=generator,
            owner=type(self).__qualname__.rsplit(".", 1)[-1],
        )
