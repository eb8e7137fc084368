"""TorchRL's transforms and trajectory helpers that call into this package in less common ways:
device casts to a deviceless result, running statistics updated with tensordict weights,
skipped steps carrying strings, nested-tensor trajectories."""

from __future__ import annotations

import pytest
import torch

# TorchRL 0.14.1 is installed by make setup (see the Makefile)
from torchrl.collectors.utils import split_trajectories
from torchrl.data import NonTensor
from torchrl.envs import (
    Compose,
    ConditionalSkip,
    DeviceCastTransform,
    ParallelEnv,
    SerialEnv,
    StepCounter,
    Transform,
    TransformedEnv,
    VecNormV2,
)
from torchrl.testing.mocking_classes import ContinuousActionVecMockEnv, CountingEnv

from tensordict import NonTensorData, TensorDict


def test_device_cast_without_env_leaves_the_result_deviceless() -> None:
    cast = DeviceCastTransform("cpu", "cpu:0", in_keys=["a"], out_keys=["b"])
    td = TensorDict({"a": torch.randn(())}, [], device="cpu:0")
    out = cast._call(td)
    assert out.device is None and "b" in out


@pytest.mark.parametrize("batched", [False, True])
def test_vecnorm_running_mean_with_count_weights(batched: bool) -> None:
    # VecNormV2(decay=1) updates its statistics with lerp_(end=..., weight=n / count)
    def make() -> ContinuousActionVecMockEnv:
        return ContinuousActionVecMockEnv()

    env = SerialEnv(2, [make] * 2) if batched else make()
    env = env.append_transform(
        VecNormV2(in_keys=["observation"], out_keys=["obs_norm"], decay=1, reduce_batch_dims=True)
    )
    env.set_seed(0)
    rollout = env.rollout(6)
    assert torch.isfinite(rollout["next", "obs_norm"]).all()
    loc = env.transform._loc["observation"]
    # the running mean is the mean of what it has seen: finite, and within the data's range
    seen = torch.cat([rollout["observation"], rollout["next", "observation"]]).reshape(-1, 7)
    assert torch.isfinite(loc).all()
    assert (loc >= seen.min(0).values - 1e-5).all() and (loc <= seen.max(0).values + 1e-5).all()


class ToString(Transform):
    """The observation as a string entry (a NonTensor spec)."""

    def _apply_transform(self, obs: torch.Tensor) -> NonTensorData:
        return NonTensorData(str(obs.item()))

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        shape = observation_spec.shape
        observation_spec["obs_str"] = NonTensor(example_data="a string!", shape=shape)
        return observation_spec


def test_conditional_skip_keeps_string_observations_of_skipped_steps() -> None:
    # a skipped step copies every leaf of the last step, the strings too (not the spec's example)
    base = TransformedEnv(
        TransformedEnv(CountingEnv(), ToString(in_keys=["observation"], out_keys=["obs_str"])),
        Compose(
            StepCounter(step_count_key="other_count"),
            ConditionalSkip(cond=lambda td: td["step_count"] % 2 == 1),
        ),
    )
    env = TransformedEnv(base, StepCounter(), auto_unwrap=False)
    env.set_seed(0)
    rollout = env.rollout(6, lambda td: td.set("action", torch.ones((1,))))
    obs = rollout["next", "observation"].reshape(-1).tolist()
    assert obs == [1, 1, 2, 2, 3, 3]  # every other step is skipped
    assert rollout["next", "obs_str"] == [str(o) for o in obs]


def counting_env_with_strings() -> TransformedEnv:
    """A worker's environment (module level: the parallel env's workers build it)."""
    return TransformedEnv(
        CountingEnv(max_steps=100), ToString(in_keys=["observation"], out_keys=["obs_str"])
    )


def test_conditional_skip_over_a_parallel_env_with_strings() -> None:
    # the batched env steps the workers that are not skipped: its apply over the step's data
    # drops the (different) strings of the batch, then gathers each worker's own back
    base = ParallelEnv(2, [counting_env_with_strings] * 2, mp_start_method="fork")
    try:
        # the second worker is always skipped: a partial step of the batch
        env = TransformedEnv(base, ConditionalSkip(lambda td: torch.tensor([False, True])))
        rollout = env.rollout(4, lambda td: td.set("action", torch.ones((2, 1))))
        obs = rollout["next", "observation"].squeeze(-1)
        assert obs.tolist() == [[1, 2, 3, 4], [0, 0, 0, 0]]
        assert rollout["next", "obs_str"] == [["1", "2", "3", "4"], ["0"] * 4]
    finally:
        base.close()


def test_split_trajectories_as_nested_tensors() -> None:
    td = TensorDict(
        {
            "obs": torch.arange(6.0).reshape(6, 1),
            ("collector", "traj_ids"): torch.tensor([0, 0, 1, 1, 1, 2]),
            ("next", "done"): torch.zeros(6, 1, dtype=torch.bool),
        },
        [6],
    )
    out = split_trajectories(td, as_nested=True)
    assert out.batch_size == (3, -1) and out["obs"].is_nested
    assert [t.reshape(-1).tolist() for t in out["obs"].unbind()] == [[0, 1], [2, 3, 4], [5]]
