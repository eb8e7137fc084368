"""Distributions: Delta, OneHotCategorical, TruncatedNormal, CompositeDistribution, and the
parameter modules."""

from __future__ import annotations

import math

import pytest
import torch
from torch import distributions as D

from tensordict import TensorDict
from tensordict.nn import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    NormalParamExtractor,
    OneHotCategorical,
    TruncatedNormal,
    add_custom_mapping,
    biased_softplus,
    inv_softplus,
    mappings,
    rand_one_hot,
    set_composite_lp_aggregate,
)
from tensordict.nn.distributions import Delta
from tensordict.nn.utils import expln


def test_delta_is_certain_of_its_parameter():
    param = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    dist = Delta(param)
    assert dist.batch_shape == (2,) and dist.event_shape == (2,)
    assert torch.equal(dist.log_prob(param), torch.full((2,), math.inf))
    assert torch.equal(dist.log_prob(param + 1), torch.full((2,), -math.inf))
    assert dist.sample((3,)).shape == (3, 2, 2)


def test_delta_rsample_keeps_gradients():
    param = torch.ones(2, requires_grad=True)
    Delta(param).rsample().sum().backward()
    assert torch.equal(param.grad, torch.ones(2))


def test_one_hot_categorical_samples_and_scores_one_hot_vectors():
    dist = OneHotCategorical(logits=torch.tensor([[0.0, 20.0, 0.0]]))
    sample = dist.sample((5,))
    assert sample.dtype == torch.long and sample.shape == (5, 1, 3)
    assert (sample.sum(-1) == 1).all()
    assert torch.equal(dist.mode, torch.tensor([[0, 1, 0]]))
    assert dist.log_prob(dist.mode).exp().item() > 0.99


def test_one_hot_rsample_is_one_hot_with_gradients():
    logits = torch.zeros(4, requires_grad=True)
    sample = OneHotCategorical(logits=logits).rsample()
    assert sample.sum() == 1
    (sample * torch.arange(4.0)).sum().backward()
    assert logits.grad is not None


def test_rand_one_hot_follows_the_probabilities():
    torch.manual_seed(0)
    draws = rand_one_hot(torch.log(torch.tensor([0.2, 0.8])).expand(4000, 2))
    assert abs(draws[:, 1].float().mean().item() - 0.8) < 0.03


def test_truncated_normal_stays_in_bounds_and_matches_a_numerical_mean():
    loc, scale, a, b = torch.tensor(0.3), torch.tensor(1.5), -1.0, 2.0
    dist = TruncatedNormal(loc, scale, a, b)
    sample = dist.sample((20000,))
    assert sample.min() >= a and sample.max() <= b
    xs = torch.linspace(a, b, 20001)
    density = D.Normal(loc, scale).log_prob(xs).exp()
    mean = (xs * density).sum() / density.sum()
    torch.testing.assert_close(dist.mean, mean, atol=1e-3, rtol=0)
    torch.testing.assert_close(sample.mean(), mean, atol=0.03, rtol=0)


def test_truncated_normal_density_integrates_to_one():
    dist = TruncatedNormal(torch.tensor(0.0), torch.tensor(1.0), -0.5, 1.0)
    xs = torch.linspace(-0.5, 1.0, 10001)
    total = torch.trapezoid(dist.log_prob(xs).exp(), xs)
    torch.testing.assert_close(total, torch.tensor(1.0), atol=1e-4, rtol=0)
    torch.testing.assert_close(dist.cdf(torch.tensor(1.0)), torch.tensor(1.0))


def test_truncated_normal_rejects_an_empty_interval():
    with pytest.raises(ValueError, match="Incorrect truncation range"):
        TruncatedNormal(torch.zeros(1), torch.ones(1), 1.0, 1.0)


def test_normal_param_extractor_splits_and_bounds_the_scale():
    loc, scale = NormalParamExtractor(scale_lb=0.5)(torch.tensor([1.0, 2.0, -50.0, 0.0]))
    assert torch.equal(loc, torch.tensor([1.0, 2.0]))
    assert scale[0] == 0.5
    torch.testing.assert_close(scale[1], torch.tensor(1.0))


