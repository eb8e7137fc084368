"""The parent <-> worker channel: framing, out-of-band buffers through memfd, end of stream."""

from __future__ import annotations

import socket

import pytest
import torch

from tensordict import TensorDict
from tensordict.parallel.channel import OUT_OF_BAND_BYTES, Channel, ChannelClosed


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    ca, cb = Channel(a), Channel(b)
    yield ca, cb
    ca.close()
    cb.close()


def test_small_objects_round_trip(pair):
    ca, cb = pair
    ca.send([(1, None), (2, ("index", slice(3, 4)))])
    assert cb.recv() == [(1, None), (2, ("index", slice(3, 4)))]


def test_messages_keep_their_order_and_boundaries(pair):
    ca, cb = pair
    for i in range(50):
        ca.send(("ok", i, "x" * i))
    assert [cb.recv()[1] for _ in range(50)] == list(range(50))


def test_large_tensors_travel_out_of_band_and_arrive_intact(pair):
    ca, cb = pair
    td = TensorDict({"a": torch.randn(OUT_OF_BAND_BYTES), "b": torch.arange(3)}, [])
    ca.send(("ok", 0, td))
    got = cb.recv()[2]
    assert torch.equal(got["a"], td["a"]) and torch.equal(got["b"], td["b"])


def test_out_of_band_tensors_are_writable_and_independent(pair):
    ca, cb = pair
    src = torch.zeros(OUT_OF_BAND_BYTES)
    ca.send(src)
    got = cb.recv()
    got += 1
    assert src.sum() == 0 and got.sum() == got.numel()


