"""Probabilistic modules: interaction types, log-probability keys, composite distributions,
random streams, sequences."""

from __future__ import annotations

import pytest
import torch
from torch import distributions as D

from tensordict import TensorDict
from tensordict.nn import (
    CompositeDistribution,
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    interaction_type,
    set_composite_lp_aggregate,
    set_interaction_type,
)
from tensordict.nn.distributions import Delta


def normal(**kwargs) -> ProbabilisticTensorDictModule:
    kwargs.setdefault("out_keys", ["action"])
    return ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"], distribution_class=D.Normal, **kwargs
    )


def params(n: int = 3) -> TensorDict:
    return TensorDict(loc=torch.arange(float(n)), scale=torch.ones(n), batch_size=[n])


def test_interaction_type_names_are_case_insensitive():
    assert InteractionType.from_str("RanDom") is InteractionType.RANDOM
    with pytest.raises(ValueError, match="is not a valid InteractionType"):
        InteractionType.from_str("foo")
    with set_interaction_type("Mode"):
        assert interaction_type() is InteractionType.MODE
    assert interaction_type() is None


@pytest.mark.parametrize("kind", ["mode", "mean", "deterministic"])
def test_statistics_of_a_normal_are_its_loc(kind):
    with set_interaction_type(kind):
        out = normal()(params())
    assert torch.equal(out["action"], out["loc"])


def test_missing_statistic_raises_not_implemented():
    with set_interaction_type("median"), pytest.raises(NotImplementedError, match="median"):
        normal()(params())


def test_random_samples_differ_from_the_loc():
    out = normal(default_interaction_type="random")(params())
    assert not torch.equal(out["action"], out["loc"])


def test_deterministic_without_a_statistic_falls_back_with_a_warning():
    module = ProbabilisticTensorDictModule(
        in_keys=["concentration"], out_keys=["x"], distribution_class=D.Dirichlet
    )
    td = TensorDict(concentration=torch.ones(3))
    out = module(td)  # Dirichlet is registered: its mean
    torch.testing.assert_close(out["x"], torch.full((3,), 1 / 3))


def test_lkj_cholesky_has_no_deterministic_value():
    module = ProbabilisticTensorDictModule(
        in_keys=[], out_keys=["x"], distribution_class=lambda: D.LKJCholesky(3, 5.0)
    )
    with pytest.raises(RuntimeError, match="DETERMINISTIC, MEAN and MODE"):
        module(TensorDict())


def test_log_prob_key_defaults_to_sample_key_suffix():
    module = normal(return_log_prob=True, default_interaction_type="random")
    out = module(params())
    assert module.log_prob_key == "action_log_prob"
    torch.testing.assert_close(
        out["action_log_prob"], D.Normal(out["loc"], out["scale"]).log_prob(out["action"])
    )
    assert module.out_keys == ["action", "action_log_prob"]


def test_nested_sample_key_gets_a_nested_log_prob_key():
    module = normal(out_keys=[("agent", "action")], return_log_prob=True)
    assert module.log_prob_key == ("agent", "action_log_prob")


def test_aggregate_mode_uses_a_single_summed_key():
    with set_composite_lp_aggregate(True):
        module = normal(return_log_prob=True)
        assert module.log_prob_key == "sample_log_prob"
        out = module(params())
        assert "sample_log_prob" in set(out.keys())
    with pytest.raises(RuntimeError, match="instantiated with"):
        _ = module.log_prob_key


def test_custom_log_prob_key_cannot_overwrite_the_sample():
    with pytest.raises(ValueError, match="cannot be a sample key"):
        normal(return_log_prob=True, log_prob_key="action")


def test_dict_in_keys_name_the_distribution_arguments():
    module = ProbabilisticTensorDictModule(
        in_keys={"loc": "mu", "scale": "sigma"}, out_keys=["a"], distribution_class=D.Normal
    )
    assert module.dist_keys == ("loc", "scale")
    out = module(TensorDict(mu=torch.zeros(2), sigma=torch.ones(2)))
    assert (out["a"] == 0).all()


def test_mismatched_distribution_keywords_raise_type_error():
    module = ProbabilisticTensorDictModule(
        in_keys=["wrong"], out_keys=["a"], distribution_class=D.Normal
    )
    with pytest.raises(TypeError):
        module(TensorDict(wrong=torch.zeros(1)))


def test_num_samples_adds_a_leading_dimension():
    module = normal(num_samples=4, default_interaction_type="random", return_log_prob=True)
    out = module(params())
    assert out.batch_size == torch.Size([4, 3])
    assert out["action_log_prob"].shape == (4, 3)


def test_generator_makes_sampling_reproducible():
    a = normal(default_interaction_type="random", generator=0)
    b = normal(default_interaction_type="random", generator=torch.Generator().manual_seed(0))
    torch.manual_seed(123)
    first = a(params())["action"]
    torch.manual_seed(456)
    assert torch.equal(first, b(params())["action"])
    assert not torch.equal(first, a(params())["action"])  # the stream advanced


