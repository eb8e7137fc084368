"""Fixtures shared by the test packages."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict


@pytest.fixture
def plain_td() -> TensorDict:
    return TensorDict({"x": torch.arange(20.0), "z": torch.zeros(20, 3)}, [20])


@pytest.fixture
def memmap_td(tmp_path) -> TensorDict:
    td = TensorDict({"x": torch.arange(20.0), "z": torch.zeros(20, 3)}, [20])
    return td.memmap_(tmp_path / "src")
