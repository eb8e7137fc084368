"""Held answers: chunks of milliseconds send their answers several per message.

Each wake-up of the parent on 2 busy cores takes a core from a worker for ~0.1-0.2 ms (its code
runs from cold caches after a chunk's data went through them), a tenth of a chunk of ~2 ms. So
while results are small and come fast, the parent sends tasks as ``(HOLD_TAG, [(k, payload),
...])`` and the worker holds the answers back (:class:`HeldAnswers`) to send several at once.

- The parent's side, :class:`HoldPolicy`: when to ask for it (results of at most
  :data:`HOLD_BYTES` coming less than :data:`HOLD_PACE_SECONDS` apart, and a parent that mostly
  finds nothing ready when it waits, so not a slow consumer; that average carries over from
  call to call of a persistent pool, the results' size does not), and how many chunks a worker
  may then hold (:data:`HOLD_DEPTH`, :data:`HOLD_DEPTH_CARRYING` when tasks carry their rows),
  and how many of the last chunks are kept back for whichever worker runs dry
  (:data:`HOLD_TAIL`).
- The worker's side, :class:`HeldAnswers`: each answer is encoded (its result copied out, so
  ``fn``'s buffers are free) as its chunk ends; the held answers go in one message at
  :data:`HOLD_MAX`, :data:`HOLD_AGE_SECONDS` after the first, before the worker waits for work
  or starts its last chunk in hand, and before any other message.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HOLD_TAG", "HOLD_TAIL", "HOLD_TAIL_RUN", "HeldAnswers", "HoldPolicy"]

#: the tag of a task message whose answers may be held: ``(HOLD_TAG, [(k, payload), ...])``
HOLD_TAG = "hold"
#: answers held at most (:class:`HeldAnswers`): 16 rather than 8 wakes the parent every ~12
#: chunks instead of ~6 (2 workers, 16 MiB chunks of ~2 ms; measured in the parent's reads)
HOLD_MAX = 16
#: an answer is held at most this long (checked as each chunk ends): 16 chunks of ~2 ms
HOLD_AGE_SECONDS = 40e-3
#: results that come less than this far apart (moving average, all workers) and hold at most
#: HOLD_BYTES may be held by their worker: a wake-up of the parent per result costs ~0.1-0.2 ms
#: of a core the workers need
HOLD_PACE_SECONDS = 5e-3
HOLD_BYTES = 1 << 20
#: chunks queued per worker while results are held (at most HOLD_DEPTH x HOLD_BYTES each).
#: Results are yielded in order, so a worker's batch of HOLD_MAX answers waits, unyielded, for
#: the other workers' answers to the chunks between, which are still held: the workers' batches
#: drift up to a whole batch apart (chunks of one call take longer on one core than the other).
#: A worker then needs a batch held, another batch to run while the others' batches come, and a
#: few chunks in hand while the parent refills. With HOLD_MAX + 4 (20), each 2 GiB epoch of the
#: steady reduce had three stalls of 0.3-2.5 ms per worker, waiting for the window to move
HOLD_DEPTH = 2 * HOLD_MAX + 4
#: the last chunks of a call are kept back, this many per worker, while answers are held: each
#: goes to a worker about to run dry, :data:`HOLD_TAIL_RUN` at a time, so that the workers finish
#: together. Sent as the others are, k to worker k % N, they were committed ~36 chunks ahead,
#: and a worker whose core also runs the parent (or a neighbour) finished 3-4 chunks of ~2 ms
#: after the other one: 5-8 ms per 2 GiB epoch of the steady reduce in which one core idled.
#: Either worker may then meet a chunk of the tail: it maps its pages once (a memory-mapped
#: source: ~360 faults per epoch in the first epochs, ~10-30 after)
HOLD_TAIL = 6
#: chunks a worker gets at once from the kept-back tail: with 2 it has one in hand while its
#: answers travel (it sends them as it starts its last chunk), with 1 it would wait for the parent
HOLD_TAIL_RUN = 2
#: the same when each task carries its chunk's rows (a source the workers cannot read
#: themselves): those rows wait in memory until their chunk runs, so the queue stays shorter
HOLD_DEPTH_CARRYING = 12
#: results are held only while the parent finds none ready in enough of its waits (a moving
#: average with this decay, at least HOLD_STARVED divided by the number of workers: from the
#: start, 7 waits in a row with 1 worker, 3 with 2): a slow consumer, who finds results ready every
#: time, keeps the window at 2 chunks per worker. The share is per worker because the held
#: answers of N workers come in N messages close together: a consumer as fast as can be
#: blocks for the first and finds the others ready, so finds results in up to (N - 1) / N of
#: its waits (half of them with 2 workers, where a fixed 0.5 turned holding off every other
#: wait: four answers of each 2 GiB epoch then came one per message, each waking the parent)
HOLD_DECAY = 0.9
HOLD_STARVED = 0.5


class HoldPolicy:
    """The parent's side: whether its workers may hold answers now, from what it has seen.

    Args:
        workers: the number of workers (see :data:`HOLD_STARVED`).

    Examples:
        >>> policy = HoldPolicy(workers=2)
        >>> policy.result(64 << 10, ok=True)  # a 64 KiB result
        >>> for _ in range(4):
        ...     policy.waited(found=False)  # the parent waits for the workers
        >>> policy.holding(tiny=False, pace=2e-3), policy.depth(tiny=False, pace=2e-3)
        (True, 36)
        >>> policy.holding(tiny=False, pace=0.1)  # results come too far apart
        False
    """

    __slots__ = ("carrying", "holdable", "starved", "threshold")

    def __init__(self, workers: int = 1) -> None:
        #: the share of waits that must find nothing ready (see :data:`HOLD_STARVED`)
        self.threshold = HOLD_STARVED / max(1, workers)
        #: the last tasks sent carried their chunks' rows (see HOLD_DEPTH_CARRYING)
        self.carrying = False
        #: the last result held at most HOLD_BYTES (and was not an error)
        self.holdable = False
        #: moving average of whether a wait found nothing ready (1) or a result (0): the
        #: workers, not the consumer, set the pace
        self.starved = 0.0

    def new_call(self) -> None:
        """A new call of a persistent pool: its results' size is not known yet (no answer is
        held before one came), while the pace of the waits carries over. Epochs of the same
        loop then hold answers from their second result on, where starting from scratch left
        ~10 chunks of each epoch unheld, each waking the parent (a slow consumer still brings
        ``starved`` down within ~7 waits)."""
        self.holdable = False

    def waited(self, found: bool) -> None:
        """Record a look for results before blocking: ``found`` some ready, or not."""
        self.starved = HOLD_DECAY * self.starved + (0.0 if found else 1.0 - HOLD_DECAY)

    def result(self, oob_bytes: int, ok: bool) -> None:
        """Record a result that came on its own, of ``oob_bytes`` bytes out of band."""
        self.holdable = ok and oob_bytes <= HOLD_BYTES

    def holding(self, tiny: bool, pace: float) -> bool:
        """Whether workers may hold answers now: chunks that are not tiny but come less than
        HOLD_PACE_SECONDS apart (``pace``), results of at most HOLD_BYTES, a starved parent."""
        return (
            self.starved >= self.threshold
            and self.holdable
            and not tiny
            and pace <= HOLD_PACE_SECONDS
        )

    def depth(self, tiny: bool, pace: float) -> int:
        """Chunks per worker while chunks are not tiny: HOLD_DEPTH while holding (or
        HOLD_DEPTH_CARRYING), else 2."""
        if not self.holding(tiny, pace):
            return 2
        return HOLD_DEPTH_CARRYING if self.carrying else HOLD_DEPTH


class HeldAnswers:
    """The worker's side: encoded answers (their results already copied out) held back so that
    several travel in one message and wake the parent once (see the module's docstring)."""

    __slots__ = ("messages", "since")

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.since = 0.0

    def __len__(self) -> int:
        return len(self.messages)

    def add(self, encoded: Any, now: float) -> bool:
        """Hold one encoded answer; True when the held ones should be sent now."""
        if not self.messages:
            self.since = now
        self.messages.append(encoded)
        return len(self.messages) >= HOLD_MAX or now - self.since >= HOLD_AGE_SECONDS

    def send(self, chan: Any) -> None:
        """Send the held answers (one system call) and forget them."""
        if self.messages:
            messages, self.messages = self.messages, []
            chan.send_encoded(messages)
