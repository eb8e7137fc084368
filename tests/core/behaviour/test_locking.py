"""Locking: which writes a locked tensordict refuses, and which it allows."""

# Some tests spell membership as `key in td.keys()` on purpose (the view under test).
# ruff: noqa: SIM118

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import LockedError


def make() -> TensorDict:
    return TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.ones(3)}, "s": "x"}, [3])


def locked() -> TensorDict:
    return make().lock_()


def test_lock_returns_self_and_sets_is_locked() -> None:
    td = make()
    assert td.lock_() is td and td.is_locked


def test_unlock_returns_self_and_clears_is_locked() -> None:
    td = locked()
    assert td.unlock_() is td and not td.is_locked


def test_lock_is_recursive() -> None:
    assert locked()["b"].is_locked


def test_unlock_is_recursive() -> None:
    assert not locked().unlock_()["b"].is_locked


def test_unlock_as_context_manager_relocks_on_exit() -> None:
    td = locked()
    with td.unlock_():
        assert not td.is_locked
        td["new"] = torch.zeros(3)
    assert td.is_locked and td["b"].is_locked
    assert "new" in td.keys()


def test_unlock_context_relocks_after_an_exception() -> None:
    td = locked()
    with pytest.raises(ValueError), td.unlock_():
        raise ValueError("boom")
    assert td.is_locked


def test_lock_as_context_manager_unlocks_on_exit() -> None:
    td = make()
    with td.lock_():
        assert td.is_locked
    assert not td.is_locked


def test_is_locked_setter() -> None:
    td = make()
    td.is_locked = True
    assert td["b"].is_locked


def test_tensordict_set_into_locked_parent_gets_locked() -> None:
    td = locked()
    with td.unlock_():
        td["n"] = {"x": torch.zeros(3)}
    assert td["n"].is_locked


REFUSED: dict[str, Callable[[TensorDict], object]] = {
    "set new key": lambda td: td.set("x", torch.zeros(3)),
    "set existing key": lambda td: td.set("a", torch.zeros(3, 4)),
    "setitem new key": lambda td: td.__setitem__("x", torch.zeros(3)),
    "set non-tensor": lambda td: td.set("s", "y"),
    "new nested key": lambda td: td.set(("b", "x"), torch.zeros(3)),
    "new nested key via child": lambda td: td["b"].set("x", torch.zeros(3)),
    "new intermediate": lambda td: td.set(("n", "x"), torch.zeros(3)),
    "update": lambda td: td.update({"a": torch.zeros(3, 4)}),
    "del": lambda td: td.__delitem__("a"),
    "del nested": lambda td: td.__delitem__(("b", "c")),
    "pop": lambda td: td.pop("a"),
    "rename_key_": lambda td: td.rename_key_("a", "z"),
    "select inplace": lambda td: td.select("a", inplace=True),
}


@pytest.mark.parametrize("op", list(REFUSED), ids=list(REFUSED))
def test_structural_write_on_locked_td_raises_locked_error(op: str) -> None:
    td = locked()
    keys_before = list(td.keys(True))
    with pytest.raises(LockedError) as info:
        REFUSED[op](td)
    msg = str(info.value)
    assert "locked" in msg and "unlock_()" in msg
    assert list(td.keys(True)) == keys_before


def test_locked_error_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError):
        locked().set("x", torch.zeros(3))


def test_locked_error_names_the_key() -> None:
    with pytest.raises(LockedError, match="'x'"):
        locked().set("x", torch.zeros(3))


ALLOWED: dict[str, Callable[[TensorDict], object]] = {
    "set_": lambda td: td.set_("a", torch.ones(3, 4)),
    "set inplace": lambda td: td.set("a", torch.ones(3, 4), inplace=True),
    "update_": lambda td: td.update_({"a": torch.ones(3, 4)}),
    "update inplace": lambda td: td.update({"a": torch.ones(3, 4)}, inplace=True),
    "iadd": lambda td: td.__iadd__(1),
    "apply_": lambda td: td.apply_(lambda x: x + 1),
    "setitem index": lambda td: td.__setitem__(slice(None), {"a": torch.ones(4)}),
    "leaf in-place op": lambda td: td["a"].add_(1),
    "zero_": lambda td: td.zero_(),
}


@pytest.mark.parametrize("op", list(ALLOWED), ids=list(ALLOWED))
def test_in_place_write_on_locked_td_is_allowed(op: str) -> None:
    td = locked()
    a = td["a"]
    ALLOWED[op](td)
    assert td["a"] is a and td.is_locked


def test_set__on_non_tensor_entry_of_locked_td_is_allowed() -> None:
    td = locked()
    td.set_("s", "y")
    assert td["s"] == "y"


def test_clone_of_locked_td_is_unlocked() -> None:
    c = locked().clone()
    assert not c.is_locked and not c["b"].is_locked


def test_empty_of_locked_td_is_unlocked() -> None:
    assert not locked().empty().is_locked


def test_select_and_exclude_of_locked_td_are_unlocked() -> None:
    td = locked()
    assert not td.select("a").is_locked
    assert not td.exclude("a").is_locked


