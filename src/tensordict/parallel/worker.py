"""Code that runs in worker processes: setup, seeding, the task loop, errors sent home.

A worker of a pool created by ``map_iter`` (see ``engine``) runs :func:`worker_main`: it ignores
SIGINT (the parent decides when to stop), closes the parent's ends of the other workers' channels
it inherited through ``fork``, sets its torch thread count, seeds torch/NumPy/``random`` from the
base seed and its id, then answers tasks until its channel closes or its task quota is used up.

A worker of a pool the user passed runs :func:`run_external_task` once per chunk.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import os
import pickle
import random
import signal
import socket
import time
import traceback
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from tensordict.core.collection import TensorCollection
from tensordict.errors import ChunkError, NotPicklableError, ResultTypeError
from tensordict.parallel.channel import IDLE_SECONDS
from tensordict.parallel.coalesce import FULL, Coalescer
from tensordict.parallel.held import HOLD_TAG, HeldAnswers
from tensordict.parallel.lifeline import Lifeline
from tensordict.parallel.out import write_result
from tensordict.parallel.plan import SliceTaker, take, take_run
from tensordict.parallel.readahead import advise_access
from tensordict.parallel.startup import STARTED

__all__ = ["WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """Who is running ``fn``, on which chunk: returned by :func:`get_worker_info` in a worker.

    Attributes:
        id: the worker's id, ``0 .. num_workers - 1`` (replacements under ``max_tasks_per_child``
            get new ids after those); None in a pool passed by the user that cannot tell.
        num_workers: the number of workers of the pool.
        seed: the torch seed of this worker (``base_seed + id``); None when unseeded (a user pool).
        pid: the worker's process id.
        chunk: the index of the chunk ``fn`` is running on (None before the first).
        chunk_seed: a seed for this chunk, derived from the base seed and ``chunk`` only, so the
            same on every run with the same base seed, whichever worker runs the chunk and
            whenever (None without a base seed: a user pool without ``seed_per_chunk``).
    """

    id: int | None
    num_workers: int
    seed: int | None
    pid: int
    chunk: int | None = None
    chunk_seed: int | None = None


_info: WorkerInfo | None = None
#: the chunk fn is running on, and the base seed chunk seeds derive from (set per chunk: cheap)
_chunk: int | None = None
_chunk_base: int | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside ``fn`` run by ``map``/``map_iter``: the worker, its seed and the chunk; else None.

    For random draws that are the same on every run, seed from ``chunk_seed`` (or pass
    ``seed_per_chunk=True``, which seeds torch, NumPy and ``random`` with it before each chunk).

    Examples:
        >>> get_worker_info() is None  # in the main process
        True
    """
    global _info
    info = _info
    if info is not None and info.chunk != _chunk:
        seed = None if _chunk is None or _chunk_base is None else chunk_seed(_chunk_base, _chunk)
        info = _info = replace(info, chunk=_chunk, chunk_seed=seed)
    return info


def _set_info(info: WorkerInfo | None, base_seed: int | None = None) -> None:
    global _info, _chunk, _chunk_base
    _info, _chunk, _chunk_base = info, None, base_seed


def seed_worker(base_seed: int, worker_id: int) -> int:
    """Seed torch with ``base_seed + worker_id``; NumPy and ``random`` from both, as DataLoader."""
    seed = base_seed + worker_id
    _seed_torch(seed)
    random.seed(seed)
    np.random.seed(numpy_seed(base_seed, worker_id))
    return seed


