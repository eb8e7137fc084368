"""Warm result segments kept between map_iter calls (``shm.SegmentStock``).

A result segment written for the first time costs its pages' allocation (~10x the copy); the
parent keeps the segments of a finished call and the next call's forked workers write into them.
Nothing may ever be overwritten while the caller still holds a result that lives in it.
"""

from __future__ import annotations

import os
import socket

import numpy as np
import torch

from tensordict import TensorDict
from tensordict.parallel import shm
from tensordict.parallel.channel import OUT_OF_BAND_BYTES, Channel
from tensordict.parallel.shm import SegmentStock
from tests.parallel import helpers

MIB = 1 << 20


def segment(size: int = MIB) -> np.ndarray:
    fd = os.memfd_create("test-segment")
    try:
        os.ftruncate(fd, shm.DATA_OFFSET + size)
        array = shm.map_fd(fd, shm.DATA_OFFSET + size)
    finally:
        os.close(fd)
    array[0] = 1  # free
    return array


def test_take_gives_free_segments_only_and_give_keeps_within_the_limit():
    stock = SegmentStock(limit=3 * (MIB + shm.DATA_OFFSET))
    free, busy = [segment() for _ in range(3)], segment()
    busy[0] = 0
    stock.give([busy, *free, segment()])  # one too many: a busy one goes first
    assert len(stock) == 3 and all(a[0] == 1 for a in stock._arrays)
    got = stock.take(2)
    assert len(got) == 2 and len(stock) == 1
    got[0][0] = 0  # in use again
    stock.give(got)
    assert [a is got[0] for a in stock.take(5)].count(True) == 0  # a busy one is not handed out


def test_a_forked_child_starts_with_an_empty_stock():
    stock = SegmentStock()
    stock.give([segment()])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, str(len(stock)).encode())
        os._exit(0)
    os.close(write)
    assert os.read(read, 16) == b"0"
    os.close(read)
    os.waitpid(pid, 0)
    assert len(stock) == 1


def test_a_channel_sends_into_warm_segments_the_receiver_already_maps():
    warm = [segment(2 * OUT_OF_BAND_BYTES)]
    a, b = socket.socketpair()
    sender, receiver = Channel(a, send_warm=warm), Channel(b, recv_warm=warm)
    try:
        big = torch.randn(OUT_OF_BAND_BYTES // 4)
        sender.send(("ok", 0, big))
        got = receiver.recv()[2]
        assert torch.equal(got, big)
        assert got.untyped_storage().data_ptr() >= warm[0].ctypes.data  # in the warm segment
        assert len(sender._pool) == 1  # no new segment
        assert receiver.received_segments()[0] is warm[0]
    finally:
        sender.close()
        receiver.close()


def test_results_held_from_one_call_survive_the_next_calls_that_reuse_segments():
    n = 8 * OUT_OF_BAND_BYTES // 1024  # chunks of 256 KiB results
    td = TensorDict({"x": torch.randn(n, 256)}, [n])
    kw = {"num_workers": 2, "chunksize": n // 8, "generator": torch.Generator()}
    shm.STOCK.clear()
    held = list(td.map_iter(helpers.add_one, mp_start_method="fork", **kw))
    first = {a.ctypes.data for a in shm.STOCK._arrays}
    assert first  # the first call's segments were kept ...
    del held[::2]  # ... and half of them are free again
    for _ in range(2):
        again = torch.cat([r["y"] for r in td.map_iter(helpers.add_one, **kw)])
        assert torch.equal(again, td["x"] + 1)
    assert first & {a.ctypes.data for a in shm.STOCK._arrays}  # and served the later calls
    want = (td["x"] + 1).split(n // 8)[1::2]
    assert all(torch.equal(h["y"], w) for h, w in zip(held, want))
    shm.STOCK.clear()


def test_a_sender_takes_the_smallest_free_segment_that_fits():
    small, large = segment(MIB), segment(2 * MIB)
    for order in ([small, large], [large, small]):
        pool = shm.SegmentPool(order)
        sizes = {seg.id: seg.size for seg in pool._free}
        got = pool.acquire(100 << 10)
        assert sizes[got.id] == MIB  # not the 2 MiB one, whichever was freed last
        got2 = pool.acquire(MIB + 1)
        assert sizes[got2.id] == 2 * MIB and len(pool) == 2
        for seg in (got, got2):
            seg.view[0] = 1  # freed by the receiver
        pool.close()
