"""The pool ``map_iter`` starts (:class:`OwnPool`): its worker processes and their channels, the
tasks each worker gets, a dead worker noticed at once, and shutdown. Which chunks go out when,
and the results' order, are :func:`~tensordict.parallel.window.drive`'s, for every pool.

Data flow (pool created by the call)::

    parent (this module, window.drive)            workers (worker.worker_main), N processes
    plan: chunk k -> index (slice | int | perm)   start: ignore SIGINT, close inherited parent ends,
    window: <= 2N chunks sent and not yet yielded        set threads, seed (base + id), set info
      (16N while results are small and fast,
       256N while they travel several per message,
       36N while chunks of ms hold their answers,
       the last 6N then to whichever runs dry)
       send [(k, index)] --- socketpair (Channel) -->  chunk = source[index] (source inherited
         or ("tiny", run of chunks)                     by fork, or mapped once from its files)
       select(channels + process sentinels) <------    ("ok", k, fn(chunk)) small inline,
                                                        large buffers through one memfd;
                                                        tiny chunks: several results at once
                                                        (``coalesce``); chunks of ms: up to 16
                                                        answers per message (``held``)
       reorder (unless shuffle) -> yield result k      ("err", k, exception, traceback text)

A worker's sentinel becomes readable the moment it dies: its channel is drained (results it sent
before dying are kept) and, if it still held chunks, :class:`~tensordict.errors.WorkerDiedError`
names the first of them (the first chunk it had not delivered), the pid and the exit code or
signal. A worker that used up its ``max_tasks_per_child`` quota exits cleanly and is replaced
with a new id and seed.

Shutdown protocol (the generator's ``finally``, so ``break``, ``close()``, garbage collection,
KeyboardInterrupt and errors all take it):

1. stop sending; results received but not yielded are dropped;
2. all chunks done: close the channels, so that the workers read end-of-stream and exit, and
   return: ``reaper`` joins them in the background (SIGKILL after the deadline);
   otherwise: SIGTERM every worker at once (they may be inside ``fn``);
3. join each worker against a shared deadline, SIGKILL what is left, join again;
4. close every channel: memfds still in flight are released with them.

The same close runs at interpreter exit for a generator still open (before ``multiprocessing``
joins its children), and workers die with this process however it dies (see ``lifeline``). No
queue, semaphore or named shared memory is created, so nothing else can leak.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tensordict.errors import WorkerDiedError
from tensordict.parallel.channel import SPIN_SECONDS, Channel
from tensordict.parallel.coalesce import BATCH_TAG
from tensordict.parallel.held import HOLD_TAG, HOLD_TAIL, HOLD_TAIL_RUN, HoldPolicy
from tensordict.parallel.lifeline import Lifeline, close_at_exit, sigint_held, untrack_process
from tensordict.parallel.reaper import reap_later
from tensordict.parallel.shm import STOCK
from tensordict.parallel.startup import STARTED, missing_main_hidden, start_error, worker_name
from tensordict.parallel.window import TINY_RUN, Backend, Event
from tensordict.parallel.worker import RemoteTraceback, worker_main

__all__ = ["OwnPool", "exit_description"]

#: how long shutdown waits for workers to exit before killing them
SHUTDOWN_SECONDS = 1.5
#: how long it then waits for the kernel to finish a killed worker (instant unless overloaded)
KILLED_SECONDS = 5.0
#: chunks queued per worker while chunks are tiny and their results small (inline, < 64 KiB):
#: with 2 per worker, every few chunks a process blocks and must be woken, and on a loaded
#: machine each wake-up waits for the scheduler (~1 ms): 2,600 chunks/s where the bare processes
#: ran 25,000/s. A deeper queue lets each process run many chunks per time slice; it holds at
#: most 16 x 64 KiB of results per worker, and one slow result (a slow consumer) shrinks it back.
TINY_DEPTH = 16
#: chunks queued per worker while tiny chunks' results are under 4 KiB and travel several per
#: message (``coalesce``): at most 256 x 4 KiB of results per worker. Deep enough that a worker
#: holds several runs when it sends one, so it need not wait for the parent to wake up (which
#: takes ~1 ms on a loaded machine, and longer while results wait for an earlier chunk to be
#: yielded in order) before it runs the next chunk.
TINY_BATCH_DEPTH = 256
#: results at least this large are queued one per worker instead of two, so that results
#: waiting for a slow consumer stay bounded in bytes (chunks that big take milliseconds, so the
#: shorter queue costs no throughput)
LARGE_RESULT_BYTES = 4 << 20
#: warm result segments of earlier calls handed to each new forked worker (``shm.STOCK``)
WARM_PER_WORKER = 4


def exit_description(exitcode: int | None) -> str:
    if exitcode is None:
        return "with an unknown exit status"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (e.g. the OOM killer or kill -9)" if -exitcode == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"with exit code {exitcode}"


class _Worker:
    __slots__ = (
        "_pidfd",
        "assigned",
        "chan",
        "coalescing",
        "id",
        "job_gen",
        "process",
        "quota",
        "stale",
        "started",
        "watching_writes",
    )

    def __init__(self, wid: int, process: Any, chan: Channel, quota: int | None) -> None:
        self.id = wid
        self.process = process
        self.chan = chan
        self.assigned: deque[int] = deque()
        self.quota = quota
        self.watching_writes = False
        #: whether chunks it holds were sent as tiny runs (it may hold results back)
        self.coalescing = False
        #: chunks of an earlier call (closed early) the worker still answers: their results are
        #: dropped, in the order they come (a worker answers its chunks in the order sent)
        self.stale = 0
        #: the call whose job this worker has (persistent pools)
        self.job_gen = 0
        #: the worker said it is ready (``startup.STARTED``): a death from now on is a chunk's
        self.started = False
        # A pidfd becomes readable when the process itself exits; the multiprocessing sentinel
        # only when every holder of its pipe has, which a grandchild started by fn delays.
        try:
            self._pidfd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):  # not Linux >= 5.3: the sentinel will do
            self._pidfd = None

    @property
    def exit_fd(self) -> int:
        """A descriptor that becomes readable when the worker process exits."""
        return self._pidfd if self._pidfd is not None else int(self.process.sentinel)

    def close_process(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        with contextlib.suppress(ValueError, AttributeError):
            self.process.close()  # its sentinel and pipes


class OwnPool(Backend):
    """Worker processes started for one ``map_iter`` call, or kept for many (``job=None``).

    A persistent pool (``parallel.WorkerPool``) starts its workers without a job: each call
    (:meth:`begin` ... :meth:`end_call`) sends its job to every worker before its first chunk, and
    :meth:`close` stops the workers for good.

    Args:
        ctx: the multiprocessing context (start method).
        num_workers: the number of workers.
        job: what every worker needs (fn, source or pre-split chunks, dim, ...).
        base_seed: torch seed of worker 0 (worker ``i`` gets ``base_seed + i``).
        threads: ``torch.set_num_threads`` in each worker.
        max_tasks: chunks per worker before it is replaced (None: no limit).
        depth: chunks queued per worker.
    """

    def __init__(
        self,
        ctx: Any,
        num_workers: int,
        job: dict[str, Any] | None,
        base_seed: int | None,
        threads: int,
        max_tasks: int | None,
        depth: int = 2,
    ) -> None:
        self.ctx = ctx
        self.num_workers = num_workers
        self.fork = ctx.get_start_method() == "fork"
        if job is not None and not self.fork and "fn" in job:
            # fn travels as bytes that the worker unpickles itself: if it cannot import fn, it
            # says so (``startup``) instead of dying inside multiprocessing's bootstrap
            fn_bytes = pickle.dumps(job["fn"])
            job = {k: v for k, v in job.items() if k != "fn"} | {"fn_bytes": fn_bytes}
        self.job = job
        self.base_seed = base_seed
        self.threads = threads
        self.max_tasks = max_tasks
        self.depth = depth
        self.owner = os.getpid()
        self.selector = selectors.DefaultSelector()
        self.workers: dict[int, _Worker] = {}
        #: where chunks that failed ran (for error notes)
        self.where_ran: dict[int, str] = {}
        #: workers retired by max_tasks_per_child whose process has not exited yet
        self.retiring: list[_Worker] = []
        self.next_id = 0
        self.large_results = False
        #: the last result travelled inline (< 64 KiB): tiny chunks may queue deeper
        self.small_results = False
        #: the last results came several per message (``coalesce``): deeper still
        self.batched_results = False
        #: whether the workers may hold answers to send several at once (``held``)
        self.hold = HoldPolicy(num_workers)
        self.closed = False
        #: persistent pools: the current call's number, and its job message
        self.gen = 0
        self.job_msg: tuple[str, bytes] | None = None
        close_at_exit(self)
        # Workers are started by the first submit(), one at a time: the first one receives its
        # chunk before the next is forked, so the first result is not delayed by the others.

    # ------------------------------------------------------------------ workers
    def _start_worker(self) -> _Worker:
        wid = self.next_id
        self.next_id += 1
        parent_end, child_end = socket.socketpair()
        inherited = [w.chan.fileno() for w in self.workers.values()] + [parent_end.fileno()]
        # warm result segments of earlier calls: a forked worker inherits their mapping
        share = -(-len(STOCK) // max(1, self.num_workers - len(self.workers)))
        warm = STOCK.take(min(share, WARM_PER_WORKER)) if self.fork else []
        process = self.ctx.Process(
            target=worker_main,
            args=(
                child_end,
                wid,
                self.num_workers,
                self.base_seed,
                self.threads,
                self.job,
                self.max_tasks,
                inherited if self.fork else [],
                Lifeline(self.ctx.get_start_method()),
                warm,
            ),
            name=worker_name(wid, child_end, self.ctx.get_start_method()),
            daemon=False,  # so that fn may start its own workers (see lifeline)
        )
        # a Ctrl-C during the fork is delivered once the worker is registered (stopped with
        # the others), never inside a fork hook that would drop it
        with sigint_held(), missing_main_hidden(self.ctx.get_start_method()):
            process.start()
            untrack_process(process)  # (freed later without a weakref callback: see lifeline)
            child_end.close()
            worker = _Worker(wid, process, Channel(parent_end, recv_warm=warm), self.max_tasks)
            self.workers[wid] = worker
            self.selector.register(worker.chan.sock, selectors.EVENT_READ, ("chan", worker))
            self.selector.register(worker.exit_fd, selectors.EVENT_READ, ("exit", worker))
        return worker

    def _reap_retired(self) -> None:
        """Release the processes of retired workers that have exited since."""
        for w in [w for w in self.retiring if w.process.exitcode is not None]:
            self.retiring.remove(w)
            w.close_process()

    def where(self, k: int) -> str:
        return self.where_ran.get(k, "a worker")

    # ------------------------------------------------------------------ tasks
    def submit(self, ks: range, payload: Callable[[int], Any]) -> int:
        if self.retiring:
            self._reap_retired()
        batches: dict[int, list[tuple[int, Any]]] = {}
        # tiny chunks go to a worker in runs of consecutive chunks, whose results it may send
        # home together (see ``coalesce``)
        tiny = self.tiny and self.small_results
        hold = not tiny and self.hold.holding(self.tiny, self.pace)
        run = TINY_RUN if tiny else 1
        if tiny and self.left > 0:  # near the end, runs share what is left between the workers
            run = min(run, -(-self.left // self.num_workers))
        depth = self._depth()
        worker: _Worker | None = None
        streak = 0
        k, end = ks.start, ks.stop
        # chunks one at a time, every worker started: chunk k goes to worker k % N when it has
        # room and is not far busier than the others (a slow worker gets no more than its
        # share), so that a persistent worker meets the same chunks in every epoch: the pages of
        # a memory-mapped source it mapped in the last one (16 MiB met anew: ~1 ms of faults)
        order = list(self.workers.values()) if run == 1 else []
        if len(order) < self.num_workers:
            order = []
        # while answers are held, the last chunks go to whichever worker runs dry first
        # (``held.HOLD_TAIL``): chunks from ``tail`` on
        tail = end
        if hold and order and self.max_tasks is None and self.num_workers > 1:
            tail = max(k, k + self.left - HOLD_TAIL * self.num_workers)
        while k < end:
            if k >= tail:  # to the least busy worker holding its last chunk at most
                worker, n = self._least_busy(2), min(HOLD_TAIL_RUN, end - k)
                if worker is None:
                    break
            else:
                if order and self._preferred(order[k % len(order)], depth):
                    worker, streak = order[k % len(order)], 0
                elif worker is None or streak >= run or not self._has_room(worker, depth):
                    worker, streak = self._least_busy(depth), 0
                    if (worker is None or worker.assigned) and len(self.workers) < self.num_workers:
                        # start (or replace, after max_tasks_per_child) a worker; send what is
                        # assigned first, so that the workers already running get going
                        self._send(batches, tiny, hold)
                        worker = self._start_worker()
                if worker is None:
                    break
                n = min(run - streak, end - k, depth - len(worker.assigned) - worker.stale)
                if worker.quota is not None:
                    n = min(n, worker.quota)
                    worker.quota -= n
            chunks = range(k, k + n)
            worker.assigned.extend(chunks)
            batches.setdefault(worker.id, []).extend([(i, payload(i)) for i in chunks])
            k += n
            streak += n
        self._send(batches, tiny, hold)
        return k - ks.start

    def _send(
        self, batches: dict[int, list[tuple[int, Any]]], tiny: bool = False, hold: bool = False
    ) -> None:
        for wid, batch in batches.items():
            worker = self.workers[wid]
            if self.job_msg is not None and worker.job_gen != self.gen:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    worker.chan.send(self.job_msg, plain=True, block=False)
                worker.job_gen = self.gen
            plain = all(payload is None for _, payload in batch)
            self.hold.carrying = not plain
            msg: Any = batch
            if tiny:
                worker.coalescing = True
                first, last = batch[0][0], batch[-1][0]
                consecutive = last - first == len(batch) - 1
                msg = ("tiny", range(first, last + 1) if plain and consecutive else batch)
            elif hold:  # the worker may hold the answers to send several at once
                worker.coalescing = True
                msg = (HOLD_TAG, batch)
            # never blocks: a worker busy sending its own result cannot deadlock with us; a worker
            # that died meanwhile is reported through its sentinel
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                worker.chan.send(msg, plain=plain, block=False)
            self._watch_writes(worker)
        batches.clear()

    def _watch_writes(self, worker: _Worker) -> None:
        """Watch a channel for writability while queued bytes wait for it."""
        pending = worker.chan.pending
        if pending == worker.watching_writes:
            return
        wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if pending else 0)
        with contextlib.suppress(KeyError, ValueError):
            key = self.selector.get_key(worker.chan.sock)
            self.selector.modify(worker.chan.sock, wanted, key.data)
            worker.watching_writes = pending

    def hold_depth(self) -> int:
        return self.hold.depth(self.tiny, self.pace)

    def tiny_depth(self) -> int:
        if self.batched_results:
            return TINY_BATCH_DEPTH
        return TINY_DEPTH if self.small_results else self.depth

    def _depth(self) -> int:
        """Chunks a worker may hold now."""
        if self.tiny and self.small_results:
            return self.tiny_depth()
        held = self.hold.depth(self.tiny, self.pace)
        if held > 2:
            return held
        return 1 if self.large_results else self.depth

    def _preferred(self, w: _Worker, depth: int) -> bool:
        """Whether a chunk may go to its own worker ``w``: room, and at most half a queue more
        than the least busy worker."""
        if not self._has_room(w, depth):
            return False
        load = len(w.assigned) + w.stale - max(1, depth // 2)
        return all(load <= len(o.assigned) + o.stale for o in self.workers.values())

    @staticmethod
    def _has_room(w: _Worker, depth: int) -> bool:
        return len(w.assigned) + w.stale < depth and (w.quota is None or w.quota > 0)

    def _least_busy(self, depth: int) -> _Worker | None:
        best = None
        for w in self.workers.values():
            if not self._has_room(w, depth):
                continue
            if best is None or len(w.assigned) + w.stale < len(best.assigned) + best.stale:
                best = w
        return best

    # ------------------------------------------------------------------ events
    def wait(self) -> list[Event]:
        # Spin only while results come one per message less than TINY_CHUNK_SECONDS apart: a
        # spin then often catches the next one. Results that travel several per message come
        # from workers with runs queued (waking up late costs them nothing), and results that
        # come further apart are rarely caught: spinning takes the core the workers need.
        spin = self.tiny and not self.batched_results
        events: list[Event] = self._spin() if spin else []
        if not events:
            for key, mask in self.selector.select(0):
                self._handle(key, mask, events)
            self.hold.waited(bool(events))
        while not events:
            for key, mask in self.selector.select():
                self._handle(key, mask, events)
        return events

    def _spin(self) -> list[Event]:
        """Poll the channels for a short while before blocking (see ``channel.SPIN_SECONDS``)."""
        events: list[Event] = []
        deadline = time.perf_counter() + SPIN_SECONDS
        select = self.selector.select
        while True:
            for key, mask in select(0):
                self._handle(key, mask, events)
            if events or time.perf_counter() > deadline:
                return events

    def _handle(self, key: selectors.SelectorKey, mask: int, events: list[Event]) -> None:
        kind, worker = key.data
        if worker.id not in self.workers:
            return
        if kind == "exit":
            self._on_exit(worker, events)
            return
        if mask & selectors.EVENT_WRITE:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                worker.chan.flush()
            self._watch_writes(worker)
        if mask & selectors.EVENT_READ:
            if worker.chan.fill():
                self._collect(worker, events)
            else:
                self._on_end_of_stream(worker, events)

    def _collect(self, worker: _Worker, events: list[Event]) -> None:
        for msg in worker.chan.messages():
            if msg[0] == STARTED[0]:
                worker.started = True
                continue
            if msg[0] == "start_err":
                raise self._start_error(worker, msg)
            if msg[0] == BATCH_TAG:
                self._collect_batch(worker, msg[1], msg[2], events)
                continue
            if worker.stale:  # the answer to a chunk of an earlier call: dropped
                worker.stale -= 1
                events.append(("freed", worker.id))  # the worker has room again: submit
                continue
            oob = worker.chan.last_oob_bytes
            self.large_results = oob >= LARGE_RESULT_BYTES
            self.small_results = oob == 0
            self.hold.result(oob, msg[0] == "ok")
            self.batched_results = False
            k = msg[1]
            worker.assigned.remove(k)
            if not worker.assigned:
                worker.coalescing = False
            if msg[0] == "err":
                self.where_ran[k] = f"worker {worker.id} (pid {worker.process.pid})"
            events.append(msg)

    def _collect_batch(
        self, worker: _Worker, ks: list[int], results: list[Any], events: list[Event]
    ) -> None:
        """Several results of tiny chunks, as one ``("oks", ks, results)`` event."""
        if worker.stale:  # answers to chunks of an earlier call come first: dropped
            drop = min(worker.stale, len(ks))
            worker.stale -= drop
            ks, results = ks[drop:], results[drop:]
            if not ks:
                events.append(("freed", worker.id))  # the worker has room again: submit
                return
        self.large_results, self.small_results, self.batched_results = False, True, True
        assigned = worker.assigned
        for k in ks:  # a worker answers its chunks in the order they were sent
            if assigned[0] == k:
                assigned.popleft()
            else:
                assigned.remove(k)
        if not assigned:
            worker.coalescing = False
        events.append(("oks", ks, results))

    def _on_end_of_stream(self, worker: _Worker, events: list[Event]) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(worker.chan.sock)
        if not worker.assigned and worker.quota is not None and worker.quota <= 0:
            # retired by max_tasks_per_child: its slot is free now, even if the process lingers
            # (threads fn left behind); it is stopped with the others at close()
            self._forget(worker)
            self.retiring.append(worker)
            events.append(("retired", worker.id))
        # otherwise the process sentinel reports the death (and its exit code) in a moment

    def _on_exit(self, worker: _Worker, events: list[Event]) -> None:
        # results sent before the exit are still in the channel: keep them (without blocking: a
        # grandchild fn started may still hold the socket open)
        if not worker.chan.closed:
            with contextlib.suppress(OSError):
                while worker.chan.fill(block=False):
                    pass
            self._collect(worker, events)
        # the process has exited (its pidfd or sentinel fired): reading exitcode reaps it at once,
        # where join() would wait for a sentinel a grandchild may still hold
        pid, exitcode = worker.process.pid, worker.process.exitcode
        self._forget(worker)
        worker.close_process()
        if worker.assigned and not worker.started:
            raise self._start_error(worker, None, pid, exitcode)
        if worker.assigned:
            k = worker.assigned[0]
            what = f"died while processing chunk {k}"
            if worker.coalescing:
                what = (
                    f"died before delivering chunk {k} (a worker sends several results at "
                    "once, so it may have finished that chunk)"
                )
            raise WorkerDiedError(
                f"worker {worker.id} (pid {pid}) {what}: it exited "
                f"{exit_description(exitcode)}. The remaining chunks were cancelled.",
                chunk=k,
                pid=pid,
                exitcode=exitcode,
            )
        events.append(("retired", worker.id))

    def _start_error(
        self, worker: _Worker, report: Any, pid: int | None = None, exitcode: int | None = None
    ) -> WorkerDiedError:
        """The error of a worker that failed before its first chunk (``startup``)."""
        err = start_error(
            worker.id,
            worker.process.pid if pid is None else pid,
            self.ctx.get_start_method(),
            exit_description(exitcode),
            report,
        )
        if report is not None and report[3]:
            err.__cause__ = RemoteTraceback(report[3])
        return err

    def _forget(self, worker: _Worker) -> None:
        for obj in (worker.chan.sock, worker.exit_fd):
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(obj)
        self.workers.pop(worker.id, None)
        worker.chan.close()

    # ------------------------------------------------------------------ persistent calls
    def begin(self, job: dict[str, Any]) -> None:
        """Start a call on persistent workers: ``job`` (pickled once, here) reaches each worker
        before its first chunk of the call. Workers that died since the last call are replaced."""
        self.gen += 1
        self.job_msg = ("job", pickle.dumps(job, protocol=5))
        self.where_ran.clear()
        self.large_results = self.small_results = self.batched_results = False
        self.hold.new_call()
        # notice deaths (and drop stale answers) now, not when a chunk is sent to a dead worker
        events: list[Event] = []
        for key, mask in self.selector.select(0):
            self._handle(key, mask, events)

    def end_call(self) -> None:
        """End a call without stopping the workers: the chunks they still hold become stale."""
        for w in self.workers.values():
            w.stale += len(w.assigned)
            w.assigned.clear()
        self.job_msg = None

    @property
    def busy(self) -> bool:
        """Whether a worker still holds chunks (of a call or stale)."""
        return any(w.assigned or w.stale for w in self.workers.values())

    # ------------------------------------------------------------------ shutdown
    def close(self, abort: bool, grace: float = SHUTDOWN_SECONDS) -> None:
        """Stop the workers: SIGTERM first if ``abort``, SIGKILL after ``grace`` seconds.

        A Ctrl-C that comes meanwhile is raised once every worker is stopped: one left running
        would keep the interpreter from exiting (multiprocessing joins its children at exit).
        """
        if os.getpid() != self.owner:
            return  # a forked child finalising our iterator: the workers are not its to stop
        with sigint_held():
            self._stop(abort, grace)

    def _stop(self, abort: bool, grace: float) -> None:
        if self.closed:
            return
        self.closed = True
        workers = list(self.workers.values()) + self.retiring
        self.workers.clear()
        self.retiring.clear()
        if abort:
            for w in workers:
                with contextlib.suppress(OSError, AttributeError, ValueError):
                    w.process.terminate()
        for w in workers:
            with contextlib.suppress(OSError):
                w.chan.sock.shutdown(socket.SHUT_RDWR)
        if not abort and not any(w.assigned for w in workers):
            # every chunk done: the workers read end-of-stream and exit; nothing is in flight,
            # so the call returns now and they are reaped (or killed after grace) in the background
            for w in workers:
                if self.fork:  # they write no more: their result segments serve the next call
                    STOCK.give(w.chan.received_segments())
                w.chan.close()
            self.selector.close()
            reap_later(workers, grace)
            return
        deadline = time.monotonic() + grace
        for w in workers:
            with contextlib.suppress(ValueError):
                w.process.join(max(0.0, deadline - time.monotonic()))
        for w in workers:
            with contextlib.suppress(ValueError):
                if w.process.is_alive():
                    with contextlib.suppress(OSError, AttributeError):
                        w.process.kill()
                    w.process.join(KILLED_SECONDS)
            if self.fork and w.process.exitcode is not None:  # dead: it writes no more
                STOCK.give(w.chan.received_segments())
            w.chan.close()
            w.close_process()
        self.selector.close()