def _seed_torch(seed: int) -> None:
    """``torch.manual_seed``, without its cost where no accelerator exists: it queues a lazy
    seed for every device type, each with a formatted stack (~6 ms in a new worker)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and not accelerator.is_available():
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


_MASK64 = (1 << 64) - 1
#: keeps chunk seeds apart from the worker seeds ``base + i``
_CHUNK_DOMAIN = 0x6A09E667F3BCC908


def chunk_seed(base_seed: int, chunk: int) -> int:
    """The seed of chunk ``chunk``: a non-negative 63-bit mix of the base seed and the index.

    Examples:
        >>> chunk_seed(7, 0) == chunk_seed(7, 0) != chunk_seed(7, 1)
        True
    """
    words = numpy_seed(base_seed ^ _CHUNK_DOMAIN, chunk).tolist()
    return (words[0] | words[1] << 32) & ((1 << 63) - 1)


def numpy_seed(base_seed: int, worker_id: int) -> np.ndarray:
    """Four 32-bit words mixed from both numbers with SplitMix64 (cheap: numpy's SeedSequence
    costs ~6 ms on its first use in a new worker).

    Examples:
        >>> numpy_seed(7, 0).tolist() != numpy_seed(7, 1).tolist() != numpy_seed(8, 0).tolist()
        True
    """
    state = (base_seed * 0x9E3779B97F4A7C15 + worker_id) & _MASK64
    words = []
    for _ in range(2):
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        z ^= z >> 31
        words += [z & 0xFFFFFFFF, z >> 32]
    return np.array(words, dtype=np.uint32)


# ---------------------------------------------------------------------- errors sent home
class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker, attached as ``__cause__``."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return f'\n"""\n{self.tb}"""'


def encode_error(err: BaseException) -> tuple[Any, str]:
    """(the exception, or None if it does not pickle; its formatted traceback)."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    try:
        pickle.loads(pickle.dumps(err))
        return err, text
    except Exception:
        return None, text


def decode_error(exc: Any, text: str, note: str) -> BaseException:
    """The exception to raise in the parent, with the remote traceback and a note."""
    if not isinstance(exc, BaseException):
        last = text.strip().splitlines()[-1] if text.strip() else "unknown error"
        exc = ChunkError(f"{last} (the original exception could not be pickled)")
    exc.__cause__ = RemoteTraceback(text)
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    return exc


# ---------------------------------------------------------------------- the worker loop
class _HeapTrim:
    """Give freed heap memory back to the kernel while the worker has nothing to do.

    A worker's results (often megabytes) are cut from the glibc heap it shares with its parent
    after fork. Freed blocks stay mapped, so the next result reuses them without page faults, but
    fragmentation lets the heap creep up by several results. Trimming costs the next chunk its page
    faults (~5 ms for 16 MiB), so it is done only when the worker has waited for work for a while
    (``channel.IDLE_SECONDS``: a slow consumer, where memory matters and time does not), never
    between chunks of a busy pipeline, even one whose next task is a few hundred microseconds late.
    """

    def __init__(self, budget: int = 4 << 20) -> None:
        self.budget = budget
        #: seconds to wait for work before trimming: IDLE_SECONDS in a busy pipeline, 0 once a
        #: wait has been that long (a slow consumer: trim at once, every time, while it lasts)
        self.patience = IDLE_SECONDS
        self._libc: ctypes.CDLL | None
        try:
            self._libc = ctypes.CDLL(None)
            self._libc.mallinfo2.restype = _MallInfo2
        except (OSError, AttributeError):  # not glibc (or too old): nothing to do
            self._libc = None

    def waited(self, seconds: float) -> None:
        """Record how long the worker last waited for work."""
        self.patience = 0.0 if seconds >= IDLE_SECONDS else IDLE_SECONDS

    def __call__(self) -> None:
        if self._libc is not None and self._libc.mallinfo2().fordblks > self.budget:
            self._libc.malloc_trim(0)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _resolve_job(job: dict[str, Any]) -> dict[str, Any]:
    if "fn_bytes" in job:
        job = dict(job)
        job["fn"] = pickle.loads(job.pop("fn_bytes"))
    return job


