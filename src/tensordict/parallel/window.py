"""The window behind ``map_iter``: which chunks go out when, and results back in order.

:func:`drive` runs a call's chunks through a :class:`Backend` (the pool ``map_iter`` starts,
``engine.OwnPool``; a ``WorkerPool``; a stdlib or Ray pool, ``pools`` and ``ray_pool``): at most
``window`` chunks sent and not yet yielded (deeper while chunks are tiny or their answers are
held, as the backend says), results yielded in chunk order unless shuffled, an error in ``fn``
raised where its chunk would have been yielded. It also measures the pace of the results (the
seconds between two), from which the backend decides whether chunks are tiny and whether its
workers may hold answers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from tensordict.parallel.coalesce import MAX_HELD
from tensordict.parallel.worker import decode_error

__all__ = ["FIRST_PACE_SECONDS", "TINY_CHUNK_SECONDS", "TINY_RUN", "Backend", "Event", "drive"]

#: results arriving faster than this are "tiny chunks": the window is refilled in batches
TINY_CHUNK_SECONDS = 200e-6
#: the pace (seconds between results) assumed until results came in two waits, when the rate
#: they come at is measured: slow chunks (one task per message), as close to
#: TINY_CHUNK_SECONDS as that (tiny chunks once took ~90 results to be recognised from 1 s,
#: each a round trip of its own: ~10-20 ms per call)
FIRST_PACE_SECONDS = 2 * TINY_CHUNK_SECONDS
#: the rate results come at is measured over this many waits that brought some (at most)
PACE_WAITS = 16

#: tiny chunks are handed to a worker in runs this long, its results come back as many at once
TINY_RUN = MAX_HELD


Event = tuple[Any, ...]


class Backend:
    """What :func:`drive` needs from a pool (own workers, a stdlib pool, a Ray pool)."""

    num_workers: int
    #: set by :func:`drive` while chunks are tiny: a backend may then queue more chunks per
    #: worker (see :meth:`tiny_depth`)
    tiny: bool = False
    #: set by :func:`drive` before each :meth:`submit`: the chunks not sent yet (a backend that
    #: hands out runs of chunks shortens them near the end, so that the workers finish together)
    left: int = 0
    #: set by :func:`drive`: the seconds between results (the rate they come at, or the
    #: consumer's if it keeps each longer)
    pace: float = 1.0

    def hold_depth(self) -> int:
        """Chunks per worker the backend queues now while chunks are not tiny (2: no deeper; more
        while its workers hold results to send several at once)."""
        return 2

    def tiny_depth(self) -> int:
        """Chunks per worker the backend queues now while chunks are tiny (2: no deeper)."""
        return 2

    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        """Send the first chunks of ``ks`` the pool can take now (``payload(k)`` is built only for
        those); returns how many were taken."""
        raise NotImplementedError

    def wait(self) -> list[Event]:
        """Block until at least one event: ``("ok", k, result)``, ``("oks", ks, results)`` (several
        at once), ``("err", k, exc, text)``, or
        another event (ignored) after which :meth:`submit` may take more."""
        raise NotImplementedError

    def close(self, abort: bool) -> None:
        raise NotImplementedError

    def where(self, k: int) -> str:
        """Where chunk ``k`` ran, for error notes."""
        return "a worker"


class _Failed:
    """An error in ``fn`` waiting for its turn to be raised (results come in chunk order)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_NOTHING: Any = object()


