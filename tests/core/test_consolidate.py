"""consolidate / is_consolidated / from_consolidated and TensorDictFuture."""

import json
import pickle

import pytest
import torch

from tensordict import TensorDict, from_consolidated
from tensordict.utils import TensorDictFuture


def _td() -> TensorDict:
    return TensorDict(
        a=torch.arange(3),
        b={"c": torch.ones(3, 2, dtype=torch.float16)},
        s="text",
        batch_size=[3],
    )


def test_consolidated_leaves_share_one_storage() -> None:
    tdc = _td().consolidate()
    ptrs = {t.untyped_storage().data_ptr() for t in tdc.values(True, True) if torch.is_tensor(t)}
    assert len(ptrs) == 1
    assert (tdc == _td()).all() and tdc["s"] == "text"
    tdc._consolidated["storage"].zero_()
    assert (tdc["a"] == 0).all()


def test_consolidate_copies_non_contiguous_and_grad_tensors() -> None:
    base = torch.arange(24.0, requires_grad=True)
    strided = torch.arange(16).reshape(4, 4)[:, ::2]
    td = TensorDict(t=base.reshape(2, 3, 4).transpose(0, 1), s=strided)
    tdc = td.consolidate(num_threads=2)
    assert torch.equal(tdc["t"], td["t"]) and not tdc["t"].requires_grad
    assert torch.equal(tdc["s"], td["s"])


def test_consolidated_is_locked_and_unlocking_forgets_the_storage() -> None:
    tdc = _td().consolidate()
    assert tdc.is_locked and tdc.is_consolidated()
    with pytest.raises(RuntimeError):
        tdc["new"] = torch.zeros(3)
    with tdc.unlock_():
        assert not tdc.is_consolidated()
    assert tdc.is_locked and not tdc.is_consolidated()


def test_to_device_keeps_consolidation() -> None:
    moved = _td().consolidate().to("cpu")
    assert moved.is_consolidated() and moved.is_locked and moved.device == torch.device("cpu")
    assert (moved == _td()).all()


def test_file_round_trip_in_upstreams_layout(tmp_path) -> None:
    path = tmp_path / "td.bin"
    tdc = _td().consolidate(filename=path)
    assert tdc.device == torch.device("cpu")
    raw = path.read_bytes()
    size = int.from_bytes(raw[-8:], "little")
    meta = json.loads(raw[-8 - size : -8])
    assert meta["b"]["leaves"]["c"] == ["torch.float16", [3, 2], 24, 40, 4]
    loaded = from_consolidated(path)
    assert (loaded.exclude("s") == _td().exclude("s")).all() and loaded["s"] == "text"
    assert loaded["b"].batch_size == (3,)


def test_return_early_gives_a_future() -> None:
    future = _td().consolidate(return_early=True, num_threads=2)
    assert isinstance(future, TensorDictFuture)
    assert future.result().is_consolidated()
    with pytest.raises(NotImplementedError, match="non_blocking"):
        _td().consolidate(return_early=True, non_blocking=True)


def test_padding_is_deterministic() -> None:
    td = TensorDict(x=torch.ones(3, dtype=torch.uint8), y=torch.ones(1))
    one = td.consolidate()._consolidated["storage"]
    two = td.consolidate(num_threads=3)._consolidated["storage"]
    assert torch.equal(one, two) and one.numel() == 16


def test_consolidated_pickles() -> None:
    tdc = _td().consolidate()
    again = pickle.loads(pickle.dumps(tdc))
    assert (again.exclude("s") == tdc.exclude("s")).all()
