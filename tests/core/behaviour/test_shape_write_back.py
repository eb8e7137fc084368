"""``with td.<shape op>(...) as v:``: entries the block sets in ``v`` reach ``td`` on exit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def _dense() -> TensorDict:
    return TensorDict({"a": torch.zeros(1, 3, 4), "n": {"b": torch.zeros(1, 3, 4, 2)}}, [1, 3, 4])


def _lazy() -> LazyStackedTensorDict:
    members = [
        TensorDict({"a": torch.zeros(3, 4), "n": {"b": torch.zeros(3, 4, 2)}}, [3, 4])
        for _ in range(2)
    ]
    return LazyStackedTensorDict(*members, stack_dim=0)


OPS: dict[str, Callable[[Any], Any]] = {
    "view": lambda td: td.view(-1),
    "permute": lambda td: td.permute(2, 1, 0),
    "unsqueeze": lambda td: td.unsqueeze(1),
    "unsqueeze_last": lambda td: td.unsqueeze(-1),
    "squeeze": lambda td: td.squeeze(0),
    "flatten": lambda td: td.flatten(1, 2),
    "unflatten": lambda td: td.unflatten(2, (2, 2)),
}


@pytest.mark.parametrize("make", [_dense, _lazy], ids=["dense", "lazy"])
@pytest.mark.parametrize("op", list(OPS))
def test_set_in_shape_op_block_reaches_source(make: Callable[[], Any], op: str) -> None:
    td = make()
    with OPS[op](td) as v:
        shape = v.batch_size
        v.set("a", torch.ones_like(v.get("a")))  # a new tensor, not an in-place write
        v.set(("n", "b"), torch.full_like(v.get(("n", "b")), 2.0))
        v["new"] = torch.arange(shape.numel(), dtype=torch.float32).reshape(shape)
    assert (td["a"] == 1).all()
    assert (td["n", "b"] == 2).all()
    assert td["new"].shape == td.batch_size
    # each element lands where it was in the block's view
    assert (OPS[op](td)["new"] == v["new"]).all()
    assert td.batch_size == make().batch_size


def test_view_without_block_leaves_source_alone() -> None:
    td = _dense()
    v = td.view(-1)
    v.set("a", torch.ones_like(v.get("a")))
    assert (td["a"] == 0).all()
    assert set(td.keys()) == {"a", "n"}


def test_squeeze_of_all_unit_dims_written_back() -> None:
    td = TensorDict({"a": torch.zeros(1, 3, 1)}, [1, 3, 1])
    with td.squeeze() as v:
        v["b"] = torch.ones(3)
    assert td["b"].shape == (1, 3, 1)
    assert (td["b"] == 1).all()


def test_a_shape_op_result_is_freed_without_the_garbage_collector() -> None:
    import gc
    import weakref

    td = _dense()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for op in OPS.values():
            ref = weakref.ref(op(td))  # (no reference cycle through its write-back hook)
            assert ref() is None
    finally:
        if was_enabled:
            gc.enable()
