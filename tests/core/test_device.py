"""Moving a tensordict to a device."""

from __future__ import annotations

import torch

from tensordict import TensorDict


def test_to_the_device_a_tensordict_already_has_returns_it() -> None:
    # as upstream; a tensordict without a device is still copied onto the target
    on_cpu = TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    assert on_cpu.to("cpu") is on_cpu and on_cpu.to(torch.device("cpu")) is on_cpu
    no_device = TensorDict({"a": torch.zeros(2)}, [2])
    moved = no_device.to("cpu")
    assert moved is not no_device and moved.device == torch.device("cpu")
