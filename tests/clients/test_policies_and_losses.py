"""TorchRL's policies, losses and collectors built on tensordict.nn, as its users write them.

The environment is TorchRL's pure-torch Pendulum (no gym needed).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

# TorchRL 0.14.1 is installed by make setup (see the Makefile)
from torchrl.collectors import Collector
from torchrl.envs import PendulumEnv
from torchrl.modules import MLP, ProbabilisticActor, QValueActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss, DQNLoss
from torchrl.objectives.value import GAE

from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    NormalParamExtractor,
    TensorDictModule,
    TensorDictSequential,
    set_interaction_type,
)


def features() -> TensorDictModule:
    return TensorDictModule(
        lambda th, thdot: torch.stack([th.cos(), th.sin(), thdot], -1),
        in_keys=["th", "thdot"],
        out_keys=["observation"],
    )


def actor(env: PendulumEnv) -> ProbabilisticActor:
    net = nn.Sequential(MLP(in_features=3, out_features=2, num_cells=[16]), NormalParamExtractor())
    body = TensorDictSequential(
        features(), TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    )
    return ProbabilisticActor(
        body,
        in_keys=["loc", "scale"],
        spec=env.action_spec,
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},
        return_log_prob=True,
    )


def critic() -> TensorDictSequential:
    return TensorDictSequential(
        features(),
        ValueOperator(MLP(in_features=3, out_features=1, num_cells=[16]), in_keys=["observation"]),
    )


@pytest.fixture(scope="module")
def env() -> PendulumEnv:
    torch.manual_seed(0)
    return PendulumEnv()


def test_probabilistic_actor_samples_in_bounds_and_scores(env):
    policy = actor(env)
    td = policy(env.reset())
    assert td["action"].shape == env.action_spec.shape
    assert (td["action"].abs() <= 2).all()
    assert "action_log_prob" in set(td.keys())
    with set_interaction_type(InteractionType.DETERMINISTIC):
        first = policy(env.reset())["action"]
        assert torch.isfinite(first).all()


def test_collector_gathers_batches_of_transitions(env):
    collector = Collector(
        env, actor(env), frames_per_batch=8, total_frames=16, auto_register_policy_transforms=False
    )
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    assert len(batches) == 2
    for batch in batches:
        assert batch.batch_size == torch.Size([8])
        assert {"action", "action_log_prob", "next"} <= set(batch.keys())
        assert batch["next", "reward"].shape == (8, 1)


def test_ppo_loss_forward_backward_reaches_actor_and_critic(env):
    policy, value = actor(env), critic()
    collector = Collector(
        env, policy, frames_per_batch=16, total_frames=16, auto_register_policy_transforms=False
    )
    try:
        batch = next(iter(collector))
    finally:
        collector.shutdown()
    GAE(gamma=0.99, lmbda=0.95, value_network=value)(batch)
    loss = ClipPPOLoss(policy, value)
    out = loss(batch)
    total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
    assert torch.isfinite(total)
    total.backward()
    grads = [p.grad for p in loss.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


def test_dqn_loss_forward_backward():
    n_actions = 3
    net = nn.Linear(4, n_actions)
    qvalue = QValueActor(net, in_keys=["observation"], action_space="one_hot")
    loss = DQNLoss(qvalue, action_space="one_hot", delay_value=False)
    batch = TensorDict(
        {
            "observation": torch.randn(6, 4),
            "action": nn.functional.one_hot(torch.randint(n_actions, (6,)), n_actions),
            ("next", "observation"): torch.randn(6, 4),
            ("next", "reward"): torch.randn(6, 1),
            ("next", "done"): torch.zeros(6, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(6, 1, dtype=torch.bool),
        },
        [6],
    )
    out = loss(batch)
    out["loss"].backward()
    assert net.weight.grad is not None and net.weight.grad.abs().sum() > 0
