"""Run a function on the ranks of a gloo process group of local processes (loopback only).

:func:`run` starts ``world`` processes (``fork`` by default, ``spawn`` where a fresh interpreter
matters), each joining a gloo group on ``127.0.0.1`` and a free port, calls ``target(rank,
world, *args)`` in each and returns what each returned. A rank that raised returns a
:class:`Raised` (its error's type name and message); a rank whose process ended without
answering (``os._exit``, a crash) returns a :class:`Died` with its exit code. Targets live in
importable modules (``tests/distributed/workers.py``), so that spawned processes find them.
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing
import multiprocessing.connection
import os
import pickle
import socket
import time
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.distributed as dist

#: the group's timeout: a test that hangs fails on it instead of eating the suite's time
GROUP_TIMEOUT = datetime.timedelta(seconds=30)


class Raised(NamedTuple):
    """What a rank raised: the error's class name, its message, and its builtin bases."""

    type: str
    message: str
    bases: tuple[str, ...]


class Died(NamedTuple):
    """A rank whose process ended without answering."""

    exitcode: int | None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(
    target: Callable[..., Any],
    rank: int,
    world: int,
    port: int,
    conn: Any,
    args: tuple[Any, ...],
    barrier: bool,
) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)  # (an OpenMP pool forked from a parent that used it hangs)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=GROUP_TIMEOUT)
    try:
        result: Any = target(rank, world, *args)
    except BaseException as err:
        bases = tuple(c.__name__ for c in type(err).__mro__)
        result = Raised(type(err).__name__, f"{err}\n{traceback.format_exc()}", bases)
    conn.send_bytes(pickle.dumps(result))  # (by value: torch would share fds with the parent)
    conn.close()
    # as programs do before they exit: a rank that leaves early breaks the others' reads (a rank
    # that died makes it fail: nothing to wait for then)
    if barrier:
        with contextlib.suppress(RuntimeError):
            dist.barrier()
    dist.destroy_process_group()


def run(
    target: Callable[..., Any],
    *args: Any,
    world: int = 2,
    start: str = "fork",
    timeout: float = 60.0,
    barrier: bool = True,
) -> list[Any]:
    """What ``target(rank, world, *args)`` returned on each rank (see the module docstring).

    ``barrier=False``: the ranks leave without waiting for each other (a test that left a
    collective pending on purpose: a barrier would wait for the group's timeout)."""
    ctx = multiprocessing.get_context(start)
    port = free_port()
    pipes = [ctx.Pipe(duplex=False) for _ in range(world)]
    procs = [
        ctx.Process(
            target=_rank_main, args=(target, rank, world, port, pipes[rank][1], args, barrier)
        )
        for rank in range(world)
    ]
    for p in procs:
        p.start()
    for _, send_end in pipes:
        send_end.close()
    results: dict[int, Any] = {}
    end = time.monotonic() + timeout
    try:
        waiting = {pipes[r][0]: r for r in range(world)}
        while waiting:
            left = end - time.monotonic()
            ready = multiprocessing.connection.wait(list(waiting), timeout=max(left, 0))
            if not ready:
                raise TimeoutError(
                    f"ranks {sorted(waiting.values())} did not answer in {timeout} s"
                )
            for conn in ready:
                rank = waiting.pop(conn)
                try:
                    results[rank] = pickle.loads(conn.recv_bytes())
                except EOFError:  # the process ended without answering
                    procs[rank].join(timeout=10)
                    results[rank] = Died(procs[rank].exitcode)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    return [results[r] for r in range(world)]
