"""``with td.to(...) as moved:``: what the block writes in ``moved`` reaches ``td`` on exit."""

from __future__ import annotations

import torch

from tensordict import TensorDict


def test_new_entries_reach_the_source_and_existing_ones_are_copied_back_in_place():
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    x = td["x"]
    with td.to(torch.float64) as moved:
        moved["y"] = moved["x"] + 1
        moved["x"] += 2
    assert td["y"].dtype is torch.float64
    assert torch.equal(td["y"], torch.ones(3, dtype=torch.float64))
    assert td["x"] is x and x.dtype is torch.float32 and torch.equal(x, torch.full((3,), 2.0))


def test_to_a_device_from_a_tensordict_without_device():
    td = TensorDict(x=torch.zeros(2), batch_size=[2])
    with td.to("cpu") as moved:
        moved["y"] = moved["x"] + 1
    assert td["y"].device == torch.device("cpu")
    assert td.device is None


def test_a_locked_source_is_left_as_it_was():
    td = TensorDict(x=torch.zeros(2), batch_size=[2]).lock_()
    with td.to(torch.float64) as moved:
        moved.unlock_()
        moved["y"] = torch.ones(2)
    assert "y" not in td