def test_several_out_of_band_messages_in_a_row(pair):
    ca, cb = pair
    tensors = [torch.full((OUT_OF_BAND_BYTES // 4 + i,), float(i)) for i in range(5)]
    for t in tensors:
        ca.send(t)
    for t in tensors:
        assert torch.equal(cb.recv(), t)


def test_closed_peer_raises_channel_closed(pair):
    ca, cb = pair
    ca.send("last")
    ca.sock.shutdown(socket.SHUT_WR)
    assert cb.recv() == "last"
    with pytest.raises(ChannelClosed):
        cb.recv()


def test_segments_are_reused_as_soon_as_the_receiver_frees_the_tensors(pair):
    worker, parent = pair
    big = torch.randn(OUT_OF_BAND_BYTES)
    for i in range(20):
        worker.send(("ok", i, big))
        got = parent.recv()[2]
        assert torch.equal(got, big)
        del got  # the segment is handed back as soon as its tensors are freed
    assert len(worker._pool) == 1


def test_segments_freed_behind_a_result_still_held_are_reused(pair):
    # the oldest result is kept while the later ones are freed: their segments are found
    # behind it and reused, the pool does not grow with the stream
    worker, parent = pair
    n = OUT_OF_BAND_BYTES // 4
    kept = None
    for i in range(40):
        worker.send(("ok", i, TensorDict({"y": torch.full((n,), float(i))}, [n])))
        got = parent.recv()[2]
        assert (got["y"] == i).all()
        if kept is None:
            kept = got
        del got
    assert len(worker._pool) <= 3
    assert (kept["y"] == 0).all()  # never overwritten


def test_a_held_result_is_never_overwritten_by_later_ones(pair):
    worker, parent = pair
    held = []
    for i in range(6):
        worker.send(torch.full((OUT_OF_BAND_BYTES,), float(i)))
        held.append(parent.recv())
    for i, t in enumerate(held):
        assert (t == i).all(), f"result {i} was overwritten"


def test_a_view_of_a_result_keeps_its_segment_after_the_result_is_freed(pair):
    import gc

    worker, parent = pair
    n = OUT_OF_BAND_BYTES // 4
    worker.send(("ok", 0, TensorDict({"y": torch.full((n,), 7.0)}, [n])))
    result = parent.recv()[2]
    tail = result["y"][n // 2 :]  # a view: the result and its leaf are dropped below
    del result
    gc.collect()
    for i in range(4):  # later results must go to other segments
        worker.send(("ok", i + 1, TensorDict({"y": torch.full((n,), float(i))}, [n])))
        parent.recv()
    assert (tail == 7.0).all()


def test_a_peer_that_dies_with_unread_messages_reads_as_end_of_stream(pair):
    ca, cb = pair
    cb.send("never read")  # ca never reads it
    ca.sock.close()  # closing with unread data resets the connection
    with pytest.raises(ChannelClosed):
        cb.recv()


def test_on_idle_is_skipped_when_a_message_is_already_there(pair):
    ca, cb = pair
    ca.send("task")
    calls = []
    assert cb.recv(on_idle=lambda: calls.append(1), idle_seconds=0) == "task"
    assert calls == []


@pytest.mark.parametrize("idle_seconds", [0.0, 0.001])
def test_on_idle_runs_once_when_nothing_arrives(pair, idle_seconds):
    ca, cb = pair
    calls = []

    def idle():  # the peer answers only once we have gone idle
        calls.append(1)
        ca.send("late task")

    assert cb.recv(on_idle=idle, idle_seconds=idle_seconds) == "late task"
    assert calls == [1]


def test_small_tensordict_results_take_the_compact_path_and_arrive_intact(pair):
    ca, cb = pair
    td = TensorDict({"y": torch.tensor(1.5), "v": torch.arange(3)}, [])
    data, _ = ca._encode(("ok", 7, td), plain=False)
    assert b"rebuild_tensordict" not in data  # builtins only
    ca.send(("ok", 7, td))
    tag, k, got = cb.recv()
    assert (tag, k) == ("ok", 7) and type(got) is TensorDict
    assert torch.equal(got["y"], td["y"]) and torch.equal(got["v"], td["v"])


FLAT_LEAVES = {
    "f32": torch.randn(OUT_OF_BAND_BYTES // 4),
    "i16": torch.arange(7, dtype=torch.int16),
    "f64": torch.tensor(3.5, dtype=torch.float64),
    "empty": torch.empty(0, 3),
    "bool": torch.ones(5, 2, dtype=torch.bool),
    "bf16": torch.randn(3, dtype=torch.bfloat16),
    "c64": torch.randn(2, 2, dtype=torch.complex64),
    "strided": torch.arange(20.0).view(4, 5)[:, 1],
}


@pytest.mark.parametrize("big", [False, True])
def test_flat_results_arrive_equal_leaf_by_leaf(pair, big):
    ca, cb = pair
    leaves = dict(FLAT_LEAVES) if big else {k: v for k, v in FLAT_LEAVES.items() if k != "f32"}
    td = TensorDict(leaves, [])
    ca.send(("ok", 7, td))
    tag, k, got = cb.recv()
    assert (tag, k, type(got), got.batch_size) == ("ok", 7, TensorDict, td.batch_size)
    assert list(got.keys()) == list(td.keys())
    for key, value in td.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape
        assert torch.equal(got[key], value)
    assert (cb.last_oob_bytes > 0) == big  # large leaves through shared memory only
    got["i16"] += 1  # writable, and not the sender's memory
    assert torch.equal(td["i16"], torch.arange(7, dtype=torch.int16))


def test_flat_results_keep_batch_size_and_lock(pair):
    ca, cb = pair
    td = TensorDict({"y": torch.randn(2000, 3)}, [2000, 3]).lock_()
    ca.send(("ok", 0, td))
    got = cb.recv()[2]
    assert got.batch_size == (2000, 3) and got.is_locked and torch.equal(got["y"], td["y"])


def test_results_that_are_not_flat_travel_as_before(pair):
    ca, cb = pair
    nested = TensorDict({"a": {"b": torch.randn(OUT_OF_BAND_BYTES)}}, [])
    named = TensorDict({"a": torch.randn(4, OUT_OF_BAND_BYTES // 4)}, [4], names=["n"])
    for td in (nested, named):
        ca.send(("ok", 0, td))
        got = cb.recv()[2]
        assert got.names == td.names and (got == td).all()


def test_a_repeated_flat_layout_travels_once_and_results_arrive_intact(pair):
    # a stream of results of one layout sends the layout with the first only; a new layout
    # travels again, and a result whose chunk number is not an int takes the generic path
    ca, cb = pair
    n = OUT_OF_BAND_BYTES // 4
    sizes = []
    sent = []
    for k, td in enumerate(
        [
            TensorDict({"y": torch.full((n,), 1.0)}, [n]),
            TensorDict({"y": torch.full((n,), 2.0)}, [n]),
            TensorDict({"y": torch.full((n,), 3.0)}, [n]),
            TensorDict({"z": torch.arange(n, dtype=torch.int64)}, [n]).lock_(),
            TensorDict({"z": torch.arange(n, dtype=torch.int64) + 1}, [n]).lock_(),
            TensorDict({"y": torch.full((n,), 4.0)}, [n]),
        ]
    ):
        data, seg = ca.encode(("ok", k, td))
        sizes.append(len(data))
        ca.send_encoded([(data, seg)])
        sent.append(td)
    ca.send(("ok", "not an int", sent[0]))
    for k, td in enumerate(sent):
        tag, got_k, got = cb.recv()
        assert (tag, got_k, got.batch_size, got.is_locked) == ("ok", k, td.batch_size, td.is_locked)
        assert list(got.keys()) == list(td.keys()) and (got == td).all()
        assert cb.last_oob_bytes == n * (8 if "z" in list(td.keys()) else 4)
    tag, got_k, got = cb.recv()
    assert (tag, got_k) == ("ok", "not an int") and (got == sent[0]).all()
    # the layout's pickle travelled with results 0, 3 and 5 only
    assert sizes[1] == sizes[2] < sizes[0] and sizes[4] < sizes[3] and sizes[5] > sizes[2]


def test_results_that_repeat_the_last_layout_skip_packing_it(pair, monkeypatch):
    # the layout a stream repeats is recognised from the tensordict itself: pack_flat (which
    # builds the layout) runs for the first result only, and every result arrives intact
    import tensordict.parallel.channel as channel

    calls = []
    real = channel.pack_flat
    monkeypatch.setattr(channel, "pack_flat", lambda td: calls.append(1) or real(td))
    ca, cb = pair
    n = OUT_OF_BAND_BYTES // 4
    sent = [TensorDict({"y": torch.full((n,), float(k))}, [n]) for k in range(4)]
    for k, td in enumerate(sent):
        ca.send_encoded([ca.encode(("ok", k, td))])
    for k, td in enumerate(sent):
        tag, got_k, got = cb.recv()
        assert (tag, got_k) == ("ok", k) and torch.equal(got["y"], td["y"])
    assert len(calls) == 1


def _near_misses(n: int) -> dict[str, TensorDict]:
    """Results that differ from ``TensorDict({"y": float32[n]}, [n])`` in one respect only."""
    grad = torch.zeros(n, requires_grad=True)
    return {
        "batch size": TensorDict({"y": torch.full((n,), 5.0)}, []),
        "locked": TensorDict({"y": torch.full((n,), 5.0)}, [n]).lock_(),
        "same itemsize, other dtype": TensorDict({"y": torch.arange(n, dtype=torch.int32)}, [n]),
        "other key": TensorDict({"w": torch.full((n,), 5.0)}, [n]),
        "another leaf": TensorDict({"y": torch.ones(n), "z": torch.ones(n)}, [n]),
        "not contiguous": TensorDict({"y": torch.arange(2.0 * n).view(n, 2)[:, 1]}, [n]),
        "requires grad": TensorDict({"y": grad}, [n]),
        "names": TensorDict({"y": torch.ones(n)}, [n], names=["rows"]),
        "other shape": TensorDict({"y": torch.ones(n // 2, 2)}, [n // 2]),
    }


@pytest.mark.parametrize("case", list(_near_misses(8)))
def test_a_result_that_nearly_repeats_the_last_layout_arrives_as_sent(pair, case):
    ca, cb = pair
    n = OUT_OF_BAND_BYTES // 4
    base = TensorDict({"y": torch.full((n,), 1.0)}, [n])
    odd = _near_misses(n)[case]
    for k, td in enumerate([base, odd, base]):
        ca.send_encoded([ca.encode(("ok", k, td))])
    for k, td in enumerate([base, odd, base]):
        tag, got_k, got = cb.recv()
        assert (tag, got_k, got.batch_size, got.is_locked) == ("ok", k, td.batch_size, td.is_locked)
        assert got.names == td.names and list(got.keys()) == list(td.keys())
        for key, value in td.items():
            assert got[key].dtype == value.dtype and got[key].shape == value.shape
            assert torch.equal(got[key], value.detach())