def test_index_of_locked_td_is_unlocked() -> None:
    td = locked()
    assert not td[0].is_locked and not td[0:2].is_locked


def test_split_and_unbind_of_locked_td_are_locked() -> None:
    td = locked()
    assert all(p.is_locked for p in td.split(2))
    assert all(p.is_locked for p in td.unbind(0))
    assert all(p.is_locked for p in td.chunk(2))


def test_shape_ops_of_locked_td_are_locked() -> None:
    td = locked()
    assert td.unsqueeze(0).is_locked
    assert td.unsqueeze(0).squeeze(0)["b"].is_locked


def test_dtype_shortcut_of_locked_td_is_locked() -> None:
    assert locked().double().is_locked


def test_share_memory_locks() -> None:
    assert make().share_memory_().is_locked


# ---------------------------------------------------------------------- the lock graph
def test_a_nested_tensordict_cannot_be_unlocked_under_its_locked_parent() -> None:
    td = locked()
    with pytest.raises(LockedError, match="unlock the root"):
        td["b"].unlock_()
    with pytest.raises(LockedError):
        td["b"].is_locked = False
    assert td["b"].is_locked and td.is_locked
    with td.unlock_():  # through the root it works, and the child is locked again after
        assert not td["b"].is_locked
        td["b", "d"] = torch.zeros(3)
    assert td["b"].is_locked and td["b", "d"].shape == (3,)


def test_a_child_of_two_locked_parents_cannot_be_unlocked_through_one_of_them() -> None:
    # as upstream: unlocking p1 would have to unlock a child p2 still holds
    child = TensorDict({"c": torch.ones(3)}, [3])
    p1 = TensorDict({"n": child}, [3]).lock_()
    p2 = TensorDict({"n": child}, [3]).lock_()
    with pytest.raises(LockedError, match="part of a locked graph"):
        p1.unlock_()
    assert p1.is_locked and child.is_locked
    with pytest.raises(LockedError):
        child.unlock_()
    # grouped under one root, the whole graph unlocks at once
    root = TensorDict({"p1": p1, "p2": p2}, [3]).lock_()
    root.unlock_()
    assert not (p1.is_locked or p2.is_locked or child.is_locked)


def test_a_nested_lazy_stack_read_from_a_locked_stack_does_not_pin_the_members() -> None:
    td0 = TensorDict({("a", "b"): torch.zeros(())}, [])
    stack = LazyStackedTensorDict.lazy_stack([td0, td0.clone()]).lock_()
    nested = stack["a"]  # kept alive: must not keep td0["a"] locked once the stack is unlocked
    assert len(nested._lock_parents_weakrefs) == 3  # the stack and both members
    stack.unlock_()
    assert not td0["a"].is_locked
    assert not nested.is_locked


def test_a_lazy_stack_reads_as_locked_when_all_its_members_are() -> None:
    td0, td1 = TensorDict({"x": torch.zeros(2)}, [2]), TensorDict({"x": torch.zeros(2)}, [2])
    stack = LazyStackedTensorDict.lazy_stack([td0, td1])
    td0.lock_()
    assert not stack.is_locked
    td1.lock_()
    assert stack.is_locked and stack._is_locked is None
    td0.unlock_()  # the stack itself was never locked: its members unlock freely
    assert not stack.is_locked
    stack.lock_()
    with pytest.raises(LockedError):
        td1.unlock_()
    stack.unlock_()
    assert stack._is_locked is None


def test_a_child_whose_locked_parent_is_gone_can_be_unlocked() -> None:
    td = locked()
    child = td["b"]
    del td
    assert child.is_locked  # locking is not undone behind the user's back
    assert not child.unlock_().is_locked


def test_lazy_stack_members_and_tensorclass_fields_follow_the_graph() -> None:
    from tensordict import LazyStackedTensorDict, tensorclass

    stack = LazyStackedTensorDict(make(), make()).lock_()
    with pytest.raises(LockedError):
        stack.tensordicts[0].unlock_()
    stack.unlock_()
    assert not stack.tensordicts[0].is_locked

    @tensorclass
    class Holder:
        inner: TensorDict

    h = Holder(inner=make(), batch_size=[3])
    h.lock_()
    with pytest.raises(LockedError):
        h.inner.unlock_()
    h.unlock_()
    assert not h.inner.is_locked


def test_slices_of_a_locked_lazy_stack_do_not_pile_up_as_holders() -> None:
    from tensordict import LazyStackedTensorDict

    members = [make() for _ in range(3)]
    stack = LazyStackedTensorDict(*members).lock_()
    kept = stack[0:2]  # a slice the user keeps: locked, sharing the members
    for _ in range(100):
        stack[0:2]
    assert kept.is_locked
    assert len(members[0]._lock_parents or []) == 1
    stack.unlock_()
    assert not any(m.is_locked for m in members)


def test_dead_holders_are_dropped_when_a_new_one_registers() -> None:
    child = TensorDict({"c": torch.ones(2)}, [2])
    for _ in range(50):
        TensorDict({"n": child}, [2], lock=True)  # temporaries
    TensorDict({"n": child}, [2], lock=True)
    assert len(child._lock_parents or []) <= 2


