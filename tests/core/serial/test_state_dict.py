"""state_dict / load_state_dict, stack_tensors / cat_tensors and upstream's private checks."""

import pytest
import torch

from tensordict import TensorDict, lazy_stack, tensorclass
from tensordict.errors import KeyMismatchError


@tensorclass
class _Pair:
    x: torch.Tensor


def _td() -> TensorDict:
    td = TensorDict(
        a=torch.randn(3, 4), n=TensorDict(c=torch.randn(3, 2), batch_size=[3, 2]), batch_size=[3]
    )
    td["label"] = "hi"
    return td


def test_state_dict_is_flat_with_metadata() -> None:
    sd = _td().state_dict()
    assert list(sd) == ["a", "n.c"]
    assert sd._metadata["n"]["batch_size"] == (3, 2)
    assert sd._metadata["label"]["_non_tensor"]["data"] == "hi"


def test_load_state_dict_writes_in_place() -> None:
    td = _td()
    target = td.clone().zero_()
    leaf = target["a"]
    target.load_state_dict(td.state_dict())
    assert target["a"] is leaf and torch.equal(leaf, td["a"])
    assert torch.equal(target["n", "c"], td["n", "c"])


def test_load_state_dict_assign_replaces_tensors() -> None:
    td = _td()
    target = td.clone().zero_()
    shallow = target.clone(False)
    target.load_state_dict(td.state_dict(), assign=True)
    assert (shallow["a"] == 0).all() and torch.equal(target["a"], td["a"])


def test_load_nested_state_dict_into_an_empty_tensordict() -> None:
    td = _td()
    loaded = TensorDict().load_state_dict(td.state_dict(flatten=False), strict=False)
    assert loaded.batch_size == (3,) and loaded["n"].batch_size == (3, 2)
    assert torch.equal(loaded["n", "c"], td["n", "c"]) and loaded["label"] == "hi"


def test_load_state_dict_strict_refuses_other_keys() -> None:
    td = _td()
    sd = td.state_dict()
    del sd["a"]
    with pytest.raises(KeyMismatchError, match="only in the tensordict"):
        td.clone().load_state_dict(sd)
    with pytest.raises(RuntimeError):
        td.clone().load_state_dict(sd)
    td.clone().load_state_dict(sd, strict=False)


def test_load_state_dict_writes_through_a_lazy_stack() -> None:
    members = [TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(2))]
    stack = lazy_stack(members)
    stack.load_state_dict({"a": torch.ones(2, 2)})
    assert (members[0]["a"] == 1).all() and (members[1]["a"] == 1).all()


def test_shallow_clone_gives_nested_tensorclasses_a_new_instance() -> None:
    td = TensorDict(p=_Pair(x=torch.zeros(2), batch_size=[2]), batch_size=[2])
    copy = td.clone(False)
    copy.set(("p", "x"), torch.ones(2))
    assert (td["p"].x == 0).all()


def test_stack_and_cat_tensors_replace_their_sources() -> None:
    td = TensorDict(a=torch.zeros(3, 1), b=torch.ones(3, 1), batch_size=[3])
    td.cat_tensors("a", "b", out_key="ab", dim=-1, keep_entries=True)
    assert torch.equal(td["ab"], torch.cat([td["a"], td["b"]], -1))
    td.stack_tensors("a", "b", out_key=("n", "s"), dim=-1)
    assert td["n", "s"].shape == (3, 1, 2) and "a" not in td


def test_check_batch_size_and_has_non_tensor() -> None:
    td = _td()
    assert td._check_batch_size() is True and td._has_non_tensor
    assert not td.exclude("label")._has_non_tensor
    td["n", "c"].unsqueeze_(0)  # the leaf's shape changes behind the tensordict's back
    assert td._check_batch_size(raise_exception=False) is False
    with pytest.raises(RuntimeError, match="incongruent"):
        td._check_batch_size()


def test_lock_parents_weakrefs_lists_every_locked_ancestor() -> None:
    import gc

    td = TensorDict({("a", "b", "c"): torch.zeros(())}).lock_()
    a, b = td["a"], td["a", "b"]
    live = lambda refs: sum(1 for r in refs if r() is not None)  # noqa: E731
    assert live(b._lock_parents_weakrefs) == 2 and not td._lock_parents_weakrefs
    td.unlock_()
    assert live(b._lock_parents_weakrefs) == 0
    td.lock_()
    del td
    gc.collect()
    assert live(a._lock_parents_weakrefs) == 0 and live(b._lock_parents_weakrefs) == 1


def test_cat_and_stack_from_tensordict_join_every_leaf() -> None:
    td = TensorDict({"b": {"c": torch.ones(3, 4)}, "a": torch.zeros(3, 4)}, batch_size=[3, 4])
    assert td.cat_from_tensordict(dim=1).shape == (3, 8)
    stacked = td.stack_from_tensordict(dim=1, sorted=True)
    assert stacked.shape == (3, 2, 4) and (stacked[:, 0] == 0).all() and (stacked[:, 1] == 1).all()


def test_legacy_batch_size_and_device_entries_are_metadata_not_keys() -> None:
    import collections

    legacy = collections.OrderedDict(a=torch.tensor(1), __batch_size=torch.Size([]), __device=None)
    td = TensorDict({"a": 0}, [])
    td.load_state_dict(legacy)
    assert td["a"] == 1 and set(td.keys()) == {"a"}
    empty = TensorDict()
    empty.load_state_dict(
        collections.OrderedDict(a=torch.arange(3), __batch_size=torch.Size([3])), strict=False
    )
    assert empty.batch_size == (3,) and torch.equal(empty["a"], torch.arange(3))