def test_generator_key_reads_and_writes_back_a_seed():
    module = normal(default_interaction_type="random", generator="seed")
    td = TensorDict(loc=torch.zeros(3), scale=torch.ones(3), seed=torch.tensor(7))
    first = module(td.clone())["action"]
    again = module(td.clone())["action"]
    assert torch.equal(first, again)
    out = module(td)
    assert out["seed"] != 7


def test_bad_generator_type_raises():
    with pytest.raises(TypeError, match="generator must be"):
        normal(generator=1.5)


def test_requires_sample_false_only_scores_the_existing_value():
    module = normal(return_log_prob=True)
    td = params().set("action", torch.zeros(3))
    module(td, _requires_sample=False)
    torch.testing.assert_close(
        td["action_log_prob"], D.Normal(td["loc"], 1.0).log_prob(torch.zeros(3))
    )


def test_delta_module_writes_its_parameter():
    module = ProbabilisticTensorDictModule(
        in_keys=["param"], out_keys=["a"], distribution_class=Delta
    )
    out = module(TensorDict(param=torch.ones(2, 1), batch_size=[2]))
    assert torch.equal(out["a"], torch.ones(2, 1))


def test_sequence_builds_the_distribution_from_computed_params():
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(
            lambda x: (x, torch.ones_like(x)), in_keys=["x"], out_keys=["loc", "scale"]
        ),
        normal(),
    )
    td = TensorDict(x=torch.arange(3.0), batch_size=[3])
    dist = seq.get_dist(td)
    assert isinstance(dist, D.Normal)
    assert torch.equal(seq(td)["action"], td["x"])
    assert seq.default_interaction_type is InteractionType.DETERMINISTIC


def test_sequence_with_two_samplers_is_composite():
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["loc"]),
        ProbabilisticTensorDictModule(
            in_keys=["loc"],
            out_keys=["y"],
            distribution_class=D.Normal,
            distribution_kwargs={"scale": 1.0},
            default_interaction_type="random",
        ),
        TensorDictModule(lambda y: y, in_keys=["y"], out_keys=["loc2"]),
        ProbabilisticTensorDictModule(
            in_keys={"loc": "loc2"},
            out_keys=["z"],
            distribution_class=D.Normal,
            distribution_kwargs={"scale": 1.0},
            default_interaction_type="random",
        ),
    )
    assert seq.return_composite
    td = TensorDict(x=torch.zeros(5), batch_size=[5])
    dist = seq.get_dist(td)
    assert isinstance(dist, CompositeDistribution)
    lp = seq.log_prob(seq(td))
    assert sorted(lp.keys()) == ["y_log_prob", "z_log_prob"]


def test_sequence_without_samplers_is_plain():
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    )
    assert seq._requires_sample is False
    assert seq(TensorDict(x=torch.zeros(())))["y"] == 1


def test_sequence_slices_keep_the_right_type():
    seq = ProbabilisticTensorDictSequential(
        normal(),
        TensorDictModule(lambda a: a, in_keys=["action"], out_keys=["b"]),
        normal(out_keys=["c"]),
    )
    assert isinstance(seq[:2], ProbabilisticTensorDictSequential)
    plain = seq[1:2]
    assert isinstance(plain, TensorDictSequential)
    assert not isinstance(plain, ProbabilisticTensorDictSequential)


def test_final_module_must_be_probabilistic_without_composite():
    with pytest.raises(TypeError, match="final module"):
        ProbabilisticTensorDictSequential(
            TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y"]), return_composite=False
        )


def test_composite_module_writes_each_sample_and_log_prob():
    module = ProbabilisticTensorDictModule(
        in_keys=["params"],
        out_keys=None,
        distribution_class=CompositeDistribution,
        distribution_kwargs={
            "distribution_map": {"cont": D.Normal, ("nested", "disc"): D.Categorical}
        },
        return_log_prob=True,
        default_interaction_type="random",
    )
    td = TensorDict(
        params=TensorDict(
            {
                "cont": {"loc": torch.zeros(3, 2), "scale": torch.ones(3, 2)},
                ("nested", "disc"): {"logits": torch.zeros(3, 4)},
            },
            [3],
        ),
        batch_size=[3],
    )
    out = module(td)
    assert out["cont"].shape == (3, 2)
    assert out["nested", "disc"].shape == (3,)
    assert module.log_prob_keys == ["cont_log_prob", ("nested", "disc_log_prob")]
    assert out["nested", "disc_log_prob"].shape == (3,)


def test_sequence_draws_a_sample_like_its_last_probabilistic_module():
    # TorchRL's advantage modules call actor._dist_sample on the sequence
    head = TensorDictModule(lambda x: (x, torch.ones_like(x)), ["x"], ["loc", "scale"])
    seq = ProbabilisticTensorDictSequential(head, normal(n_empirical_estimate=7))
    assert seq.n_empirical_estimate == 7
    dist = seq.get_dist(TensorDict(x=torch.arange(3.0), batch_size=[3]))
    mode = seq._dist_sample(dist, interaction_type=InteractionType.DETERMINISTIC)
    assert torch.equal(mode, torch.arange(3.0))
