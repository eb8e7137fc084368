"""``map_iter`` and ``map``: check the arguments, plan the chunks, run them, reassemble.

Everything that can be checked is checked when ``map_iter`` is called, before any worker starts
(an unpicklable ``fn``, a bad ``dim``, exclusive options); the returned generator starts the
workers on its first ``next()``.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy.random  # noqa: F401  (imported here so that forked workers inherit it: ~10 ms each)
import torch

from tensordict.core.behaviour.combine import stack_or_lazy
from tensordict.core.behaviour.storage import in_shared_memory
from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.errors import BatchSizeError, NotPicklableError
from tensordict.memmap.mapping import maps_current_file
from tensordict.memmap.tensor import MemoryMappedTensor
from tensordict.parallel.arguments import (
    MAX_WORKERS_PER_CPU,
    capped_workers,
    check_count,
    check_generator,
    user_stacklevel,
)
from tensordict.parallel.engine import OwnPool
from tensordict.parallel.lifeline import check_can_start_workers
from tensordict.parallel.out import check_out, check_slice, write_results
from tensordict.parallel.persistent import WorkerPool
from tensordict.parallel.plan import ChunkPlan, take
from tensordict.parallel.readahead import ReadAhead
from tensordict.parallel.startup import start_method_context, usable_cpus
from tensordict.parallel.window import drive

__all__ = ["MAX_WORKERS_PER_CPU", "map", "map_iter"]

_GENERATOR_WARNING = (
    "map_iter/map called without a generator: the workers are seeded from a new "
    "torch.Generator(), so every call uses the same base seed. From tensordict 0.17 the default "
    "will draw the base seed from the global torch RNG (as DataLoader does). Pass "
    "generator=torch.default_generator for that behaviour now, or generator=torch.Generator() to "
    "keep the current seeds; either silences this warning."
)


def _check_fn(fn: Callable[..., Any]) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")
    try:
        pickle.dumps(fn)
    except Exception as err:
        name = getattr(fn, "__qualname__", repr(fn))
        raise NotPicklableError(
            f"fn={name} cannot be sent to worker processes: it is not picklable ({err}). Define "
            "it with `def` at the top level of a module or script (not a lambda, not a local or "
            "nested function), or use functools.partial of such a function."
        ) from None


def _normalize_dim(td: Any, dim: int) -> int:
    bd = len(td.batch_size)
    if not -bd <= dim < bd:
        raise BatchSizeError(
            f"dim={dim} is out of range for batch_size={list(td.batch_size)}: map_iter splits "
            f"along a batch dimension, in [{-bd}, {bd - 1}]."
        )
    return dim % bd


def _base_seed(generator: torch.Generator | None) -> int:
    if generator is None:
        warnings.warn(_GENERATOR_WARNING, FutureWarning, stacklevel=user_stacklevel())
        generator = torch.Generator()
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator))


def _remote_readable(td: Any) -> bool:
    """Whether workers started by spawn can read ``td`` without its data travelling per chunk."""
    if hasattr(td, "_worker_source"):  # file- or server-backed: reopened by name in workers
        return True
    return _remote_writable(td)


def _remote_writable(td: Any) -> bool:
    """Whether workers can write their slice of ``td`` themselves (memory-mapped or shared, and
    its files still those at their paths)."""
    try:
        return bool(td.is_memmap() or in_shared_memory(td)) and _files_current(td)
    except Exception:
        return False


def _files_current(td: Any) -> bool:
    """Whether every file-backed leaf of ``td`` maps the file now at its path: a prefix
    overwritten since ``td`` was loaded holds other files, which workers reopening the paths
    would read (or write) instead of what ``td`` holds. Such a ``td`` travels by value."""
    leaves = td.values(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
    return all(
        maps_current_file(v) for v in leaves if isinstance(v, MemoryMappedTensor) and v.filename
    )


def _by_reference(td: Any) -> bool:
    """Whether ``td`` pickles as references to files (its data does not travel): what a
    :class:`WorkerPool`, whose workers were not forked from ``td``, can be sent once per call."""
    if hasattr(td, "_worker_source"):
        return True
    try:
        if not td.is_memmap():
            return False
        leaves = td.values(include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor)
        named = all(getattr(v, "filename", None) for v in leaves if isinstance(v, torch.Tensor))
        return named and _files_current(td)
    except Exception:
        return False


def _worker_source(td: Any) -> Any:
    """What workers index: ``td``, or what a file- or server-backed source hands them for it
    (``td._worker_source()``: e.g. the source after its buffered writes reached the file)."""
    hook = getattr(td, "_worker_source", None)
    return hook() if hook is not None else td


def _index_payload(index: Any) -> Any:
    # a permutation slice travels as a numpy array: torch's own pickling costs ~0.1 ms
    return index.numpy() if isinstance(index, torch.Tensor) else index


class _Options:
    """The validated arguments of one call."""

    def __init__(self, td: Any, fn: Any, dim: int, num_workers: int | None, **kw: Any) -> None:
        _check_fn(fn)
        self.fn = fn
        self.dim = _normalize_dim(td, dim)
        if kw["shuffle"] and not kw["index_with_generator"]:
            raise RuntimeError(
                "shuffle=True needs index_with_generator=True: shuffled chunks are gathered by "
                "index in the workers. Drop index_with_generator=False."
            )
        check_count("num_workers", num_workers, 1)
        check_count("worker_threads", kw["worker_threads"], 1, none_ok=False)
        check_count("max_tasks_per_child", kw["max_tasks_per_child"], 1)
        check_count("chunksize", kw["chunksize"], 0)
        check_count("num_chunks", kw["num_chunks"], 1)
        check_generator(kw["generator"])
        n = td.batch_size[self.dim]
        ChunkPlan(n, self.dim, chunksize=kw["chunksize"], num_chunks=kw["num_chunks"])  # validate
        self.pool = kw["pool"]
        self.kw = kw
        if self.pool is None:
            check_can_start_workers()
            self.ctx = start_method_context(kw["mp_start_method"])
            self.num_workers = capped_workers(num_workers, usable_cpus())
            self.base_seed: int | None = _base_seed(kw["generator"])
        elif isinstance(self.pool, WorkerPool):
            self.num_workers = self.pool.num_workers
            self.base_seed = _base_seed(kw["generator"]) if kw["seed_per_chunk"] else None
        else:
            from tensordict.parallel.pools import pool_size

            self.num_workers = pool_size(self.pool)
            # a user's pool is left unseeded, unless chunks are seeded on request
            self.base_seed = _base_seed(kw["generator"]) if kw["seed_per_chunk"] else None
        perm = torch.randperm(n) if kw["shuffle"] else None
        self.plan = ChunkPlan(
            n,
            self.dim,
            chunksize=kw["chunksize"],
            num_chunks=kw["num_chunks"],
            default_chunks=self.num_workers,
            perm=perm,
        )
        if self.pool is None:  # never more workers than chunks
            self.num_workers = max(1, min(self.num_workers, len(self.plan)))


def _split_up_front(td: Any, plan: ChunkPlan) -> list[Any]:
    if plan.unbind:
        return list(td.unbind(plan.dim))
    sizes = [b - a for a, b in (plan.bounds(k) for k in range(len(plan)))]
    return list(td.split(sizes, plan.dim)) if sizes else []


def _job_and_payload(
    td: Any, opts: _Options, out: Any = None
) -> tuple[dict[str, Any], Callable[[int], Any]]:
    """What every worker gets once (the job), and what travels with chunk ``k`` (the payload).

    Workers that can read the source themselves (inherited through fork, or memory-mapped /
    shared) get the plan once and receive bare chunk numbers; otherwise the chunk's own rows travel.
    """
    plan = opts.plan
    dim = plan.dim
    job: dict[str, Any] = {
        "fn": opts.fn,
        "dim": dim,
        "lock": _remote_readable(td) and td.is_memmap(),
    }
    if out is not None:
        job["out"] = (out, plan)
    if opts.kw["seed_per_chunk"]:
        job["seed_chunks"] = opts.base_seed
    own_fork = opts.pool is None and opts.ctx.get_start_method() == "fork"
    persistent = isinstance(opts.pool, WorkerPool)
    reachable = own_fork or (_by_reference(td) if persistent else _remote_readable(td))
    # a memory-mapped chunk pickles as its file's path: when the files at those paths are not
    # the ones td maps (its prefix was overwritten since), it travels as a private copy instead
    stale = not own_fork and _is_memmap(td) and not _files_current(td)
    private = (lambda c: c.clone()) if stale else (lambda c: c)
    if opts.kw["index_with_generator"]:
        if reachable and (opts.pool is None or persistent):
            job["source"], job["plan"] = _worker_source(td), plan
            return job, _no_payload
        if reachable:  # a user's pool: every task is pickled on its own, so it names its index
            job["source"] = _worker_source(td)
            return job, lambda k: ("index", _index_payload(plan.index(k)))
        return job, lambda k: ("chunk", private(take(td, dim, plan.index(k))))
    chunks = _split_up_front(td, plan)
    if own_fork:
        job["chunks"] = chunks
        return job, lambda k: ("chunk_id", k)
    return job, lambda k: ("chunk", private(chunks[k]))


def _is_memmap(td: Any) -> bool:
    try:
        return bool(td.is_memmap())
    except Exception:
        return False


def _no_payload(k: int) -> None:
    return None


def _progress(total: int, enabled: bool | str) -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=enabled if isinstance(enabled, str) else None, unit="chunk")


def _read_ahead(td: Any, opts: _Options, job: dict[str, Any], payload: Callable[[int], Any]) -> Any:
    """``payload``, also reading each chunk's pages ahead as it is sent (``readahead``), and the
    :class:`ReadAhead` to close at the end (None: ``payload`` as it is). Shuffled chunks read
    ahead tell the workers so (``job["scattered"]``: their faults then read no read-around)."""
    if opts.pool is not None and not isinstance(opts.pool, WorkerPool):
        from tensordict.parallel.pools import is_ray_pool

        if is_ray_pool(opts.pool):  # its workers may read on other machines
            return payload, None
    ahead = ReadAhead.for_call(td, opts.plan)
    if ahead is None:
        return payload, None
    if opts.plan.perm is not None:
        job["scattered"] = True

    def sent(k: int) -> Any:
        ahead.request(k)
        return payload(k)

    return sent, ahead


def _run(td: Any, opts: _Options, out: Any = None) -> Iterator[Any]:
    job, payload = _job_and_payload(td, opts, out)
    payload, ahead = _read_ahead(td, opts, job, payload)
    plan = opts.plan
    window = 2 * opts.num_workers
    bar = _progress(len(plan), opts.kw["pbar"])
    on_yield = bar.update if bar is not None else None
    if isinstance(opts.pool, WorkerPool):
        backend: Any = opts.pool._start_call(job)
    elif opts.pool is None:
        backend = OwnPool(
            opts.ctx,
            opts.num_workers,
            job,
            opts.base_seed,
            opts.kw["worker_threads"],
            opts.kw["max_tasks_per_child"],
        )
    else:
        from tensordict.parallel.pools import external_backend

        backend = external_backend(opts.pool, job)
    finished = False
    try:
        yield from drive(backend, len(plan), payload, window, not opts.kw["shuffle"], on_yield)
        finished = True
    finally:
        # A second Ctrl-C (the first may be why we are here) must not leave workers running:
        # they would keep the interpreter from exiting. The backend holds SIGINT back while it
        # stops them; one that lands before (no function call comes before the ``try``) runs
        # the closing again, which does nothing the second time, and is raised once it is done.
        interrupted: KeyboardInterrupt | None = None
        while True:
            try:
                if ahead is not None:
                    ahead.close()
                backend.close(abort=not finished)
                if bar is not None:
                    bar.close()
            except KeyboardInterrupt as err:
                interrupted = interrupted or err
                continue
            break
        if interrupted is not None:
            try:
                raise interrupted
            finally:
                interrupted = None  # (no cycle through this frame)


def _empty_iter() -> Iterator[Any]:
    yield from ()


def map_iter(
    td: Any,
    fn: Callable[[Any], Any],
    dim: int = 0,
    num_workers: int | None = None,
    *,
    shuffle: bool = False,
    chunksize: int | None = None,
    num_chunks: int | None = None,
    pool: Any = None,
    generator: torch.Generator | None = None,
    seed_per_chunk: bool = False,
    max_tasks_per_child: int | None = None,
    worker_threads: int = 1,
    index_with_generator: bool = True,
    pbar: bool | str = False,
    mp_start_method: str | None = None,
) -> Iterator[Any]:
    """Apply ``fn`` to chunks of ``td`` along ``dim`` in worker processes; yield each result.

    Results come in chunk order (as soon as each is ready), or as workers finish them with
    ``shuffle=True``. At most ``2 * num_workers`` chunks are sent and not yet consumed (up to
    ``16 * num_workers`` while the results are small, under 64 KiB, and consumed less than 0.2 ms
    apart: tiny chunks then keep the workers busy on a loaded machine; ``256 * num_workers`` while
    they are under 4 KiB, when workers send them several per message; ``36 * num_workers`` while
    chunks take milliseconds and results are at most 1 MiB, sent up to 16 per message; one slow
    result shrinks the window back). An exception in ``fn`` is re-raised here with the worker's
    traceback, at its place in the order (the results before it are yielded first). A dead
    worker raises :class:`~tensordict.errors.WorkerDiedError` at once, naming the first chunk it
    had not delivered (results not yet yielded are dropped), and closing the iterator stops the
    workers at once. Workers never outlive this process: they are
    stopped at interpreter exit, and killed if it is (see ``parallel.lifeline``).

    Args:
        td: the tensordict (dense, lazy stack or tensorclass) to split. Chunks are slices of it,
            not copies; chunks of a memory-mapped ``td`` are memory-mapped and locked, and
            workers read them from the files. ``td`` itself is left as it is.
        fn: called once per chunk in a worker; may return a tensordict, a tensorclass, a tensor
            or None. Must be picklable: define it at the top level of a module.
        dim: the batch dimension to split along (negative counts from the end).
        num_workers: worker processes; None for one per CPU this process may run on. Never
            more than the chunks, nor than 4 per such CPU (more warns, and starts that many).
        shuffle: chunks take their elements from a random permutation along ``dim`` (drawn from
            the global torch RNG); results come as workers finish them. On a memory-mapped
            ``td`` the parent sends indices and each worker gathers its rows from the files
            into its own memory (a locked copy, as the rows are scattered).
        chunksize: elements per chunk along ``dim``; ``0`` passes elements one by one, with
            ``dim`` removed. Exclusive with ``num_chunks``.
        num_chunks: the number of chunks (sizes differ by at most one). With neither, one chunk
            per worker; never more chunks than elements.
        pool: a :class:`~tensordict.parallel.WorkerPool` (this package's workers, kept across
            calls: every guarantee above holds, seeded once per worker), or a
            ``multiprocessing`` (or ``torch.multiprocessing``) pool, or a Ray pool, used as is
            and left open (workers unseeded); ``num_workers``, ``generator``,
            ``max_tasks_per_child``, ``worker_threads`` and ``mp_start_method`` are then ignored.
        generator: one int64 base seed is drawn from it; worker ``i`` seeds torch with
            ``base + i`` and NumPy and ``random`` from both. None: a new ``torch.Generator()``
            (the same seeds every call), with a FutureWarning about the 0.17 default.
        seed_per_chunk: also seed torch, NumPy and ``random`` before each chunk, with the
            chunk's own seed (``get_worker_info().chunk_seed``, derived from the base seed and
            the chunk index): each chunk's random draws are then the same on every run with the
            same base seed, whatever worker runs it. Works with a ``pool`` too (the base seed is
            then drawn from ``generator`` as well). Defaults to False: workers are seeded once.
        max_tasks_per_child: replace a worker after that many chunks (new id and seed).
        worker_threads: ``torch.set_num_threads`` in each worker.
        index_with_generator: compute each chunk's index when a worker needs it (default);
            False splits ``td`` up front.
        pbar: show a tqdm progress bar (with a total, one step per chunk) if tqdm is
            installed; a string is the bar's label (``pbar="epoch 3"``).
        mp_start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"``; None for the default.

    Examples:
        >>> import operator
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(6.0)}, batch_size=[6])
        >>> for out in map_iter(td, operator.neg, num_workers=2, chunksize=4,
        ...                     generator=torch.Generator()):
        ...     print(out["x"])
        tensor([-0., -1., -2., -3.])
        tensor([-4., -5.])

    Raises:
        NotPicklableError: ``fn`` cannot be pickled (a lambda or local function).
        ValueError: both ``chunksize`` and ``num_chunks``, or bad counts.
        RuntimeError: ``shuffle=True`` with ``index_with_generator=False``.
        WorkerDiedError: a worker died (signal, ``os._exit``, OOM killer) while holding a chunk.
        NestedWorkersError: called inside a daemonic process (a ``multiprocessing.Pool``
            worker), or from ``fn`` of a ``fn`` (pools nest one level: ``fn`` may call it).
    """
    opts = _Options(
        td,
        fn,
        dim,
        num_workers,
        shuffle=shuffle,
        chunksize=chunksize,
        num_chunks=num_chunks,
        pool=pool,
        generator=generator,
        seed_per_chunk=seed_per_chunk,
        max_tasks_per_child=max_tasks_per_child,
        worker_threads=worker_threads,
        index_with_generator=index_with_generator,
        pbar=pbar,
        mp_start_method=mp_start_method,
    )
    if len(opts.plan) == 0:
        return _empty_iter()
    return _run(td, opts)


def map(
    td: Any,
    fn: Callable[[Any], Any],
    dim: int = 0,
    num_workers: int | None = None,
    *,
    out: Any = None,
    chunksize: int | None = None,
    num_chunks: int | None = None,
    pool: Any = None,
    generator: torch.Generator | None = None,
    seed_per_chunk: bool = False,
    max_tasks_per_child: int | None = None,
    worker_threads: int = 1,
    index_with_generator: bool = False,
    pbar: bool | str = False,
    mp_start_method: str | None = None,
) -> Any:
    """Apply ``fn`` to chunks of ``td`` in worker processes and reassemble the results.

    Results are concatenated along ``dim`` (stacked for ``chunksize=0``; lazily when they differ);
    ``None`` results are skipped and all-``None`` gives ``None``.

    With ``out``, results are written into it and ``out`` is returned. Each result is first
    checked against its chunk's slice of ``out``: the same leaf keys, batch size and leaf shapes
    (dtypes are cast, nothing is broadcast), else
    :class:`~tensordict.errors.OutMismatchError`; a ``None`` result leaves its slice as it was.
    A memory-mapped or shared ``out`` is written by the workers, each slice as soon as its chunk
    is done (nothing travels back): when a chunk fails, the slices of the chunks that finished
    hold their results, the others are left as they were. A plain ``out`` is written by this
    process once every chunk has succeeded: when a chunk fails, it is left untouched.

    The other arguments are those of :func:`map_iter` (without ``shuffle``); ``td`` is split up
    front (``index_with_generator=False``) unless asked otherwise.

    Examples:
        >>> import operator
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(6.0)}, batch_size=[6])
        >>> map(td, operator.neg, num_workers=2, num_chunks=3, generator=torch.Generator())["x"]
        tensor([-0., -1., -2., -3., -4., -5.])
    """
    opts = _Options(
        td,
        fn,
        dim,
        num_workers,
        shuffle=False,
        chunksize=chunksize,
        num_chunks=num_chunks,
        pool=pool,
        generator=generator,
        seed_per_chunk=seed_per_chunk,
        max_tasks_per_child=max_tasks_per_child,
        worker_threads=worker_threads,
        index_with_generator=index_with_generator,
        pbar=pbar,
        mp_start_method=mp_start_method,
    )
    if out is not None:
        check_out(td, out, opts.dim)
        if _by_reference(out) if isinstance(pool, WorkerPool) else _remote_writable(out):
            for _ in _run(td, opts, out=out):
                pass
            return out
    results = []
    for k, r in enumerate(_run(td, opts) if len(opts.plan) else ()):
        if out is not None:
            check_slice(out, opts.plan, k, r)  # raise at the first result that does not fit
        results.append(r)
    if out is not None:
        write_results(out, opts.plan, results)
        return out
    results = [r for r in results if r is not None]
    if not results:
        return None
    if opts.plan.unbind:
        if isinstance(results[0], TensorCollection):
            return stack_or_lazy(results, opts.dim)  # dense, or lazy when the results differ
        return torch.stack(results, opts.dim)  # tensors and tensorclasses
    return torch.cat(results, opts.dim)
