"""The pieces every transfer shares, in one process: transfer order and fingerprints, tags, the
control messages, and gloo's errors in words."""

from __future__ import annotations

import datetime

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict
from tensordict._testing import MyDistData
from tensordict.distributed import control, payload, schema, wire
from tensordict.errors import DistributedTimeoutError, PeerLostError, TransferMismatchError


def test_leaves_walk_sorted_keys_members_and_tensorclasses_and_skip_non_tensors() -> None:
    member = TensorDict(b=torch.zeros(1), a=torch.zeros(1))
    td = TensorDict(
        z=LazyStackedTensorDict(member, member.clone()),
        tc=MyDistData(a=torch.zeros(3), b=torch.zeros(3, 2), batch_size=[3]),
        label=NonTensorData("x"),
    )
    paths = [leaf.path for leaf in schema.leaves(td)]
    assert paths == [
        ("tc", "a"), ("tc", "b"),
        ("z", "<member 0>", "a"), ("z", "<member 0>", "b"),
        ("z", "<member 1>", "a"), ("z", "<member 1>", "b"),
    ]  # fmt: skip


def test_records_round_trip_and_fingerprints_see_dtype_and_size() -> None:
    tensors = [torch.zeros(2, 3), torch.zeros(4, dtype=torch.int64), torch.zeros(())]
    recs = schema.records(tensors)
    assert [schema.describe(r) for r in schema.split_records(recs)] == [
        "float32 (2, 3)", "int64 (4,)", "float32 ()",
    ]  # fmt: skip
    fingerprint = schema.fingerprint(recs)
    assert fingerprint == schema.fingerprint(schema.records([t.clone() for t in tensors]))
    assert fingerprint != schema.fingerprint(schema.records([torch.zeros(2, 4), *tensors[1:]]))
    assert fingerprint != schema.fingerprint(schema.records([t.double() for t in tensors]))
    # the same number of elements in another shape fits, as upstream (memory order)
    assert fingerprint == schema.fingerprint(schema.records([torch.zeros(3, 2), *tensors[1:]]))


def test_first_difference() -> None:
    a, b = [(1, 4, 1, 2)], [(1, 4, 1, 2), (1, 4, 0)]
    assert schema.first_difference(a, a) is None
    assert schema.first_difference(a, b) == 1
    assert schema.first_difference(b, [(1, 4, 1, 3), (1, 4, 0)]) == 0
    assert schema.first_difference(a, [(1, 4, 2, 1, 2)]) is None  # (2,) fits (1, 2)


def test_consolidated_layout_sees_where_the_bytes_lie() -> None:
    one = TensorDict(a=torch.zeros(2), b=torch.zeros(2, dtype=torch.int64)).consolidate()
    other = TensorDict(b=torch.zeros(2, dtype=torch.int64), a=torch.zeros(2)).consolidate()
    recs, layout = schema.consolidated_layout(one._consolidated["metadata"])
    recs2, layout2 = schema.consolidated_layout(other._consolidated["metadata"])
    assert schema.fingerprint(recs, layout) != schema.fingerprint(recs2, layout2)
    renamed = TensorDict(x=torch.zeros(2), y=torch.zeros(2, dtype=torch.int64)).consolidate()
    recs3, layout3 = schema.consolidated_layout(renamed._consolidated["metadata"])
    assert schema.fingerprint(recs, layout) == schema.fingerprint(recs3, layout3)  # names: free


def test_pseudo_random_tags_are_upstreams_chain() -> None:
    chain, tag = [], 9
    for _ in range(3):
        tag = wire.int_generator(tag + 1)
        chain.append(tag)
    assert wire.leaf_tags(10, 3, True) == tuple(chain)
    assert wire.leaf_tags(3, 2, False) == (3, 4)
    assert wire.control_tag(5, wire.ACK) >= wire.CONTROL_BASE > 10_000


def test_control_messages_round_trip() -> None:
    recs = schema.records([torch.zeros(2, 3)])
    side = control.Side(control.LEAVES, 1, 24, 24, schema.fingerprint(recs), True, recs, 1)
    parsed, complete = control.Announce.parse(control.Announce.build(side), "x")
    assert parsed == side and complete
    answer = control.Answer(control.MISMATCH, 2, 48, 1, (7, 4, 1, 2))
    assert control.Answer.parse(answer.build()) == answer


def test_a_foreign_first_message_is_refused() -> None:
    with pytest.raises(TransferMismatchError, match="not a tensordict transfer"):
        control.Announce.parse(torch.zeros(control.CTRL_CAP, dtype=torch.int64), "recv")


@pytest.mark.parametrize(
    ("gloo", "expected"),
    [
        ("[pair.cc:553] Connection closed by peer [127.0.0.1]:1", PeerLostError),
        ("[pair.cc:537] Read error [127.0.0.1]:1: Connection reset by peer", PeerLostError),
        ("Timed out waiting 1000ms for recv operation to complete", DistributedTimeoutError),
        ("Application timeout caused pair closure", DistributedTimeoutError),
    ],
)
def test_gloo_errors_become_errors_that_say_what_to_do(gloo: str, expected: type) -> None:
    err = wire.Deadline(datetime.timedelta(seconds=2)).translate(RuntimeError(gloo), "recv")
    assert isinstance(err, expected) and isinstance(err, RuntimeError)
    assert str(err).startswith("recv: ") and gloo.splitlines()[0] in str(err)


def test_other_errors_pass_through() -> None:
    err = RuntimeError("Tensors must be CPU and dense")
    assert wire.translate(err, "send") is err


def test_storage_pool_hands_a_storage_out_again_only_once_nothing_holds_it() -> None:
    pool = payload.StoragePool(max_kept=2)
    first = pool.take(2 << 20, "cpu")
    address = first.data_ptr()
    view = first[8:16].view(torch.int64)  # a tensordict built on it holds views like this
    del first
    second = pool.take(2 << 20, "cpu")
    assert second.data_ptr() != address  # still in use through the view
    other = second.data_ptr()
    del second
    assert pool.take(2 << 20, "cpu").data_ptr() == other  # (behind one still in use)
    del view
    assert pool.take(2 << 20, "cpu").data_ptr() == address
    small = pool.take(1024, "cpu")
    assert small.data_ptr() != pool.take(1024, "cpu").data_ptr()  # small ones are not kept


def test_storage_pool_keeps_at_most_max_kept() -> None:
    pool = payload.StoragePool(max_kept=1)
    pool.take(2 << 20, "cpu")
    pool.take(4 << 20, "cpu")
    assert [t.numel() for t in pool._kept] == [4 << 20]  # the oldest went
