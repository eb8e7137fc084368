"""``is_shared()`` / ``is_memmap()`` are flags, as upstream's: set by ``share_memory_()`` /
``memmap_()``, kept by indexing and by the shape operations that view, dropped by key
operations, copies and ``unlock_()``."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, lazy_stack


def _shared() -> TensorDict:
    return TensorDict({"a": torch.randn(3, 4), "n": {"b": torch.zeros(3, 4, 2)}}, [3, 4])


@pytest.fixture(params=["shared", "memmap"])
def stored(request, tmp_path):
    td = _shared()
    if request.param == "shared":
        return request.param, td.share_memory_()
    return request.param, td.memmap_(tmp_path / "td")


def _flag(kind: str, td) -> bool:
    return td.is_shared() if kind == "shared" else td.is_memmap()


def test_a_tensordict_of_shared_tensors_is_not_marked_shared() -> None:
    td = TensorDict(a=torch.zeros(3).share_memory_(), batch_size=[3])
    assert not td.is_shared()
    assert td.share_memory_().is_shared() and td.is_locked


def test_memmap_is_not_reported_as_shared(tmp_path) -> None:
    td = _shared().memmap_(tmp_path)
    assert td.is_memmap() and not td.is_shared()


@pytest.mark.parametrize(
    "op",
    [
        lambda td: td[0],
        lambda td: td[:2],
        lambda td: td.unbind(1)[0],
        lambda td: td.split(1, 0)[0],
        lambda td: td.view(-1),
        lambda td: td.permute(1, 0),
        lambda td: td.transpose(0, 1),
        lambda td: td.unsqueeze(0),
        lambda td: td.unsqueeze(0).squeeze(0),
        lambda td: td["n"],
        lambda td: td.view(-1)["n"],
    ],
)
def test_views_keep_the_flag_and_the_lock(stored, op) -> None:
    kind, td = stored
    out = op(td)
    assert _flag(kind, out) and out.is_locked


@pytest.mark.parametrize(
    "op",
    [
        lambda td: td.select("a"),
        lambda td: td.exclude("a"),
        lambda td: td.clone(),
        lambda td: td.apply(lambda x: x),
        lambda td: td.flatten_keys("."),
        lambda td: td.reshape(-1),
        lambda td: td[torch.tensor([True, False, True])],
    ],
)
def test_key_operations_and_copies_drop_the_flag(stored, op) -> None:
    kind, td = stored
    assert not _flag(kind, op(td))


def test_unlocking_drops_the_flags_of_every_level(stored) -> None:
    kind, td = stored
    with td.unlock_():
        assert not _flag(kind, td) and not _flag(kind, td["n"])
    assert td.is_locked and not _flag(kind, td)


def test_memmap_after_unlock_writes_to_the_same_prefix(tmp_path) -> None:
    td = TensorDict(a=torch.zeros(3), batch_size=[3]).memmap_(tmp_path)
    td.unlock_()
    assert not td.is_memmap() and td.saved_path is None
    td["b"] = torch.ones(3)
    td.memmap_()
    assert td.is_memmap() and td.saved_path == str(tmp_path)
    assert (tmp_path / "b.memmap").exists()


def test_a_lazy_stack_is_shared_when_its_members_are() -> None:
    members = [TensorDict(a=torch.zeros(3)) for _ in range(2)]
    assert not lazy_stack(members).is_shared()
    assert lazy_stack([m.share_memory_() for m in members]).is_shared()


def test_map_writes_into_an_out_of_shared_tensors_without_the_flag() -> None:
    # map(out=) asks whether workers can write the storage itself, not the flag
    from tensordict.parallel.api import _remote_writable

    out = TensorDict(a=torch.zeros(4).share_memory_(), batch_size=[4])
    assert not out.is_shared() and _remote_writable(out)
