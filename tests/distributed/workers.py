"""What each rank runs in the distributed tests (``target(rank, world, ...)`` for
:func:`tests.distributed.harness.run`): importable, so that spawned ranks find them.

Targets return plain data the tests assert on: the leaves a rank ended with (``{path: tensor}``),
flags, or what they raised (the harness turns an error into a ``Raised``).
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch
import torch.distributed as dist

from tensordict import LazyStackedTensorDict, MemoryMappedTensor, TensorDict
from tensordict._testing import MyDistData
from tensordict.distributed import schema

# ---------------------------------------------------------------------------- tensordicts


def make(kind: str, fill: float) -> Any:
    """A tensordict of the structure ``kind``, every value ``fill``."""

    def full(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.full(shape, fill, dtype=dtype)

    base = TensorDict(
        {("a", "b"): full(2), "c": full(2, 3), "i": full(2, 4, dtype=torch.int64)}, [2]
    )
    if kind in ("dense", "unconsolidated_target"):
        return base
    if kind == "wide":
        base["c"] = full(2, 4)
        return base
    if kind == "flattened":  # the same leaves, each flat: the same dtypes and sizes
        return TensorDict({k: v.reshape(-1) for k, v in base.items(True, True)}, [])
    if kind == "memmap":
        base["m"] = MemoryMappedTensor.from_tensor(full(2, 2))
        return base
    if kind == "noncontiguous":
        base["t"] = full(5, 2).t()  # (2, 5), not contiguous
        base[("e", "x")] = full(2, 1, 3).expand(2, 4, 3)[:, ::2]
        return base
    other = base.clone()
    other["c"] = full(2, 3, 2)  # members of different shapes: the stack stays lazy
    other["g"] = full(2, 5)
    stack = LazyStackedTensorDict(base, other, stack_dim=0)
    if kind == "lazy":
        return stack
    if kind == "lazy_nested":
        return TensorDict({"ls": stack, "z": full(2, 2)}, [2, 2])
    if kind == "tensorclass":
        return MyDistData(a=full(3), b=full(3, 2), batch_size=[3])
    if kind == "big":  # several chunks of a consolidated transfer (> 4 MiB)
        return TensorDict({f"x{i}": full(1 << 18) for i in range(6)}, [])
    raise ValueError(kind)


def leaves_of(td: Any) -> dict[tuple[str, ...], torch.Tensor]:
    """The leaves of ``td`` (lazy stacks member by member), cloned."""
    return {leaf.path: leaf.tensor.clone() for leaf in schema.leaves(td)}


def caught(fn: Any) -> tuple[str, str, bool]:
    """Run ``fn``; what it raised: (class name, message, whether the receiver kept zeros)."""
    try:
        fn()
    except Exception as err:
        return type(err).__name__, str(err), True
    return "nothing", "", False


# ---------------------------------------------------------------------------- point to point


def send_recv(rank: int, world: int, kind: str, options: dict[str, Any]) -> Any:
    td = make(kind, 1.0 if rank == 0 else 0.0)
    if rank == 0:
        return td.send(1, **options)
    tag = td.recv(0, **options)
    return tag, leaves_of(td)


def send_recv_between(rank: int, world: int, sent: str, received: str) -> Any:
    td = make(sent if rank == 0 else received, 1.0 if rank == 0 else 0.0)
    if rank == 0:
        return td.send(1)
    td.recv(0)
    return leaves_of(td)


def isend_irecv_early(rank: int, world: int, kind: str) -> Any:
    td = make(kind, 1.0 if rank == 0 else 0.0)
    if rank == 0:
        works = td.isend(1, return_early=True)
        for work in works:
            work.wait()
        return len(works)
    works = td.irecv(0, return_premature=True)
    for work in works:
        work.wait()
    return len(works), leaves_of(td)


def raw_group_send_recv(rank: int, world: int, port: int) -> Any:
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=30))
    pg = dist.ProcessGroupGloo(
        dist.PrefixStore("pair", store), rank, 2, datetime.timedelta(seconds=30)
    )
    td = make("dense", 1.0 if rank == 0 else 0.0)
    if rank == 0:
        td.send(group=pg, group_dst=1)
        td.isend(group=pg, group_dst=1, pseudo_rand=True)
        return None
    td.recv(group=pg, group_src=0)
    first = leaves_of(td)
    td.zero_()
    works = td.irecv(group=pg, group_src=0, pseudo_rand=True, return_premature=True)
    for work in works:
        work.wait()
    return first, leaves_of(td)


def consolidated_stream(rank: int, world: int, kind: str) -> Any:
    """init_remote, then two consolidated sends received in place."""
    if rank == 0:
        td = make(kind, 1.0)
        td.init_remote(dst=1)
        td.apply_(lambda t: t.fill_(2))
        td.send(1, consolidated=True)  # not consolidated: laid out and filled on the way
        td_c = td.consolidate()
        td_c.apply(lambda t: t.fill_(3))
        td_c.send(1, consolidated=True)
        return None
    td = TensorDict.from_remote_init(src=0)
    storage = td._consolidated["storage"].data_ptr()
    td.recv(0, consolidated=True)
    second = leaves_of(td)
    td.recv(0, consolidated=True)
    same = td._consolidated["storage"].data_ptr() == storage
    return type(td).__name__, td.is_consolidated(), second, leaves_of(td), same


def mismatch(rank: int, world: int, sent: str, received: str, options: dict[str, Any]) -> Any:
    """A transfer whose ends do not fit, then one that fits on the same group."""
    send_options = {k: v for k, v in options.items() if not k.startswith("recv_")}
    recv_options = {k[5:]: v for k, v in options.items() if k.startswith("recv_")}
    recv_options = {**send_options, **recv_options}
    if rank == 0:
        td = make(sent, 1.0)
        if send_options.get("consolidated"):
            td = td.consolidate()
        error = caught(lambda: td.send(1, **send_options))
        make("dense", 1.0).send(1)
        return error[:2]
    td = make(received, 0.0)
    if recv_options.get("consolidated") and received != "unconsolidated_target":
        td = td.consolidate()
    error = caught(lambda: td.recv(0, **recv_options))
    zeros = all((t == 0).all() for t in leaves_of(td).values())
    after = make("dense", 0.0)
    after.recv(0)
    return error[:2], zeros, all((t == 1).all() for t in leaves_of(after).values())


def early_mismatch(rank: int, world: int) -> Any:
    """isend(return_early) and irecv(return_premature) raise the mismatch on wait."""
    if rank == 0:
        works = make("dense", 1.0).isend(1, return_early=True)
        return caught(lambda: [w.wait() for w in works])[:2]
    td = make("lazy", 0.0)
    works = td.irecv(0, return_premature=True)
    return caught(lambda: [w.wait() for w in works])[:2]


def dead_peer(rank: int, world: int, joined: Any) -> Any:
    """Rank 1 dies once rank 0 is in the group (dying during Gloo's handshake would fail rank
    0's ``init_process_group`` instead); rank 0 waits for a tensordict from it."""
    if rank == 1:
        joined.wait(30)
        os._exit(3)
    joined.set()
    td = make("dense", 0.0)
    return caught(lambda: td.recv(1, timeout=20))[:2]


def silent_peer(rank: int, world: int, done: Any) -> Any:
    """Rank 1 stays alive and never sends; rank 0 times out, then lets rank 1 go."""
    if rank == 1:
        done.wait(30)
        return None
    try:
        return caught(lambda: make("dense", 0.0).recv(1, timeout=1.0))[:2]
    finally:
        done.set()


#: calls of rank 0 whose peer, rank 1, never takes part (1 s timeouts)
LONELY_CALLS: dict[str, Any] = {
    "send": lambda: make("dense", 1.0).send(1, timeout=1.0),
    "isend(return_early)": lambda: [
        w.wait() for w in make("dense", 1.0).isend(1, return_early=True, timeout=1.0)
    ],
    "broadcast from 1": lambda: TensorDict().broadcast(1, timeout=1.0),
    "init_remote": lambda: make("dense", 1.0).init_remote(dst=1, timeout=1.0),
    "from_remote_init": lambda: TensorDict.from_remote_init(src=1, timeout=1.0),
    "all_gather": lambda: make("dense", 1.0).all_gather(timeout=1.0),
    "scatter from 1": lambda: make("dense", 1.0).scatter(src=1, timeout=1.0),
    "gather_and_stack": lambda: make("dense", 0.0).gather_and_stack(0, timeout=1.0),
}


def lonely(rank: int, world: int, call: str, peer: str, done: Any) -> Any:
    """Rank 0 makes ``LONELY_CALLS[call]``; rank 1 stays silent (``peer="silent"``) until rank 0
    is done, or dies as soon as rank 0 is in the group (``"dead"``: dying during Gloo's
    handshake would fail rank 0's ``init_process_group`` instead)."""
    if rank == 1:
        done.wait(30)
        if peer == "dead":
            os._exit(3)
        return None
    if peer == "dead":
        done.set()
    try:
        return caught(LONELY_CALLS[call])[:2]
    finally:
        done.set()


def silent_peer_of_a_group(rank: int, world: int, done: Any) -> Any:
    """As :func:`silent_peer`, without ``timeout=``: the group's own timeout (1 s) applies."""
    group = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=1))
    if rank == 1:
        done.wait(30)
        return None
    try:
        return caught(lambda: make("dense", 0.0).recv(1, group=group))[:2]
    finally:
        done.set()