def drive(
    backend: Backend,
    count: int,
    payload: Callable[[int], Any],
    window: int,
    ordered: bool,
    on_yield: Callable[[], None] | None = None,
) -> Iterator[Any]:
    """Run ``count`` chunks through ``backend``, at most ``window`` sent and not yet yielded.

    In order, an error in ``fn`` is raised where its chunk would have been yielded (the results
    before it are yielded first) and no chunk after it is sent; unordered, it is raised at once.
    """
    next_k = in_flight = yielded = 0
    stop_at = count
    pending: dict[int, Any] = {}
    ready: deque[Any] = deque()
    # Tiny chunks: refill in batches (runs of TINY_RUN consecutive chunks per worker) so each
    # message carries several tasks, and (small results only) let the window grow to
    # backend.tiny_depth() chunks per worker. Large chunks: refill after every result, so no
    # worker's queue runs dry.
    shallow_batch = max(1, min(backend.num_workers, window // 2))
    # the seconds between results: the slower of how fast they come (over the last PACE_WAITS
    # waits that brought some, from the first one on: it waits for the workers to start) and
    # how long the consumer keeps each (a moving average). Results that come several at once
    # (held answers, runs of tiny chunks) count at the rate they were made: a moving average of
    # the time between two yields made chunks of 2 ms look tiny after each batch of answers.
    pace = made = FIRST_PACE_SECONDS
    kept = 0.0
    arrivals: deque[tuple[float, int]] = deque(maxlen=PACE_WAITS)  # (when, results by then)
    received = 0
    # the window's limit when the backend last took fewer chunks than it was offered: its
    # workers are full, and stay so until it reports events (or the limit changes), so it is
    # not offered more meanwhile (each offer costs ~20-40 us, cold, after every result yielded)
    full_at = -1
    while yielded < count:
        tiny = backend.tiny = pace <= TINY_CHUNK_SECONDS
        backend.pace = pace
        limit, batch = window, shallow_batch
        if tiny:
            depth = backend.tiny_depth()
            if depth > 2:
                limit = window * depth // 2
                batch = max(1, min(max(backend.num_workers * 4, TINY_RUN), limit // 2))
        else:
            depth = backend.hold_depth()
            if depth > 2:  # results held by the workers: refill a few chunks at a time
                limit = window * depth // 2
                batch = max(1, limit // 4)
        batched = tiny or limit > window
        room = min(limit - in_flight, stop_at - next_k)
        if (
            room > 0
            and limit != full_at
            and (not batched or room >= batch or next_k + room == stop_at or not in_flight)
        ):
            backend.left = stop_at - next_k
            taken = backend.submit(range(next_k, next_k + room), payload)
            next_k += taken
            in_flight += taken
            full_at = limit if taken < room else -1
        # Yield the results that are ready, until the window has room to send more: after each
        # result for large chunks, once a whole batch fits (or all that is left) for tiny ones.
        if next_k >= stop_at:
            refill_at = -1  # nothing left to send
        elif batched:
            refill_at = max(limit - batch, limit - (stop_at - next_k))
        else:
            refill_at = limit - 1
        streak = 0
        while True:
            if ordered:
                result = pending.pop(yielded, _NOTHING)
            elif ready:
                result = ready.popleft()
            else:
                break
            if result is _NOTHING:
                break
            if result.__class__ is _Failed:
                raise result.error
            yielded += 1
            in_flight -= 1
            streak += 1
            if on_yield is not None:
                on_yield()
            handed = time.perf_counter()
            yield result
            kept = 0.9 * kept + 0.1 * (time.perf_counter() - handed)
            pace = made if made > kept else kept
            if in_flight <= refill_at:
                break
        if streak or yielded >= count:
            continue
        came = 0
        full_at = -1  # events: workers may have room again
        for event in backend.wait():
            if event[0] == "oks":  # several results at once (tiny chunks)
                if ordered:
                    pending.update(zip(event[1], event[2]))
                else:
                    ready.extend(event[2])
                came += len(event[1])
                continue
            if event[0] == "ok":
                value = event[2]
            elif event[0] == "err":
                _, k, exc, text = event
                value = _Failed(
                    decode_error(exc, text, f"raised by fn on chunk {k} in {backend.where(k)}")
                )
                if not ordered:
                    raise value.error
                stop_at = min(stop_at, k + 1)
            else:
                continue  # e.g. a worker retired: capacity changed, submit again
            if ordered:
                pending[event[1]] = value
            else:
                ready.append(value)
            came += 1
        if came:
            now = time.perf_counter()
            received += came
            arrivals.append((now, received))
            if len(arrivals) > 1:
                since, before = arrivals[0]
                made = (now - since) / (received - before)
                pace = made if made > kept else kept
