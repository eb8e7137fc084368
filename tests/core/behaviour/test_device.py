"""Moving a tensordict to a device."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import LockedError


def test_to_the_device_a_tensordict_already_has_returns_it() -> None:
    # as upstream; a tensordict without a device is still copied onto the target
    on_cpu = TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    assert on_cpu.to("cpu") is on_cpu and on_cpu.to(torch.device("cpu")) is on_cpu
    no_device = TensorDict({"a": torch.zeros(2)}, [2])
    moved = no_device.to("cpu")
    assert moved is not no_device and moved.device == torch.device("cpu")


def test_sync_all_waits_for_the_accelerator(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda")
    )
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda *a: calls.append(a))
    TensorDict(a=torch.zeros(1))._sync_all()
    assert calls == [()]


def test_sync_all_does_nothing_on_a_cpu_only_machine(monkeypatch) -> None:
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: None
    )
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda *a: pytest.fail("synchronised"))
    TensorDict(a=torch.zeros(1))._sync_all()


def test_device_recorder_keeps_its_state_per_thread() -> None:
    import threading

    from tensordict.base import _device_recorder as recorder

    recorder.mark()
    try:
        recorder.record_transfer("cpu")
        seen = []

        def look() -> None:
            seen.append((recorder.marked, recorder.has_transfer()))

        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
        assert seen == [(False, False)] and recorder.marked and recorder.has_transfer()
    finally:
        recorder.unmark()
    assert not recorder.marked and not recorder.has_transfer()


def test_to_does_not_keep_its_source_alive() -> None:
    import gc
    import weakref

    td = TensorDict(a=torch.zeros(3), batch_size=[3])
    ref = weakref.ref(td)
    moved = td.to(torch.float64)
    del td
    gc.collect()
    assert ref() is None and moved["a"].dtype == torch.float64


def test_grad_and_data_of_a_locked_tensordict_are_locked() -> None:
    td = TensorDict(a=torch.ones(3, requires_grad=True), b={"c": torch.ones(3, requires_grad=True)})
    (td["a"].sum() + td["b", "c"].sum()).backward()
    assert not td.grad.is_locked and td.grad is not td.grad
    td.lock_()
    assert td.grad.is_locked and td.data.is_locked
    assert torch.equal(td.grad["b", "c"], torch.ones(3))


def test_to_in_place_refuses_a_locked_tensordict_and_changes_nothing() -> None:
    td = TensorDict(a=torch.zeros(3, dtype=torch.int64), batch_size=[3]).lock_()
    before = td["a"]
    with pytest.raises(LockedError, match="Cannot modify locked TensorDict"):
        td.to(torch.float32, inplace=True)
    assert td["a"] is before and td["a"].dtype == torch.int64
    with td.unlock_():
        td.to(torch.float32, inplace=True)
    assert td["a"].dtype == torch.float32


def test_to_its_own_device_in_place_is_a_no_op_even_when_locked(tmp_path) -> None:
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3], device="cpu").memmap_(tmp_path)
    assert td.to("cpu", inplace=True) is td and td.is_memmap()
    with pytest.raises(LockedError):  # a cast replaces the leaves: refused while locked
        td.to(torch.float64, inplace=True)


@pytest.mark.parametrize(
    "view",
    [
        lambda td: td.permute(1, 0),
        lambda td: td.unsqueeze(0),
        lambda td: td.squeeze(-1),
        lambda td: td._get_sub_tensordict(0),
    ],
    ids=["permute", "unsqueeze", "squeeze", "sub"],
)
def test_a_view_refuses_to_in_place_even_onto_its_own_device(view) -> None:
    from tensordict import set_lazy_legacy

    td = TensorDict({"a": torch.zeros(3, 1)}, [3, 1], device="cpu")
    with set_lazy_legacy(True):
        viewed = view(td)
    assert viewed.device == torch.device("cpu")
    with pytest.raises(TypeError, match="inplace"):  # as upstream (its entries are its source's)
        viewed.to("cpu", inplace=True)


def test_a_tensorclass_set_in_a_tensordict_takes_its_device() -> None:
    from tensordict import tensorclass

    @tensorclass
    class Pair:
        x: torch.Tensor

    pair = Pair(x=torch.zeros(2), batch_size=[2])
    td = TensorDict({"p": pair}, [2], device="cpu")
    td["q"] = pair
    assert td["p"].device == torch.device("cpu") and td["q"].device == torch.device("cpu")
    assert pair.device is None  # a moved copy: the user's instance is left as it was
    td.to("cpu", inplace=True)
    assert all(v.device == torch.device("cpu") for v in td.values())
