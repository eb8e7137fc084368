"""How probabilistic modules turn a distribution into a value: the interaction type.

``InteractionType.RANDOM`` samples; ``MODE`` / ``MEDIAN`` / ``MEAN`` read that statistic (a mean
without closed form is estimated from samples); ``DETERMINISTIC`` uses the distribution's
``deterministic_sample`` if it has one, else the statistic registered for its class (``MODE`` for
discrete distributions, ``MEAN`` for continuous ones), else falls back with a warning.

:class:`set_interaction_type` sets the type for a block; :func:`interaction_type` reads it (None
outside any block: each module then uses its ``default_interaction_type``). ``_use_generator``
draws random numbers from a given ``torch.Generator`` instead of the global one.
"""

from __future__ import annotations

import contextlib
import enum
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import distributions as D
from torch.compiler import is_compiling
from torch.utils._contextlib import _DecoratorContextManager

from tensordict.nn.distributions.continuous import Delta
from tensordict.nn.distributions.discrete import OneHotCategorical
from tensordict.nn.distributions.truncated_normal import TruncatedNormal, TruncatedStandardNormal
from tensordict.nn.utils import _Mode

__all__ = ["InteractionType", "interaction_type", "set_interaction_type"]


class InteractionType(str, enum.Enum):
    """How a probabilistic module gets a value from its distribution (case-insensitive names).

    Examples:
        >>> InteractionType("Mode") is InteractionType.MODE
        True
        >>> InteractionType.from_str("random")
        <InteractionType.RANDOM: 'random'>
    """

    MODE = "mode"
    MEDIAN = "median"
    MEAN = "mean"
    RANDOM = "random"
    DETERMINISTIC = "deterministic"

    __str__ = str.__str__
    __format__ = str.__format__  # type: ignore[assignment]

    @classmethod
    def from_str(cls, type_str: str) -> InteractionType:
        """The member named ``type_str`` (any case).

        Raises:
            ValueError: no member has that name.
        """
        return cls(type_str.lower())

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None


_INTERACTION = _Mode(None)


def interaction_type() -> InteractionType | None:
    """The interaction type set by the enclosing :class:`set_interaction_type` block, or None.

    Examples:
        >>> with set_interaction_type("random"):
        ...     interaction_type()
        <InteractionType.RANDOM: 'random'>
        >>> interaction_type() is None
        True
    """
    return _INTERACTION.get()  # type: ignore[no-any-return]


class set_interaction_type(_DecoratorContextManager):
    """Set :func:`interaction_type` for a block or a decorated function.

    Args:
        type: an :class:`InteractionType`, its name (any case), or None. Defaults to
            ``DETERMINISTIC``.
        thread_local: the value applies to the calling thread only.

    Raises:
        ValueError: an unknown name, or a value that is neither a name nor a member.
    """

    def __init__(
        self,
        type: InteractionType | str | None = InteractionType.DETERMINISTIC,
        *,
        thread_local: bool = False,
    ) -> None:
        super().__init__()
        if type is not None and not isinstance(type, InteractionType):
            if not isinstance(type, str):
                raise ValueError(f"{type} is not a valid InteractionType")
            type = InteractionType(type.lower())
        self.type = type
        self.thread_local = thread_local
        self._prev: list[Any] = []

    def clone(self) -> set_interaction_type:
        return type(self)(self.type, thread_local=self.thread_local)

    def __enter__(self) -> None:
        if self.thread_local:
            self._prev.append(_INTERACTION.get_thread())
            _INTERACTION.set_thread(self.type)
        else:
            self._prev.append(_INTERACTION.get())
            _INTERACTION.set(self.type)

    def __exit__(self, *exc: Any) -> None:
        prev = self._prev.pop()
        if self.thread_local:
            _INTERACTION.set_thread(prev)
        else:
            _INTERACTION.set(prev)


@contextlib.contextmanager
def _use_generator(generator: torch.Generator | None) -> Iterator[None]:
    """Within the block, the global random stream is ``generator``'s (which then advances)."""
    if generator is None or is_compiling():
        yield
        return
    device = generator.device
    if device.type == "cuda":
        with torch.random.fork_rng(devices=[device.index]):
            torch.cuda.set_rng_state(generator.get_state(), device)
            try:
                yield
            finally:
                generator.set_state(torch.cuda.get_rng_state(device))
    else:
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(generator.get_state())
            try:
                yield
            finally:
                generator.set_state(torch.get_rng_state())


def _register() -> dict[type, InteractionType]:
    """The statistic standing for DETERMINISTIC, per distribution class."""
    out: dict[type, InteractionType] = {}
    for name in dir(D):
        cls = getattr(D, name)
        if isinstance(cls, type) and issubclass(cls, D.Distribution):
            if getattr(cls, "has_enumerate_support", False):
                out[cls] = InteractionType.MODE
            else:
                out[cls] = InteractionType.MEAN
    out[D.LogisticNormal] = InteractionType.DETERMINISTIC
    out[Delta] = InteractionType.DETERMINISTIC
    out[OneHotCategorical] = InteractionType.MODE
    out[TruncatedNormal] = InteractionType.MEAN
    out[TruncatedStandardNormal] = InteractionType.MEAN
    return out


