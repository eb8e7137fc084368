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
from torchrl.objectives import ClipPPOLoss, DQNLoss, SACLoss, SoftUpdate
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


def transition_batch(n: int, action: torch.Tensor) -> TensorDict:
    return TensorDict(
        {
            "observation": torch.randn(n, 4),
            "action": action,
            ("next", "observation"): torch.randn(n, 4),
            ("next", "reward"): torch.randn(n, 1),
            ("next", "done"): torch.zeros(n, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(n, 1, dtype=torch.bool),
        },
        [n],
    )


def test_dqn_loss_backward_and_soft_target_update():
    n_actions = 3
    net = nn.Linear(4, n_actions)
    qvalue = QValueActor(net, in_keys=["observation"], action_space="one_hot")
    loss = DQNLoss(qvalue, action_space="one_hot", delay_value=True)
    updater = SoftUpdate(loss, eps=0.5)
    action = nn.functional.one_hot(torch.randint(n_actions, (6,)), n_actions)
    loss(transition_batch(6, action))["loss"].backward()
    assert net.weight.grad is not None and net.weight.grad.abs().sum() > 0
    target_before = loss.target_value_network_params.clone()
    with torch.no_grad():
        net.weight.add_(1.0)
    updater.step()
    moved = loss.target_value_network_params["module", "0", "module", "weight"]
    expected = target_before["module", "0", "module", "weight"].lerp(net.weight.detach(), 0.5)
    torch.testing.assert_close(moved, expected)


class _Q(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 1)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.cat([observation, action], -1))


def test_sac_loss_runs_its_two_critics_with_vmap():
    actor_net = nn.Sequential(nn.Linear(4, 4), NormalParamExtractor())
    policy = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
    )
    critic = ValueOperator(_Q(), in_keys=["observation", "action"], out_keys=["state_action_value"])
    loss = SACLoss(policy, critic, num_qvalue_nets=2, target_entropy=-2.0)
    assert loss.qvalue_network_params.batch_size == torch.Size([2])
    out = loss(transition_batch(6, torch.rand(6, 2).tanh()))
    (out["loss_actor"] + out["loss_qvalue"]).backward()
    grad = loss.qvalue_network_params["module", "linear", "weight"].grad
    assert grad is not None and grad.shape[0] == 2


def test_ppo_and_dqn_losses_compile_whole(env):
    # TorchRL users compile their losses: no graph break may come from tensordict (get's default
    # sentinel and TensorDictParams' hash once broke these two)
    policy, value = actor(env), critic()
    batch = env.rollout(8, policy).detach()
    GAE(gamma=0.99, lmbda=0.95, value_network=value)(batch)
    ppo = ClipPPOLoss(policy, value)
    out = torch.compile(ppo, backend="eager", fullgraph=True)(batch)
    assert torch.isfinite(out["loss_objective"]) and torch.isfinite(out["loss_critic"])
    qvalue = QValueActor(nn.Linear(4, 3), in_keys=["observation"], action_space="one_hot")
    dqn = DQNLoss(qvalue, action_space="one_hot", delay_value=True)
    action = nn.functional.one_hot(torch.randint(3, (6,)), 3)
    loss = torch.compile(dqn, backend="eager", fullgraph=True)(transition_batch(6, action))
    assert torch.isfinite(loss["loss"])