def silent_collective(rank: int, world: int, done: Any) -> Any:
    if rank == 1:
        done.wait(30)
        return None
    try:
        return caught(lambda: make("dense", 1.0).all_reduce(timeout=1.0))[:2]
    finally:
        done.set()


def tensorclass_p2p(rank: int, world: int) -> Any:
    if rank == 0:
        tc = make("tensorclass", 1.0)
        tc.init_remote(dst=1)
        tc.a = torch.full((3,), 42.0)
        tc.send(1, consolidated=True)
        tc.send(1)
        return None
    got = TensorDict.from_remote_init(src=0)
    got.recv(0, consolidated=True)
    first = got.a.clone()
    plain = make("tensorclass", 0.0)
    plain.recv(0)
    return type(got).__name__, first, plain.a.clone()


# ---------------------------------------------------------------------------- collectives


def all_reduce(rank: int, world: int, kind: str, options: dict[str, Any]) -> Any:
    td = make(kind, float(rank + 1))
    works = td.all_reduce(**options)
    for work in works or ():
        work.wait()
    return leaves_of(td)


def reduce_to(rank: int, world: int, options: dict[str, Any]) -> Any:
    td = make("lazy_nested", float(rank + 1))
    works = td.reduce(0, **options)
    for work in works or ():
        work.wait()
    return leaves_of(td) if rank == 0 else None


