"""all_reduce / reduce / broadcast / all_gather / scatter / gather_and_stack / init_remote with
use_broadcast, between gloo processes; the structure check before reductions; dead and silent
peers; and a spawned pair for a tensorclass found by name in a fresh interpreter."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from tests.distributed import workers
from tests.distributed.harness import Died, run


def all_equal(leaves: dict, value: float) -> bool:
    return bool(leaves) and all((t == value).all() for t in leaves.values())


@pytest.mark.parametrize(
    "options",
    [{}, {"async_op": True}, {"bucket_bytes": 40}, {"bucket_bytes": 1 << 20, "async_op": True}],
)
def test_all_reduce_sums_every_leaf_on_every_rank(options: dict) -> None:
    results = run(workers.all_reduce, "lazy_nested", options, world=3)
    for leaves in results:
        assert all_equal(leaves, 6.0)  # 1 + 2 + 3


def test_all_reduce_writes_non_contiguous_leaves_back() -> None:
    for leaves in run(workers.all_reduce, "noncontiguous", {}):
        assert all_equal(leaves, 3.0)


@pytest.mark.parametrize(
    "options", [{}, {"async_op": True, "return_premature": True}, {"bucket_bytes": 64}]
)
def test_reduce_sums_into_dst(options: dict) -> None:
    dst, other = run(workers.reduce_to, options)
    assert all_equal(dst, 3.0) and other is None


def test_all_reduce_pairs_leaves_of_the_same_size_whatever_their_shapes() -> None:
    for leaves in run(workers.all_reduce_between, ["dense", "flattened"]):
        assert all_equal(leaves, 3.0)


def test_reductions_of_tensordicts_that_do_not_fit_raise_on_every_rank() -> None:
    for error, message in run(workers.all_reduce_mismatch):
        assert error == "TransferMismatchError", message
        assert "tensor #1 (key ('c',))" in message and "float32 (2, 3)" in message
        assert "float32 (2, 5)" in message and "Nothing was reduced" in message


@pytest.mark.parametrize("kind", ["lazy_nested", "big", "tensorclass"])
def test_broadcast_gives_every_rank_the_consolidated_source(kind: str) -> None:
    expected = "MyDistData" if kind == "tensorclass" else kind.startswith("lazy") and "x"
    for cls, consolidated, leaves in run(workers.broadcast, kind):
        assert consolidated and all_equal(leaves, 1.0)
        assert leaves.keys() == workers.leaves_of(workers.make(kind, 0.0)).keys()
        if kind == "tensorclass":
            assert cls == expected


def test_all_gather_returns_every_ranks_tensordict_whatever_its_structure() -> None:
    for gathered in run(workers.all_gather):
        (size0, leaves0), (size1, leaves1) = gathered
        assert size0 == (1,) and all_equal(leaves0, 0.0)
        assert size1 == (2,) and set(leaves1) == {("a",), ("extra", "x")}
        assert (leaves1[("a",)] == 1).all()


def test_scatter_gives_each_rank_its_tensorclass() -> None:
    for rank, (cls, leaves) in enumerate(run(workers.scatter)):
        assert cls == "MyDistData" and all_equal(leaves, float(rank))


@pytest.mark.parametrize("grad", [False, True])  # a leaf that requires grad travels pickled
def test_gather_and_stack_fills_dst_with_the_other_ranks(grad: bool) -> None:
    stacked, _, _ = run(workers.gather_and_stack, grad, world=3)
    assert stacked[("a",)].tolist() == [[1.0] * 3, [2.0] * 3]
    assert stacked[("b",)].tolist() == [[1.0] * 2, [2.0] * 2]


def test_init_remote_by_broadcast() -> None:
    _, (cls, leaves) = run(workers.init_remote_broadcast)
    assert cls == "MyDistData" and all_equal(leaves, 7.0)


def test_a_peer_that_dies_during_a_reduction_raises_peer_lost() -> None:
    (error, message), died = run(
        workers.dead_collective_peer, multiprocessing.get_context("fork").Event()
    )
    assert died == Died(3) and error == "PeerLostError", message


def test_a_silent_peer_fails_the_reduction_after_the_timeout() -> None:
    event = multiprocessing.get_context("fork").Event()
    (error, message), _ = run(workers.silent_collective, event, barrier=False)
    assert error == "DistributedTimeoutError", message
    assert "timeout=1 s" in message


def test_spawned_ranks_rebuild_the_tensorclass_by_name() -> None:
    _, (cls, first, plain) = run(workers.tensorclass_p2p, start="spawn")
    assert cls == "MyDistData" and (first == 42).all() and (plain == 42).all()


def test_memmap_of_a_dtensor_holds_its_whole_value() -> None:
    mapped, _ = run(workers.memmap_dtensor)
    assert mapped.tolist() == torch.arange(16.0).reshape(8, 2).tolist()
