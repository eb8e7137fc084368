"""``WorkerPool``: worker processes that serve many ``map_iter`` / ``map`` calls (epochs).

The pool is the engine's own (:class:`~tensordict.parallel.engine.OwnPool`), kept open between
calls: each call sends its job (``fn``, the source by reference, the chunk plan) to every worker
before its first chunk, then runs exactly as a call with its own pool (bounded window, results in
order, errors re-raised at their place, a dead worker reported at once). What changes:

- ending a call early (``break``, ``close()``, an error, a dead worker) does not stop the other
  workers: the chunks they still hold finish in the background and their results are dropped
  when they arrive, so the next call starts at once and a worker holding such a chunk serves
  it only afterwards;
- a worker that died is replaced (new id and seed) when the next call starts;
- workers keep their memory mappings of a memory-mapped source from one call to the next (no
  page is faulted again), and see the files as they are now: a file rewritten in place is read
  through the same shared mapping, a file replaced (or another tensordict) is mapped anew.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any

import torch

from tensordict.errors import PoolBusyError, PoolClosedError
from tensordict.parallel.arguments import capped_workers, check_count, check_generator
from tensordict.parallel.engine import OwnPool
from tensordict.parallel.lifeline import check_can_start_workers, sigint_held
from tensordict.parallel.startup import start_method_context, usable_cpus
from tensordict.parallel.window import Backend, Event

__all__ = ["WorkerPool"]


class WorkerPool:
    """Worker processes kept across ``map_iter`` / ``map`` calls, like DataLoader's
    ``persistent_workers=True``: pass it as ``pool=``.

    Workers start on the first call (one at a time, so the first chunk is not delayed) and run
    until :meth:`close` (or the end of a ``with`` block, or interpreter exit; they also die with
    this process however it dies). A call keeps every guarantee of the pool ``map_iter`` creates:
    at most ``2 * num_workers`` chunks in flight (``16 *`` or ``256 *`` for tiny chunks, ``36 *``
    for chunks of milliseconds with results of at most 1 MiB), results
    in order, an error in ``fn`` re-raised at its place with the worker's traceback, and
    :class:`~tensordict.errors.WorkerDiedError` the moment a worker dies holding a chunk. Ending
    a call early (``break``, an error, a dead worker) leaves the pool usable: the next call
    starts at once, chunks the workers still hold from the earlier call finish first and their
    results are dropped, and a dead worker is replaced by a new one (next id, seed ``base + id``).
    One call at a time: a second call while the first is still open raises
    :class:`~tensordict.errors.PoolBusyError`.

    Seeding: each worker is seeded once, when it starts: torch with ``base + id`` (``base`` drawn
    from ``generator`` when the pool is created), NumPy and ``random`` from both, as ``map_iter``
    does. Its random state then carries over from call to call, as with DataLoader's persistent
    workers: each epoch draws new numbers, and a call's ``generator`` is ignored. For draws that
    are the same on every run whatever worker runs a chunk, pass ``seed_per_chunk=True`` (and a
    ``generator``) to the call.

    Sources: a memory-mapped tensordict (or a file-backed one) is sent by reference; workers
    keep their mappings of its files from call to call, and always read the files as they are
    at the call (a file rewritten or replaced between calls is never read stale). Any other
    source is sent chunk by chunk (its rows travel to the workers), since the workers were not
    forked from it.

    Args:
        num_workers: the number of worker processes; None for one per CPU this process may run
            on. At most 4 per such CPU: more warns (``WorkerCountWarning``) and starts that many.
        generator: the base seed is drawn from it; None draws it from the global torch RNG
            (DataLoader's behaviour), advancing it by one draw.
        worker_threads: ``torch.set_num_threads`` in each worker.
        max_tasks_per_child: replace a worker after that many chunks, counted across calls.
        mp_start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"``; None for the default.

    Raises:
        TypeError: a count that is not an int, a generator that is not a ``torch.Generator``.
        ValueError: a count below 1, or a start method not available here.
        NestedWorkersError: created inside a daemonic process.

    Examples:
        >>> import operator
        >>> from tensordict import TensorDict
        >>> from tensordict.parallel import WorkerPool
        >>> td = TensorDict({"x": torch.arange(4.0)}, batch_size=[4])
        >>> with WorkerPool(2, generator=torch.Generator().manual_seed(0)) as pool:
        ...     for epoch in range(2):
        ...         print([out["x"].tolist() for out in td.map_iter(
        ...             operator.neg, chunksize=2, pool=pool)])
        [[-0.0, -1.0], [-2.0, -3.0]]
        [[-0.0, -1.0], [-2.0, -3.0]]
    """

    def __init__(
        self,
        num_workers: int | None = None,
        *,
        generator: torch.Generator | None = None,
        worker_threads: int = 1,
        max_tasks_per_child: int | None = None,
        mp_start_method: str | None = None,
    ) -> None:
        check_count("num_workers", num_workers, 1)
        check_count("worker_threads", worker_threads, 1, none_ok=False)
        check_count("max_tasks_per_child", max_tasks_per_child, 1)
        check_generator(generator)
        check_can_start_workers()
        ctx = start_method_context(mp_start_method)
        if generator is None:
            generator = torch.default_generator
        base_seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator))
        count = capped_workers(num_workers, usable_cpus())  # as map_iter: never 64 on 2 CPUs
        self._pool = OwnPool(ctx, count, None, base_seed, worker_threads, max_tasks_per_child)
        self._in_call = False
        self._finalizer = weakref.finalize(self, _shutdown, self._pool)

    @property
    def num_workers(self) -> int:
        """The number of worker processes."""
        return self._pool.num_workers

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._pool.closed

    def close(self) -> None:
        """Stop the workers (at once if they still hold chunks); the pool cannot be used again.

        Calling it again does nothing.
        """
        self._finalizer()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._pool.workers)} running"
        return f"WorkerPool(num_workers={self.num_workers}, {state})"

    def _start_call(self, job: dict[str, Any]) -> Backend:
        """The backend of one call (called when the call's iterator starts)."""
        if self.closed:
            raise PoolClosedError(
                "this WorkerPool was closed: create a new one (or call map_iter without pool=)."
            )
        if self._in_call:
            raise PoolBusyError(
                "this WorkerPool is running another map_iter/map call, whose iterator is still "
                "open: exhaust it or call its close() first, or use a second pool."
            )
        self._in_call = True
        try:
            self._pool.begin(job)
        except BaseException:
            self._in_call = False
            raise
        return _Call(self)

    def _end_call(self) -> None:
        try:
            if not self._pool.closed:
                self._pool.end_call()
        finally:
            self._in_call = False


def _shutdown(pool: OwnPool) -> None:
    pool.close(abort=pool.busy)


class _Call(Backend):
    """One call on a :class:`WorkerPool`: the pool's workers, closed without stopping them."""

    def __init__(self, owner: WorkerPool) -> None:
        self.owner = owner
        self.pool = owner._pool
        self.num_workers = self.pool.num_workers
        self.done = False

    def _check_open(self) -> None:
        if self.pool.closed:
            raise PoolClosedError(
                "the WorkerPool was closed while this map_iter call was running: its workers "
                "are gone and the remaining chunks were cancelled. Close the pool after the loop."
            )

    @property  # type: ignore[override]
    def tiny(self) -> bool:
        return self.pool.tiny

    @tiny.setter
    def tiny(self, value: bool) -> None:
        self.pool.tiny = value

    @property  # type: ignore[override]
    def pace(self) -> float:
        return self.pool.pace

    @pace.setter
    def pace(self, value: float) -> None:
        self.pool.pace = value

    def tiny_depth(self) -> int:
        return self.pool.tiny_depth()

    def hold_depth(self) -> int:
        return self.pool.hold_depth()

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        self._check_open()
        self.pool.left = self.left
        return self.pool.submit(ks, payload)

    def wait(self) -> list[Event]:
        self._check_open()
        return self.pool.wait()

    def where(self, k: int) -> str:
        return self.pool.where(k)

    def close(self, abort: bool) -> None:
        if self.done:
            return
        with sigint_held():  # a Ctrl-C meanwhile would leave the pool busy with this call
            with contextlib.suppress(Exception):
                self.owner._end_call()
            self.done = True
