"""update(): a source whose batch size conflicts is refused unless update_batch_size=True, which
resizes the destination (nested tensordicts and tensorclasses keep their identity); is_leaf."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, lazy_stack, tensorclass
from tensordict.core.behaviour.update_resize import batch_sizes_conflict
from tensordict.errors import KeyMismatchError, LockedError


@tensorclass
class Pair:
    x: torch.Tensor
    label: str


@pytest.mark.parametrize(
    ("dest", "source", "conflict"),
    [([3], [4], True), ([3], [3, 2], False), ([3, 2], [3], False), ([3], [], False)],
)
def test_conflict_is_on_the_common_leading_dims(
    dest: list[int], source: list[int], conflict: bool
) -> None:
    assert batch_sizes_conflict(dest, source) is conflict
    call = lambda: TensorDict(batch_size=dest).update(TensorDict(batch_size=source))  # noqa: E731
    if conflict:
        with pytest.raises(RuntimeError, match="update_batch_size=True"):
            call()
    else:
        assert call().batch_size == tuple(dest)


def test_update_batch_size_resizes_and_keeps_nested_identity() -> None:
    dest = TensorDict(
        a=torch.zeros(2),
        sub=TensorDict(b=torch.zeros(2, 5), batch_size=[2, 5]),
        pair=Pair(x=torch.zeros(2), label="old", batch_size=[2]),
        batch_size=[2],
    )
    sub, pair = dest["sub"], dest["pair"]
    source = TensorDict(
        a=torch.arange(3),
        sub=TensorDict(b=torch.ones(3, 4), c=torch.ones(3), batch_size=[3]),
        pair=Pair(x=torch.ones(3), label="new", batch_size=[3]),
        extra=torch.ones(3, 1),
        batch_size=[3],
    )
    assert dest.update(source, update_batch_size=True) is dest
    assert dest.batch_size == (3,) and list(dest.keys()) == ["a", "sub", "pair", "extra"]
    assert dest["sub"] is sub and sub.batch_size == (3,) and sub["b"].shape == (3, 4)
    assert dest["pair"] is pair and pair.batch_size == (3,) and pair.label == "new"
    assert dest["a"].tolist() == [0, 1, 2]
    assert source["sub", "b"].shape == (3, 4)  # the source is left as it was


def test_update_batch_size_errors() -> None:
    def dest() -> TensorDict:
        return TensorDict(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])

    source = TensorDict(a=torch.zeros(4), b=torch.zeros(4), batch_size=[4])
    with pytest.raises(RuntimeError, match="inplace"):
        dest().update(source, update_batch_size=True, inplace=True)
    with pytest.raises(RuntimeError, match="keys_to_update"):
        dest().update(source, update_batch_size=True, keys_to_update=["a"])
    with pytest.raises(KeyMismatchError, match=r"not present in the source.*\['b'\]"):
        dest().update(source.exclude("b"), update_batch_size=True)
    with pytest.raises(LockedError, match="lock"):
        dest().lock_().update(source, update_batch_size=True)
    with pytest.raises(LockedError, match="lock"):
        lazy_stack([dest(), dest()]).lock_().update(
            lazy_stack([source, source]), update_batch_size=True
        )
    untouched = dest()
    with pytest.raises(KeyMismatchError):
        untouched.update(source.exclude("b"), update_batch_size=True)
    assert untouched.batch_size == (3,) and set(untouched.keys()) == {"a", "b"}


def test_is_leaf_replaces_nested_tensordicts_whole() -> None:
    t = torch.zeros(2, 3)
    dest = TensorDict(b=TensorDict(c=t, batch_size=[2, 3]), batch_size=[2])
    source = TensorDict(b=TensorDict(d=torch.ones(2, 2), batch_size=[2, 2]), batch_size=[2])
    dest.update(source, is_leaf=lambda cls: True)
    assert dest["b"].batch_size == (2, 2) and set(dest["b"].keys()) == {"d"}
    merged = TensorDict(b=TensorDict(c=t, batch_size=[2, 3]), batch_size=[2])
    merged.update(TensorDict(b=TensorDict(d=torch.ones(2, 3), batch_size=[2, 3]), batch_size=[2]))
    assert set(merged["b"].keys()) == {"c", "d"}


def test_nested_tensordicts_and_tensorclasses_are_resized_below_a_fitting_root() -> None:
    dest = TensorDict(
        sub=TensorDict(a=torch.zeros(3), batch_size=[3]),
        pair=Pair(x=torch.zeros(3), label="old", batch_size=[3]),
    )
    sub, pair = dest["sub"], dest["pair"]
    source = TensorDict(
        sub=TensorDict(a=torch.ones(4), b=torch.ones(4, 2), batch_size=[4]),
        pair=Pair(x=torch.ones(4), label="new", batch_size=[4]),
    )
    with pytest.raises(RuntimeError, match="update_batch_size=True"):
        dest.update(source)
    assert sub.batch_size == (3,) and pair.batch_size == (3,)  # nothing written
    dest.update(source, update_batch_size=True)
    assert dest["sub"] is sub and sub.batch_size == (4,) and set(sub.keys()) == {"a", "b"}
    assert dest["pair"] is pair and pair.batch_size == (4,) and pair.label == "new"


def test_update_merges_a_tensorclass_into_the_instance_it_meets() -> None:
    from tensordict import LazyStackedTensorDict, tensorclass

    @tensorclass
    class Obs:
        text: str
        value: torch.Tensor

    def dest() -> TensorDict:
        tc = Obs(None, torch.zeros(2), batch_size=[2])
        return TensorDict(next=TensorDict(tc=tc, batch_size=[2]), batch_size=[2])

    texts = TensorDict(next=TensorDict(tc=Obs(["a", "b"], None, batch_size=[2]), batch_size=[2]))
    texts.batch_size = [2]
    merged = dest().update(texts)  # (the value it holds None for stays)
    assert merged["next", "tc"].value.tolist() == [0.0, 0.0]
    assert merged["next", "tc"].text == ["a", "b"]
    # a ParallelEnv's non-tensor entries, received from each worker, into its step output
    workers = [TensorDict(next=TensorDict(tc=Obs(t, None, batch_size=[]))) for t in "xy"]
    out = dest().update(LazyStackedTensorDict(*workers), keys_to_update=[("next", "tc", "text")])
    assert out["next", "tc"].value is not None and out["next", "tc"].text == ["x", "y"]


@tensorclass
class TwoTensors:
    a: torch.Tensor
    b: torch.Tensor


def test_a_tensorclass_merged_into_a_sub_tensordict_reaches_its_source() -> None:
    # a sub-tensordict reads a new tensorclass instance at each get: the merge is written back
    tc = TwoTensors(torch.zeros(4, 3), torch.zeros(4), batch_size=[4])
    td = TensorDict(tc=tc, batch_size=[4])
    sub = td._get_sub_tensordict(slice(1, 3))
    sub.update(TensorDict(tc=TwoTensors(torch.ones(2, 3), None, batch_size=[2]), batch_size=[2]))
    assert td["tc"].a[1:3].eq(1).all() and td["tc"].a[[0, 3]].eq(0).all()
    assert td["tc"].b.eq(0).all()  # None in the update: left alone