class _Runner:
    """A job with its fields looked up once: ``runner(k, payload)`` runs chunk ``k``."""

    __slots__ = ("base", "cut", "dim", "fn", "job", "lock", "out", "plan", "source")

    def __init__(self, job: dict[str, Any], cut: bool = True) -> None:
        """``cut=False``: no ``SliceTaker`` (a runner made for one chunk, as a user's pool
        does: building one costs a chunk's indexing)."""
        self.job = job
        self.fn = job["fn"]
        self.dim = job["dim"]
        self.source = job.get("source")
        self.plan = job.get("plan")
        self.base = job.get("seed_chunks")
        self.lock = bool(job.get("lock"))
        self.out = job.get("out")
        #: cuts the plan's chunks from the source (``plan.SliceTaker``), else None: ``take``
        self.cut: SliceTaker | None = None
        if self.source is not None:  # how faults read the files (see ``readahead``)
            advise_access(self.source, bool(job.get("scattered")))
            if self.plan is not None and cut:
                try:
                    self.cut = SliceTaker.build(self.source, self.dim, self.plan, self.lock)
                except Exception:  # each chunk then reports its own error through ``take``
                    self.cut = None

    def run_chunks(self, ks: range) -> list[Any] | None:
        """Chunks ``ks`` of the plan cut from one slice of the source (``plan.take_run``), or
        None: each chunk is then taken on its own."""
        if self.plan is None or self.source is None:
            return None
        return take_run(self.source, self.dim, self.plan, ks, lock=self.lock)

    def cut_all(self, tasks: list[tuple[int, Any]]) -> list[Any] | None:
        """The chunks of ``tasks`` (``[(k, None)]``) cut from the source now, in order, or None
        when they are not all cut by the ``SliceTaker``.

        A worker cuts a chunk right after ``fn`` has streamed the last one through the caches,
        where cutting costs ~30 us; cut in one go, with the code and objects warm, a run of them
        costs about half that per chunk (~17 us on the steady reduce, profiled). The chunks are
        views: holding them costs no memory.
        """
        cut = self.cut
        if cut is None:
            return None
        count = self.plan.count  # type: ignore[union-attr]
        for k, payload in tasks:
            if payload is not None or not 0 <= k < count:
                return None
        try:
            return [cut(k) for k, _ in tasks]
        except Exception:  # each chunk then reports its own error through ``take``
            return None

    def __call__(self, k: int, payload: Any, chunk: Any = None) -> Any:
        """``fn`` on chunk ``k`` (taken from the source unless ``chunk`` is given)."""
        global _chunk
        _chunk = k
        if self.base is not None:
            seed_worker(chunk_seed(self.base, k), 0)
        cut = self.cut
        if chunk is not None:
            pass  # cut from a run (``run_chunks``), locked as the job asks
        elif payload is None and cut is not None and 0 <= k < self.plan.count:  # type: ignore[union-attr]
            chunk = cut(k)  # locked as the job asks
        else:
            if payload is None:
                chunk = take(self.source, self.dim, self.plan.index(k))  # type: ignore[union-attr]
            else:
                chunk = _chunk_from_payload(self.job, payload)
            if self.lock and hasattr(chunk, "lock_") and not chunk.is_locked:
                chunk.lock_()
        result = self.fn(chunk)
        if result is not None and not isinstance(result, _RESULT_TYPES):
            check_result(self.fn, k, result)
        if self.out is None:
            return result
        # the worker writes its slice of a memory-mapped or shared ``out``; nothing travels back
        write_result(self.out[0], self.out[1], k, result)
        return None


#: what ``fn`` may return besides None and tensorclasses
_RESULT_TYPES = (torch.Tensor, TensorCollection)


def check_result(fn: Any, k: int, result: Any) -> None:
    """Raise :class:`~tensordict.errors.ResultTypeError` unless ``result``, what ``fn``
    returned for chunk ``k``, is a tensordict, a tensorclass, a tensor or None.

    Examples:
        >>> check_result(len, 0, torch.zeros(2))  # a tensor: fine
        >>> check_result(len, 3, {"x": 1})
        Traceback (most recent call last):
        ...
        tensordict.errors.ResultTypeError: fn=len returned a dict for chunk 3; ...
    """
    if result is None or isinstance(result, _RESULT_TYPES):
        return
    if getattr(type(result), "_is_tensorclass", False) is True:
        return
    name = getattr(fn, "__qualname__", None) or repr(fn)
    hint = ""
    if isinstance(result, dict):
        hint = " (for a dict: TensorDict(result, batch_size=chunk.batch_size))"
    raise ResultTypeError(
        f"fn={name} returned a {type(result).__name__} for chunk {k}; map and map_iter "
        "expect a tensordict, a tensorclass, a tensor or None. Return one of those"
        f"{hint}: nothing was yielded or written for this chunk."
    )


def _chunk_from_payload(job: dict[str, Any], payload: Any) -> Any:
    kind, value = payload
    if kind == "index":
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        return take(job["source"], job["dim"], value)
    if kind == "chunk_id":
        return job["chunks"][value]
    return value