def all_reduce_between(rank: int, world: int, kinds: list[str]) -> Any:
    td = make(kinds[rank], float(rank + 1))
    td.all_reduce()
    return leaves_of(td)


def all_reduce_mismatch(rank: int, world: int) -> Any:
    td = make("dense", 1.0)
    if rank == 1:
        td["c"] = torch.ones(2, 5)
    return caught(lambda: td.all_reduce())[:2]


def broadcast(rank: int, world: int, kind: str) -> Any:
    td = make(kind, 1.0) if rank == 0 else TensorDict()
    out = td.broadcast(src=0)
    return type(out).__name__, out.is_consolidated(), leaves_of(out)


def all_gather(rank: int, world: int) -> Any:
    td = TensorDict({"a": torch.full((rank + 1,), float(rank))}, [rank + 1])
    if rank == 1:
        td["extra", "x"] = torch.ones(2, 3)
    return [(tuple(t.batch_size), leaves_of(t)) for t in td.all_gather()]


def scatter(rank: int, world: int) -> Any:
    tds = None
    if rank == 0:
        tds = [make("tensorclass", float(i)) for i in range(world)]
    out = TensorDict().scatter(src=0, tensordicts=tds)
    return type(out).__name__, leaves_of(out)


def gather_and_stack(rank: int, world: int, grad: bool) -> Any:
    if rank == 0:
        out = TensorDict(
            {"a": torch.zeros(world - 1, 3), "b": torch.zeros(world - 1, 2)}, [world - 1]
        )
        return leaves_of(out.gather_and_stack(0))
    a = torch.full((3,), float(rank), requires_grad=grad)
    TensorDict({"a": a, "b": torch.full((2,), float(rank))}, []).gather_and_stack(0)
    return None


def init_remote_broadcast(rank: int, world: int) -> Any:
    if rank == 0:
        make("tensorclass", 7.0).init_remote(use_broadcast=True)
        return None
    got = TensorDict.from_remote_init(src=0, use_broadcast=True)
    return type(got).__name__, leaves_of(got)


def dead_collective_peer(rank: int, world: int, joined: Any) -> Any:
    """Rank 1 dies once rank 0 is in the group (see :func:`dead_peer`)."""
    if rank == 1:
        joined.wait(30)
        os._exit(3)
    joined.set()
    return caught(lambda: make("dense", 1.0).all_reduce(timeout=20))[:2]


def memmap_dtensor(rank: int, world: int) -> Any:
    """A DTensor sharded over both ranks: rank 0 memory-maps it (its whole value), rank 1 makes
    the matching gather."""
    from torch.distributed.tensor import DeviceMesh, Shard, distribute_tensor

    mesh = DeviceMesh("cpu", torch.arange(world))
    dt = distribute_tensor(torch.arange(16.0).reshape(8, 2), mesh, [Shard(0)])
    if rank == 0:
        return MemoryMappedTensor.from_tensor(dt).clone()
    dt.full_tensor()
    return None
