"""Workers that fail before their first chunk: how they report it, and what the parent says.

A worker started by ``spawn`` (or ``forkserver``) must import the user's ``fn`` and, with
``spawn``, the user's script. Three mistakes stop it there, before any chunk:

- ``fn`` cannot be imported: it was defined in a script read from stdin, in ``python -c`` or in
  a notebook, which a new process cannot import. The job's ``fn`` travels as bytes, unpickled by
  :func:`~tensordict.parallel.worker.worker_main` itself, which sends the error home
  (``("start_err", "import", exception, traceback)``) instead of dying in multiprocessing's
  bootstrap with a page of stdlib frames.
- The script starts workers at its top level, without an ``if __name__ == "__main__":`` guard:
  the spawned worker runs the script again while it bootstraps, and the script's own
  ``map_iter`` call lands in :func:`report_if_bootstrapping`. That worker's channel is already
  open (multiprocessing passes its descriptor under the same number, which the process name
  carries: :func:`worker_name`), so the report goes home on it and the worker exits quietly.
- The script was read from stdin (``python - < script.py``): its ``__main__`` has
  ``__file__ == "<stdin>"``, which a spawned worker would try to run as a file and die in
  multiprocessing's bootstrap. While such a worker starts, :func:`missing_main_hidden` hides
  that name, so the worker starts as from an interactive session: an ``fn`` defined in the script
  then fails to import, which it reports (above).
- Anything else that kills the worker before it says it is ready (:data:`STARTED`, its first
  message): the parent still says "failed before its first chunk", not "died while processing".

The parent turns a report (or a silent death before :data:`STARTED`) into
:class:`~tensordict.errors.WorkerStartError`: three lines (what failed, why, the fix), with the
worker's traceback as ``__cause__``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import re
import socket
import sys
import traceback
from collections.abc import Iterator
from typing import Any

from tensordict.errors import WorkerStartError
from tensordict.parallel.channel import Channel

__all__ = [
    "STARTED",
    "missing_main_hidden",
    "report_if_bootstrapping",
    "start_error",
    "start_method_context",
    "usable_cpus",
    "worker_name",
]

#: a worker's first message: it is set up and waits for chunks
STARTED = ("started",)

_NAME = re.compile(r"^tensordict-worker-\d+@fd(\d+)$")


def worker_name(wid: int, sock: socket.socket, start_method: str) -> str:
    """The process name of worker ``wid``; under ``spawn`` it carries the descriptor number of
    the worker's end of its channel (the same number in the worker), for
    :func:`report_if_bootstrapping`.

    Examples:
        >>> a, b = socket.socketpair()
        >>> worker_name(3, b, "fork")
        'tensordict-worker-3'
        >>> worker_name(3, b, "spawn") == f"tensordict-worker-3@fd{b.fileno()}"
        True
        >>> a.close(); b.close()
    """
    if start_method == "spawn":
        return f"tensordict-worker-{wid}@fd{sock.fileno()}"
    return f"tensordict-worker-{wid}"


@contextlib.contextmanager
def missing_main_hidden(start_method: str) -> Iterator[None]:
    """While a ``spawn`` or ``forkserver`` worker starts: hide ``__main__.__file__`` when it
    names no file.

    Examples:
        >>> import types
        >>> main, sys.modules["__main__"] = sys.modules["__main__"], types.ModuleType("__main__")
        >>> sys.modules["__main__"].__file__ = "<stdin>"
        >>> with missing_main_hidden("spawn"):
        ...     hasattr(sys.modules["__main__"], "__file__")
        False
        >>> sys.modules["__main__"].__file__, sys.modules.__setitem__("__main__", main)
        ('<stdin>', None)
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if start_method == "fork" or not isinstance(path, str) or os.path.isfile(path):
        yield
        return
    del main.__file__  # type: ignore[union-attr]
    try:
        yield
    finally:
        main.__file__ = path  # type: ignore[union-attr]