@pytest.mark.parametrize("start_locked", [True, False])
def test_lock_and_unlock_contexts_restore_the_previous_state(start_locked: bool) -> None:
    td = make()
    if start_locked:
        td.lock_()
    with td.lock_():
        assert td.is_locked
    assert td.is_locked == start_locked
    with td.unlock_():
        assert not td.is_locked
    assert td.is_locked == start_locked


def test_locking_a_held_child_in_a_context_is_a_no_op_that_keeps_errors() -> None:
    root = locked()
    with pytest.raises(KeyError, match="original"), root["b"].lock_():
        raise KeyError("original")
    assert root["b"].is_locked


def test_tensorclass_fields_are_held_after_a_pickle_round_trip() -> None:
    import pickle

    from tests.tensorclass.classes import Sample

    td = TensorDict({"tc": Sample(obs=torch.zeros(2), batch_size=[2])}, [2]).lock_()
    copy = pickle.loads(pickle.dumps(td))
    assert copy.is_locked
    with pytest.raises(LockedError):
        copy["tc"].unlock_()


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t + 1,
        lambda t: t * t,
        lambda t: -t,
        lambda t: t.exp(),
        lambda t: t.sin(),
        lambda t: t.isfinite(),
        lambda t: t.maximum(t),
        lambda t: t.lerp(t, 0.5),
        lambda t: t.to(torch.float64),
        lambda t: t.detach(),
        lambda t: torch.zeros_like(t),
        lambda t: t.where(torch.ones(3, dtype=torch.bool), 0.0),
    ],
)
def test_elementwise_results_of_a_locked_tensordict_are_locked(op: Callable[..., Any]) -> None:
    td = TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3)}}, [3]).lock_()
    out = op(td)
    assert out.is_locked and out["n"].is_locked


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.clone(),
        lambda t: t.apply(lambda x: x),
        lambda t: t == 1,
        lambda t: t.sum(0),
        lambda t: t.clamp(0, 1),
        lambda t: t + torch.ones(3),  # (upstream's broadcasting path drops the lock)
        lambda t: t.gather(0, torch.zeros(3, dtype=torch.long)),
        lambda t: torch.cat([t, t]),
    ],
)
def test_results_upstream_leaves_unlocked_are_unlocked(op: Callable[..., Any]) -> None:
    td = TensorDict({"a": torch.ones(3)}, [3]).lock_()
    assert not op(td).is_locked


def test_select_and_exclude_of_locked_memmap_or_shared_td_are_unlocked(tmp_path) -> None:
    # as upstream 0.15.3: the selection is a new tensordict over the same tensors, not locked
    memmapped = TensorDict({"a": torch.zeros(3), "b": torch.ones(3)}, [3]).memmap_(tmp_path)
    shared = TensorDict({"a": torch.zeros(3), "b": torch.ones(3)}, [3]).share_memory_()
    for td in (memmapped, shared):
        assert td.is_locked
        assert not td.select("a").is_locked and not td.exclude("a").is_locked
    stacked = LazyStackedTensorDict(memmapped, memmapped)
    stacked.lock_()
    assert not stacked.select("a").is_locked


# ---------------------------------------------------------------------- compile helpers
def test_clear_refs_for_compile_forgets_the_with_records_of_every_nested_tensordict() -> None:
    view = make().view(3, 1)
    nested = view["b"]
    nested._last_op = ("lock_", False)
    assert view._last_op is not None  # the view's write-back record
    assert view.clear_refs_for_compile_() is view
    assert view._last_op is None and nested._last_op is None


def test_clear_refs_for_compile_reaches_lazy_stack_members() -> None:
    members = [make(), make()]
    stack = LazyStackedTensorDict(*members, stack_dim=0).lock_()
    for member in members:
        member._last_op = ("lock_", False)
    stack.clear_refs_for_compile_()
    assert stack._last_op is None and all(m._last_op is None for m in members)


def test_locked_schema_lists_the_own_keys_while_locked_only() -> None:
    td = make()
    assert td._locked_schema is None
    td.lock_()
    assert td._locked_schema is not None and td._locked_schema.keys == ("a", "b", "s")
    td.unlock_()
    assert td._locked_schema is None


def test_exclude_in_place_of_absent_keys_leaves_a_locked_td_alone() -> None:
    # as upstream: TorchRL's collector workers exclude keys a locked buffer may not hold
    td = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3]).lock_()
    assert td.exclude("zz", ("n", "zz"), ("a", "zz"), inplace=True) is td
    assert set(td.keys(True)) == {"a", "n", ("n", "b")} and td.is_locked
    with pytest.raises(LockedError, match="exclude 'b'"):
        td.exclude(("n", "b"), inplace=True)
    assert ("n", "b") in td.keys(True)


def test_exclude_in_place_deletes_where_the_key_lives() -> None:
    td = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3), "c": torch.zeros(3)}}, [3])
    nested = td["n"]
    assert td.exclude(("n", "b"), "a", inplace=True) is td
    assert td["n"] is nested and list(nested.keys()) == ["c"] and "a" not in td.keys()
