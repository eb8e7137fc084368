"""send / recv / isend / irecv between two gloo processes: values, tags, consolidated transfers,
and the errors that replace gloo's hangs and crashes (tensordicts that do not fit, a dead or
silent peer)."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from tensordict import TensorDict
from tensordict.distributed import wire
from tensordict.errors import PeerArgumentError
from tests.distributed import workers
from tests.distributed.harness import Died, free_port, run


def all_equal(leaves: dict, value: float) -> bool:
    return bool(leaves) and all((t == value).all() for t in leaves.values())


@pytest.mark.parametrize("kind", ["dense", "memmap", "noncontiguous", "lazy", "lazy_nested"])
def test_recv_writes_every_leaf_in_place(kind: str) -> None:
    _, (tag, leaves) = run(workers.send_recv, kind, {})
    assert all_equal(leaves, 1.0)
    assert leaves.keys() == workers.leaves_of(workers.make(kind, 0.0)).keys()
    assert tag == len(leaves) - 1  # upstream's return: the last leaf's tag


def test_leaves_of_the_same_dtype_and_size_fit_whatever_their_shapes() -> None:
    _, leaves = run(workers.send_recv_between, "dense", "flattened")  # (2, 3) into (6,), ...
    assert all_equal(leaves, 1.0) and leaves[("c",)].shape == (6,)


def test_tags_follow_init_tag_and_pseudo_rand() -> None:
    options = {"init_tag": 7, "pseudo_rand": True}
    _, (tag, leaves) = run(workers.send_recv, "dense", options)
    assert all_equal(leaves, 1.0)
    assert tag == wire.leaf_tags(7, len(leaves), True)[-1]


@pytest.mark.parametrize("kind", ["dense", "lazy_nested"])
def test_early_return_works_complete_the_transfer(kind: str) -> None:
    sent, (count, leaves) = run(workers.isend_irecv_early, kind)
    assert all_equal(leaves, 1.0)
    assert sent == count == len(leaves)  # one work per leaf on both sides


def test_group_dst_and_group_src_on_a_group_torch_never_registered() -> None:
    _, (first, second) = run(workers.raw_group_send_recv, free_port())
    assert all_equal(first, 1.0) and all_equal(second, 1.0)


@pytest.mark.parametrize("kind", ["dense", "lazy_nested", "big"])
def test_consolidated_sends_land_in_the_receivers_storage(kind: str) -> None:
    _, (cls, consolidated, second, third, same_storage) = run(workers.consolidated_stream, kind)
    assert (cls, consolidated, same_storage) == ("TensorDict", True, True)
    assert all_equal(second, 2.0) and all_equal(third, 3.0)


def test_tensorclass_travels_as_itself() -> None:
    _, (cls, first, plain) = run(workers.tensorclass_p2p)
    assert cls == "MyDistData"
    assert (first == 42).all() and (plain == 42).all()


@pytest.mark.parametrize(
    ("sent", "received", "options", "words"),
    [
        ("dense", "noncontiguous", {}, "3 tensors of 96 bytes here, 5 of 184 on rank 1"),
        ("lazy", "lazy_nested", {}, "tensor #7 (key ('z',)) is float32 (2, 2) here and nothing"),
        ("dense", "dense", {"consolidated": True, "recv_consolidated": False}, "consolidated="),
        ("dense", "dense", {"pseudo_rand": True, "recv_pseudo_rand": False}, "pseudo_rand"),
        ("dense", "lazy", {"consolidated": True}, "7 tensors of 256 bytes here, 3 of 96"),
        ("dense", "wide", {"consolidated": True}, "float32 (2, 3) here and float32 (2, 4)"),
    ],
)
def test_tensordicts_that_do_not_fit_raise_on_both_ranks(
    sent: str, received: str, options: dict, words: str
) -> None:
    (s_type, s_msg), ((r_type, r_msg), zeros, after) = run(
        workers.mismatch, sent, received, options
    )
    assert s_type == r_type == "TransferMismatchError"
    assert "do not fit" in s_msg and "do not fit" in r_msg
    assert words in s_msg + r_msg
    assert zeros  # nothing written into the receiver
    assert after  # and the group still works


def test_shape_mismatch_names_the_leaf_on_both_ranks() -> None:
    (_, s_msg), ((_, r_msg), _, _) = run(workers.mismatch, "dense", "wide", {})
    assert "tensor #1 (key ('c',)) is float32 (2, 3) here and float32 (2, 4) on rank 1" in s_msg
    assert "tensor #1 (key ('c',)) is float32 (2, 4) here and float32 (2, 3) on rank 0" in r_msg


def test_consolidated_recv_into_a_tensordict_that_is_not_consolidated() -> None:
    options = {"consolidated": True}
    (s_type, _), ((r_type, r_msg), zeros, after) = run(
        workers.mismatch, "dense", "unconsolidated_target", options
    )
    assert s_type == r_type == "NotConsolidatedError"
    assert issubclass(__import__("tensordict").errors.NotConsolidatedError, AttributeError)
    assert "td.consolidate(metadata=True)" in r_msg and zeros and after


def test_early_works_raise_the_mismatch_when_waited() -> None:
    (s_type, _), (r_type, _) = run(workers.early_mismatch)
    assert s_type == r_type == "TransferMismatchError"


def test_a_peer_that_dies_raises_peer_lost_instead_of_hanging() -> None:
    (error, message), died = run(workers.dead_peer, multiprocessing.get_context("fork").Event())
    assert died == Died(3)
    assert error == "PeerLostError", message
    assert "went away" in message


def test_a_silent_peer_raises_after_the_timeout() -> None:
    (error, message), _ = run(workers.silent_peer, multiprocessing.get_context("fork").Event())
    assert error == "DistributedTimeoutError", message
    assert "timeout=1 s" in message and "larger timeout=" in message


def test_without_timeout_the_process_groups_timeout_applies() -> None:
    event = multiprocessing.get_context("fork").Event()
    (error, message), _ = run(workers.silent_peer_of_a_group, event, barrier=False)
    assert error == "DistributedTimeoutError", message
    assert "process group's timeout" in message and "larger timeout=" in message


@pytest.mark.parametrize("call", sorted(workers.LONELY_CALLS))
@pytest.mark.parametrize("peer", ["silent", "dead"])
def test_every_method_raises_for_a_silent_or_dead_peer(call: str, peer: str) -> None:
    event = multiprocessing.get_context("fork").Event()
    (error, message), _ = run(workers.lonely, call, peer, event, barrier=False)
    if peer == "silent":
        assert error == "DistributedTimeoutError", message
        assert "timeout=1 s" in message
    else:
        assert error == "PeerLostError", message
        assert "went away" in message


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda td: td.send(), "Exactly one of `dst` and `group_dst`"),
        (lambda td: td.isend(group_dst=0), "`group_dst` requires `group`"),
        (lambda td: td.recv(0, group=object(), group_src=0), "mutually exclusive"),
        (lambda td: td.irecv(), "Exactly one of `src` and `group_src`"),
        (lambda td: td.init_remote(), "init_remote needs dst="),
    ],
)
def test_peer_arguments_are_checked_before_any_communication(call, words: str) -> None:
    with pytest.raises(PeerArgumentError, match=words) as info:
        call(TensorDict(a=torch.zeros(1)))
    assert isinstance(info.value, ValueError)


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        wire.Deadline(0)