def test_state_independent_scale_is_learned_and_shape_checked():
    module = AddStateIndependentNormalScale(3, scale_mapping="relu", init_value=2.0)
    _, scale = module(torch.zeros(5, 3))
    assert (scale == 2.0).all() and scale.shape == (5, 3)
    assert [n for n, _ in module.named_parameters()] == ["state_independent_scale"]
    with pytest.raises(RuntimeError, match="do not match"):
        module(torch.zeros(5, 4))


def test_mappings():
    x = torch.tensor([-1.0, 0.0, 1.0])
    torch.testing.assert_close(expln(x), torch.tensor([math.exp(-1), 1.0, 1 + math.log(2)]))
    assert biased_softplus(3.0, min_val=0.5)(torch.zeros(1)).item() == pytest.approx(3.0)
    assert mappings("biased_softplus_2.0_0.1")(torch.zeros(1)).item() == pytest.approx(2.0)
    assert inv_softplus(torch.nn.functional.softplus(torch.tensor(0.7))).item() == pytest.approx(
        0.7
    )
    add_custom_mapping("triple", lambda t: 3 * t)
    assert mappings("triple")(torch.ones(1)).item() == 3
    with pytest.raises(NotImplementedError, match="Unknown mapping"):
        mappings("nope")
    with pytest.raises(ValueError, match="Invalid number"):
        mappings("biased_softplus_1_2_3")


def composite() -> CompositeDistribution:
    params = TensorDict(
        {
            "cont": {"loc": torch.zeros(3, 2), "scale": torch.ones(3, 2)},
            ("nested", "disc"): {"logits": torch.zeros(3, 4)},
        },
        [3],
    )
    return CompositeDistribution(
        params, distribution_map={"cont": D.Normal, ("nested", "disc"): D.Categorical}
    )


def test_composite_samples_a_tensordict_of_the_batch_shape():
    dist = composite()
    assert dist.batch_shape == (3,)
    sample = dist.sample((5,))
    assert sample.batch_size == (5, 3)
    assert sample["cont"].shape == (5, 3, 2) and sample["nested", "disc"].shape == (5, 3)


def test_composite_log_prob_per_key_or_summed():
    dist = composite()
    sample = dist.sample()
    per_key = dist.log_prob(sample)
    assert set(per_key.keys(True, True)) == {"cont_log_prob", ("nested", "disc_log_prob")}
    with set_composite_lp_aggregate(True):
        total = dist.log_prob(sample)
    expected = per_key["cont_log_prob"].sum(-1) + per_key["nested", "disc_log_prob"]
    torch.testing.assert_close(total, expected)


def test_composite_entropy_per_key_or_summed():
    dist = composite()
    ent = dist.entropy()
    torch.testing.assert_close(ent["nested", "disc_entropy"], torch.full((3,), math.log(4)))
    with set_composite_lp_aggregate(True):
        assert dist.entropy().shape == (3,)


def test_composite_name_map_moves_samples():
    params = TensorDict({"cont": {"loc": torch.zeros(2), "scale": torch.ones(2)}}, [2])
    dist = CompositeDistribution(
        params, distribution_map={"cont": D.Normal}, name_map={"cont": ("out", "c")}
    )
    assert dist.sample()["out", "c"].shape == (2,)


def test_composite_missing_params_raise_key_error():
    with pytest.raises(KeyError, match="no param"):
        CompositeDistribution(TensorDict(), distribution_map={"a": D.Normal})


def test_composite_cdf_and_icdf_round_trip():
    params = TensorDict({"c": {"loc": torch.zeros(4), "scale": torch.ones(4)}}, [4])
    dist = CompositeDistribution(params, distribution_map={"c": D.Normal})
    sample = dist.sample()
    dist.cdf(sample)
    dist.icdf(sample)
    torch.testing.assert_close(sample["c_icdf"], sample["c"], atol=1e-4, rtol=0)