def worker_main(
    sock: socket.socket,
    worker_id: int,
    num_workers: int,
    base_seed: int | None,
    threads: int,
    job: dict[str, Any] | None,
    max_tasks: int | None,
    inherited_fds: list[int],
    lifeline: Lifeline,
    warm: list[Any] = (),  # type: ignore[assignment]
) -> None:
    """The main function of a worker of a pool created by ``map_iter``.

    ``warm``: result segments the parent already maps (``shm.SegmentStock``, fork only).

    A worker of a persistent pool starts with ``job=None``: each call sends ``("job", bytes)``
    before its chunks, and the worker keeps its seed, RNG state and memory mappings across calls.
    """
    from tensordict.parallel.channel import Channel, ChannelClosed

    lifeline.attach()  # die with the owner, however it dies
    # Objects inherited through fork go to the GC's permanent generation: collections here would
    # otherwise write to every one of them and copy their pages (duplicating the parent's heap).
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a SIGTERM handler inherited through fork (TorchRL's replay buffers install one) would keep
    # the worker alive on close()'s SIGTERM until the SIGKILL fallback
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held while we were forked
    for fd in inherited_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    torch.set_num_threads(threads)
    trim = _HeapTrim()
    seed = seed_worker(base_seed, worker_id) if base_seed is not None else None
    _set_info(WorkerInfo(worker_id, num_workers, seed, os.getpid()), base_seed)
    chan = Channel(sock, send_warm=warm)
    try:
        current: Any = _Runner(_resolve_job(job)) if job is not None else None
    except BaseException as err:  # fn does not import here (``startup``): say so, and exit
        with contextlib.suppress(OSError):
            chan.send(("start_err", "import", *encode_error(err)), plain=True)
        chan.close()
        return
    held = Coalescer()
    answers = HeldAnswers()
    inbox: deque[Any] = deque()  # a message read ahead by ``_run_held``
    done = 0
    try:
        chan.send(STARTED, plain=True)
        while max_tasks is None or done < max_tasks:
            # results held back are sent before the worker waits: the parent needs them
            if inbox:
                tasks = inbox.popleft()
            else:
                tasks = chan.recv_nowait() if held or answers else None
            if tasks is None:
                _flush(chan, held, answers)
                started = time.perf_counter()
                tasks = chan.recv(on_idle=trim, idle_seconds=trim.patience)
                trim.waited(time.perf_counter() - started)
            if tasks.__class__ is tuple:
                if tasks[0] == "job":  # a new call of a persistent pool
                    _flush(chan, held, answers)
                    current = _next_job(tasks[1], base_seed)
                elif tasks[0] == HOLD_TAG:  # results that may wait for the next ones
                    _flush(chan, held, None)
                    done += _run_held(chan, current, tasks[1], answers, inbox)
                else:  # ("tiny", chunks): a run of tiny chunks, whose results may be held
                    answers.send(chan)
                    done += _run_tiny(chan, current, tasks[1], held)
                continue
            _flush(chan, held, answers)
            for k, payload in tasks:
                _send_answer(chan, k, _answer(current, k, payload))
                done += 1
            del tasks, payload  # do not keep the last chunk alive while waiting for work
        _flush(chan, held, answers)  # max_tasks_per_child reached
    except (ChannelClosed, BrokenPipeError, ConnectionResetError):
        pass
    finally:
        chan.close()


def _flush(chan: Any, held: Coalescer, answers: HeldAnswers | None) -> None:
    """Send every result held back (tiny ones, then encoded answers): at most one kind is."""
    if held:
        chan.send(held.take(), plain=True)
    if answers:
        answers.send(chan)


def _run_held(
    chan: Any, run: Any, tasks: list[tuple[int, Any]], answers: HeldAnswers, inbox: deque[Any]
) -> int:
    """Run chunks whose answers may wait to travel with the next ones (``HeldAnswers``): each
    result is encoded (copied) as its chunk ends, and the answers go when enough are held, or
    before the worker starts its last chunk in hand (so that the parent, knowing, sends more
    while it runs), or before another message; returns the chunks run."""
    clock = time.perf_counter
    last = len(tasks) - 1
    chunks = run.cut_all(tasks) if run.__class__ is _Runner and last else None
    if chunks is not None:
        chunks.reverse()  # popped in order: each chunk is released once its fn has run
    for i, (k, payload) in enumerate(tasks):
        if i == last and answers and not inbox:
            ahead = chan.recv_nowait()
            if ahead is None:
                answers.send(chan)
            else:  # more work in hand: the answers may wait
                inbox.append(ahead)
        answer = _answer(run, k, payload, chunks.pop() if chunks else None)
        if answer[0] == "ok":
            try:
                encoded = chan.encode(answer)
            except (BrokenPipeError, ConnectionResetError):
                raise
            except Exception:  # does not pickle: sent (as its error) on its own, below
                pass
            else:
                if answers.add(encoded, clock()):
                    answers.send(chan)
                continue
        answers.send(chan)
        _send_answer(chan, k, answer)
    return len(tasks)


def _run_tiny(chan: Any, run: Any, tasks: Any, held: Coalescer) -> int:
    """Run a run of tiny chunks (a ``range`` of chunk numbers, or ``[(k, payload)]``), holding
    the small results of fast chunks back (see ``coalesce``); returns the chunks run."""
    clock = time.perf_counter
    chunks: Any = None
    if tasks.__class__ is range:
        items: Any = zip(tasks, itertools.repeat(None))
        if run.__class__ is _Runner:
            try:
                chunks = run.run_chunks(tasks)
            except Exception:  # taken one by one instead: each chunk reports its own error
                chunks = None
    else:
        items = tasks
    if chunks is not None:
        chunks.reverse()  # popped in order: each chunk is released once its fn has run
    last = clock()
    for k, payload in items:
        chunk = chunks.pop() if chunks else None
        try:
            if isinstance(run, BaseException):
                raise run
            result = run(k, payload, chunk)
        except BaseException as err:  # everything fn raises goes home, even SystemExit
            answer: tuple[Any, ...] = ("err", k, *encode_error(err))
        else:
            now = clock()
            state = held.hold(k, result, now - last, now)
            last = now
            if state:
                if state == FULL:
                    chan.send(held.take(), plain=True)
                continue
            answer = ("ok", k, result)
        if held:
            chan.send(held.take(), plain=True)
        _send_answer(chan, k, answer)
        last = clock()
    return len(tasks)


def _next_job(data: bytes, base_seed: int | None) -> Any:
    """The runner of a new call's job, or the error that unpickling it raised (sent back per chunk).

    Called while the previous job is still referenced, so that its memory-mapped files that
    the new job names again come from this process's mapping cache (``memmap.tensor``): a file
    still at its path is not mapped (nor faulted) again; a file replaced since is mapped anew.
    """
    global _chunk_base
    try:
        job = _resolve_job(pickle.loads(data))
    except BaseException as err:
        return err
    _chunk_base = job.get("seed_chunks", base_seed)
    return _Runner(job)


def _answer(run: Any, k: int, payload: Any, chunk: Any = None) -> tuple[Any, ...]:
    try:
        if isinstance(run, BaseException):
            raise run
        return ("ok", k, run(k, payload, chunk))
    except BaseException as err:  # everything fn raises goes home, even SystemExit
        exc, text = encode_error(err)
        return ("err", k, exc, text)


def _send_answer(chan: Any, k: int, msg: tuple[Any, ...]) -> None:
    try:
        chan.send(msg)
    except (BrokenPipeError, ConnectionResetError):
        raise
    except Exception as err:  # the result (or the error) does not pickle; nothing was sent
        bad = NotPicklableError(
            f"the result of fn for chunk {k} cannot be sent back to the main process: {err}. "
            "Return tensors, tensordicts, tensorclasses or other picklable objects."
        )
        exc, text = encode_error(bad)
        chan.send(("err", k, exc, text))


# ---------------------------------------------------------------------- pools passed by the user
def run_external_task(job: dict[str, Any], k: int, payload: Any) -> Any:
    """What a worker of a user's pool runs for chunk ``k``.

    Reports the chunk to the parent's watchdog (stdlib pools) so that a dead worker is noticed,
    sets :func:`get_worker_info`, and returns ``fn``'s result (errors propagate with the pool's own
    remote traceback).
    """
    from tensordict.parallel.watchdog import report_start

    wid = report_start(job.get("watch"), k)
    _set_info(WorkerInfo(wid, job["num_workers"], None, os.getpid()), job.get("seed_chunks"))
    try:
        return _Runner(_resolve_job(job), cut=False)(k, payload)
    finally:
        _set_info(None)