_DETERMINISTIC_REGISTER = _register()


def _special_deterministic(dist: Any) -> Any:
    """Deterministic values of torch distributions that lack a usable statistic."""
    if isinstance(dist, D.LogisticNormal):
        value = (
            dist.base_dist.base_dist.loc if isinstance(dist.base_dist, D.Independent) else dist.loc
        )
        for transform in dist.transforms:
            value = transform(value)
        return value
    if isinstance(dist, D.RelaxedOneHotCategorical):
        probs = dist.base_dist.probs
        return torch.nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs)
    if isinstance(dist, D.RelaxedBernoulli):
        return (dist.probs > 0.5).to(dist.probs)
    return None


def deterministic_kind(dist: Any) -> tuple[InteractionType | None, Any]:
    """(the statistic to use, or None; a ready value for DETERMINISTIC, or None)."""
    value = getattr(dist, "deterministic_sample", None)
    if value is not None:
        return InteractionType.DETERMINISTIC, value
    special = _special_deterministic(dist)
    if special is not None:
        return InteractionType.DETERMINISTIC, special
    cls = type(dist.base_dist) if isinstance(dist, D.Independent) else type(dist)
    kind = _DETERMINISTIC_REGISTER.get(cls)
    if kind is InteractionType.DETERMINISTIC and isinstance(dist, D.Independent):
        inner = getattr(dist.base_dist, "deterministic_sample", None)
        if inner is not None:
            return kind, inner
    return kind, None


def _fallback_statistic(dist: Any, owner: str) -> InteractionType:
    try:
        real = isinstance(dist.support, D.constraints._Real)
    except NotImplementedError:
        real = True
    kind = InteractionType.MEAN if real else InteractionType.MODE
    warnings.warn(
        f"deterministic_sample wasn't found when queried on {type(dist)}. {owner} is falling "
        f"back on {kind.value} instead. Give the distribution a deterministic_sample attribute "
        "or choose another interaction type.",
        category=UserWarning,
        stacklevel=3,
    )
    return kind


def deterministic_value(dist: Any, owner: str) -> Any:
    """The value a distribution takes under ``DETERMINISTIC`` (used by composite distributions).

    Raises:
        NotImplementedError: the statistic is not available for this distribution.
    """
    kind, value = deterministic_kind(dist)
    if value is not None:
        return value
    if kind is None or kind is InteractionType.DETERMINISTIC:
        kind = _fallback_statistic(dist, owner)
    try:
        return dist.mean if kind is InteractionType.MEAN else dist.mode
    except (AttributeError, NotImplementedError) as err:
        raise NotImplementedError(
            f"{type(dist)} has no deterministic_sample and its {kind.value} is not implemented: "
            f"{owner} cannot compute a deterministic value. Use another interaction type."
        ) from err


def draw(
    dist: Any,
    kind: InteractionType,
    *,
    num_samples: torch.Size | None,
    n_empirical_estimate: int,
    generator: torch.Generator | None,
    owner: str,
) -> Any:
    """The value of ``dist`` for the interaction type ``kind``.

    Raises:
        TypeError: ``dist`` is not a distribution.
        RuntimeError: DETERMINISTIC / MEAN / MODE of ``LKJCholesky``.
        NotImplementedError: the statistic is not available for this distribution.
    """
    if not isinstance(dist, D.Distribution):
        raise TypeError(f"Expected Distribution, but got {type(dist)}")
    if isinstance(dist, D.LKJCholesky) and kind in (
        InteractionType.DETERMINISTIC,
        InteractionType.MEAN,
        InteractionType.MODE,
    ):
        raise RuntimeError(
            f"DETERMINISTIC, MEAN and MODE are not implemented for {type(dist).__name__}."
        )
    if kind is InteractionType.DETERMINISTIC:
        resolved, value = deterministic_kind(dist)
        if value is not None:
            return value
        kind = (
            resolved
            if resolved not in (None, InteractionType.DETERMINISTIC)
            else _fallback_statistic(dist, owner)
        )
    if kind is InteractionType.MODE:
        return _statistic(dist, "mode")
    if kind is InteractionType.MEDIAN:
        return _statistic(dist, "median")
    if kind is InteractionType.MEAN:
        try:
            return dist.mean
        except (AttributeError, NotImplementedError):
            with _use_generator(generator):
                draws = (
                    dist.rsample((n_empirical_estimate,))
                    if dist.has_rsample
                    else dist.sample((n_empirical_estimate,))
                )
            return draws.mean(0)
    if kind is InteractionType.RANDOM:
        shape = num_samples if num_samples is not None else torch.Size(())
        with _use_generator(generator):
            return dist.rsample(shape) if dist.has_rsample else dist.sample(shape)
    raise NotImplementedError(f"unknown interaction_type {kind}")


def _statistic(dist: Any, name: str) -> Any:
    try:
        return getattr(dist, name)
    except AttributeError as err:
        raise NotImplementedError(f"method {type(dist)}.{name} is not implemented") from err