def report_if_bootstrapping() -> None:
    """In a worker still importing the user's script (``spawn``): report a missing main guard.

    Called where workers are about to be started. In a process that is bootstrapping (its
    parent's script is being run again, as ``__mp_main__``), starting workers is the missing-guard
    mistake: a worker of ours sends the traceback of this call home and exits; any other process
    returns, and multiprocessing raises its own error.
    """
    if not getattr(mp.current_process(), "_inheriting", False):
        return
    match = _NAME.match(mp.current_process().name)
    if match is None:
        return
    frames = traceback.extract_stack()[:-2]
    # from the user's script on: multiprocessing's bootstrap frames above it say nothing
    runpy = [i for i, f in enumerate(frames) if "runpy" in f.filename]
    text = "".join(traceback.format_list(frames[runpy[-1] + 1 if runpy else 0 :]))
    try:
        chan = Channel(socket.socket(fileno=int(match.group(1))))
        chan.send(("start_err", "main_guard", None, text), plain=True)
        chan.close()
    finally:
        os._exit(1)


_CAUSES = {
    "main_guard": (
        "the script starts workers at its top level, without an "
        '`if __name__ == "__main__":` guard.',
        "Workers started by {method!r} run the script again to import it, and would start "
        "workers of their own; the worker's traceback (the __cause__) shows the line.",
        'Fix: move the code that calls map/map_iter under `if __name__ == "__main__":` (fn '
        'stays at the top level), or pass mp_start_method="fork".',
    ),
    "import": (
        "it could not import fn ({error}).",
        "Workers started by {method!r} import fn by its module and name; a function defined in "
        "a script read from stdin, in `python -c` or in a notebook cannot be imported.",
        "Fix: define fn in a module or a script file and run that (`python script.py`), or pass "
        'mp_start_method="fork".',
    ),
    None: (
        "it exited {exit} before it was ready to run fn.",
        "Workers started by {method!r} import your script and fn first; whatever stopped it "
        "was printed above by the worker (standard error).",
        "Fix: run the script as a file with map/map_iter under "
        '`if __name__ == "__main__":`, or pass mp_start_method="fork".',
    ),
}


def start_error(
    wid: int,
    pid: int | None,
    method: str,
    exit: str,
    report: tuple[Any, ...] | None = None,
) -> WorkerStartError:
    """The error for worker ``wid`` that failed before its first chunk (the caller attaches the
    worker's traceback, ``report[3]``, as ``__cause__``).

    Args:
        wid: the worker's id.
        pid: its process id.
        method: its start method.
        exit: how it exited, in words (``engine.exit_description``).
        report: the worker's ``("start_err", kind, exception or None, traceback text)``, or
            None when it died without one.

    Examples:
        >>> err = start_error(0, 42, "spawn", "with exit code 1")
        >>> print(err)
        worker 0 (pid 42) failed before its first chunk: it exited with exit code 1 before it was ready to run fn.
        Workers started by 'spawn' import your script and fn first; whatever stopped it was printed above by the worker (standard error).
        Fix: run the script as a file with map/map_iter under `if __name__ == "__main__":`, or pass mp_start_method="fork".
    """  # noqa: E501
    kind, exc, text = (report[1], report[2], report[3]) if report is not None else (None, None, "")
    if kind not in _CAUSES:
        kind = "import"
    if exc is not None:
        error = f"{type(exc).__name__}: {exc}"
    else:
        lines = text.strip().splitlines()
        error = lines[-1] if lines else "unknown error"
    what, why, fix = (line.format(method=method, exit=exit, error=error) for line in _CAUSES[kind])
    return WorkerStartError(
        f"worker {wid} (pid {pid}) failed before its first chunk: {what}\n{why}\n{fix}",
        chunk=None,
        pid=pid,
    )


def start_method_context(method: str | None) -> Any:
    """The multiprocessing context of ``method`` (None: the default start method)."""
    if method is None:
        method = mp.get_start_method(allow_none=False)
    if method not in mp.get_all_start_methods():
        raise ValueError(
            f"mp_start_method={method!r} is not available here; choose one of "
            f"{mp.get_all_start_methods()}."
        )
    return mp.get_context(method)


def usable_cpus() -> int:
    """The number of CPUs this process may run on (CPU affinity respected)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
