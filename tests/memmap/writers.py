"""Writer processes for the fault-injection tests: overwrite a prefix until killed, write it from
two processes at once, pause in the middle of a write.

Every saved version ``v`` holds ``v`` in every leaf (files at the root, in a nested tensordict and
in the members of a lazy stack) and ``"v<v>"`` in its non-tensor entry, so that a load shows at a
glance whether it is one complete version or a mix (:func:`versions_in`).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
from typing import Any

import torch

#: rows of every saved version; the leaves add up to ~0.6 MiB in 15 files
ROWS = 64


def version(v: int, rows: int = ROWS) -> Any:
    """A tensordict whose every value says ``v``."""
    from tensordict import LazyStackedTensorDict, TensorDict

    members = [
        TensorDict(
            {"m": torch.full((rows, 8), float(v)), f"only{i}": torch.full((rows,), v)}, [rows]
        )
        for i in range(3)
    ]
    return TensorDict(
        {
            **{f"k{i}": torch.full((rows, 256), float(v)) for i in range(8)},
            "nested": {"x": torch.full((rows, 32), v, dtype=torch.int64)},
            "stack": LazyStackedTensorDict(*members, stack_dim=1),
            "label": f"v{v}",
        },
        [rows],
    )


def versions_in(td: Any) -> set[Any]:
    """The distinct versions found in a loaded tensordict (one element: not mixed)."""
    tensors = [td[f"k{i}"] for i in range(8)] + [td["nested", "x"]]
    for i, member in enumerate(td["stack"].tensordicts):
        tensors += [member["m"], member[f"only{i}"]]
    found = {int(x) for t in tensors for x in t.as_subclass(torch.Tensor).unique().tolist()}
    found.add(int(str(td["label"]).removeprefix("v")))
    return found


def overwrite_forever(prefix: str, first: int, conn: Any) -> None:
    """Save versions ``first``, ``first + 1``, ... to ``prefix``; report each one saved."""
    torch.set_num_threads(1)
    v = first
    while True:
        version(v).memmap(prefix)
        conn.send(v)
        v += 1


def write_once(prefix: str, v: int, barrier: Any, conn: Any) -> None:
    """Save version ``v`` to ``prefix`` as soon as every writer is ready; report success."""
    torch.set_num_threads(1)
    td = version(v)
    barrier.wait()
    td.memmap(prefix)
    conn.send(("done", v))


def write_paused(prefix: str, v: int, resume: Any, conn: Any) -> None:
    """Save version ``v``, stopping after the first data file until ``resume`` is set."""
    from tensordict.memmap import io

    torch.set_num_threads(1)
    real = io.write_file
    paused = [False]

    def pause_once(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        if not paused[0]:
            paused[0] = True
            conn.send(("paused", os.getpid()))
            resume.wait()

    io.write_file = pause_once
    version(v).memmap(prefix)
    conn.send(("done", v))


def start(target: Any, *args: Any) -> tuple[Any, Any]:
    """Start ``target(*args, conn)`` in a forked process; return (process, parent end)."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(*args, child), daemon=True)
    proc.start()
    child.close()
    return proc, parent


def kill(proc: Any) -> None:
    """SIGKILL ``proc`` (no cleanup runs) and reap it."""
    if proc.pid is not None and proc.is_alive():
        os.kill(proc.pid, signal.SIGKILL)
    proc.join(60)


def drain(conn: Any) -> list[Any]:
    """Every message already sent on ``conn`` (after its writer died)."""
    out = []
    while True:
        try:
            if not conn.poll():
                break
            out.append(conn.recv())
        except (EOFError, OSError):
            break
    return out


# ====================================================================== one-shot forked children
def run_forked(fn: Any, *args: Any, deadline: float = 120.0) -> tuple[int | None, Any]:
    """Run ``fn(*args)`` in a forked child; return (exit code, what it returned).

    ``fn`` may end the child itself (``os._exit``): the value is then None. A child still running
    at ``deadline`` (a hang) is killed and reported with exit code None.
    """
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_call_and_send, args=(child, fn, args), daemon=True)
    proc.start()
    child.close()
    value = None
    answered = parent.poll(deadline)  # data, or end of file when the child died without a word
    if answered:
        with contextlib.suppress(EOFError):
            value = parent.recv()
        proc.join(deadline)
    parent.close()
    if not answered or proc.is_alive():
        kill(proc)
        return None, value
    return proc.exitcode, value


def _call_and_send(conn: Any, fn: Any, args: tuple[Any, ...]) -> None:
    torch.set_num_threads(1)
    try:
        value: Any = ("ok", fn(*args))
    except BaseException as err:
        value = ("error", type(err).__name__, str(err))
    conn.send(value)
    conn.close()


def crash_overwrite(prefix: str, where: str, after: int) -> None:
    """Save version 2 (8 rows) to ``prefix``, dying (``os._exit(17)``, no clean-up at all) at the
    ``after``-th call of the step ``where``; exit 0 if that call never comes."""
    from tensordict.memmap import io
    from tensordict.memmap import transaction as tx

    module, name = {
        "data": (io, "write_file"),
        "meta": (tx, "write_bytes"),
        "fsync": (os, "fsync"),
        "commit": (tx, "exchange"),
        "cleanup": (tx, "remove_tree"),
    }[where]
    real = getattr(module, name)
    calls = [0]

    def crash_after(*args: Any, **kwargs: Any) -> Any:
        if calls[0] == after:
            os._exit(17)
        calls[0] += 1
        return real(*args, **kwargs)

    setattr(module, name, crash_after)
    version(2, rows=8).memmap(prefix)
    os._exit(0)


def load_summary(prefix: str) -> str:
    """Load ``prefix``: ``"loaded"``, or raise (the child reports the error)."""
    from tensordict import TensorDict

    TensorDict.load_memmap(prefix)
    return "loaded"


def info(*argv: str) -> tuple[int, str, str]:
    """``python -m tensordict info ARGV``: (exit status, stdout, stderr)."""
    import io as stdio

    from tensordict.cli import main

    out, err = stdio.StringIO(), stdio.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["info", *argv])
    return status, out.getvalue(), err.getvalue()
