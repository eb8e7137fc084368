"""A program the lifecycle tests run and then kill, interrupt or let exit.

``python -m tests.parallel.lifecycle_harness SCENARIO START_METHOD`` prints ``ready`` once the
scenario is set up; the workers print ``running <pid>`` once inside ``fn`` (see
``helpers.announce_then_block``). Scenarios:

- ``exit``: two chunks consumed, the others blocked in fn (which ignores SIGTERM); on a line on
  stdin, the interpreter exits normally with the generator still open.
- ``block``: the main thread waits for a chunk that never comes (the test kills the program).
- ``os_exit``: like ``block``, and a line on stdin makes a thread call ``os._exit(0)``.
- ``thread``: a thread creates the iterator, takes the first chunk (so the workers are forked
  from it) and ends; the main thread then takes the second chunk (``survived``) and blocks.
- ``nested``: the workers' fn runs ``map_iter`` itself, whose workers block; the main thread
  waits (the test kills the program).
- ``pool_exit``, ``pool_block``: ``exit`` and ``block`` with the iterator running on a
  ``WorkerPool`` that is never closed.
- ``sigint``: ``map_iter`` in a loop that forks all the time (``max_tasks_per_child=1``); every
  KeyboardInterrupt is caught and reported as ``caught <logging lock free>``, then it starts over.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

import torch

from tensordict import TensorDict
from tensordict.parallel import WorkerPool
from tests.parallel import helpers


def _iterator(method: str, fn=helpers.announce_then_block, chunksize: int = 1, pool=None):
    td = TensorDict({"x": torch.arange(8.0)}, [8])
    if pool is not None:
        return td.map_iter(fn, chunksize=chunksize, pool=pool)
    return td.map_iter(
        fn,
        num_workers=2,
        chunksize=chunksize,
        mp_start_method=method,
        generator=torch.Generator(),
    )


def _on_stdin(action) -> None:
    def wait() -> None:
        sys.stdin.readline()
        action()

    threading.Thread(target=wait, daemon=True).start()


def _logging_lock_free() -> bool:
    """Whether another thread can take logging's module lock (a fork hook left it held?)."""
    got: list[bool] = []

    def probe() -> None:
        ok = logging._lock.acquire(timeout=10)  # type: ignore[attr-defined]
        if ok:
            logging._lock.release()  # type: ignore[attr-defined]
        got.append(ok)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got[0]


def _sigint_loop(method: str) -> None:
    td = TensorDict({"x": torch.arange(64.0)}, [64])
    while True:
        try:
            helpers.say("ready")
            while True:
                for _ in td.map_iter(
                    helpers.add_one,
                    num_workers=2,
                    chunksize=1,
                    max_tasks_per_child=1,
                    mp_start_method=method,
                    generator=torch.Generator(),
                ):
                    pass
        except KeyboardInterrupt:
            helpers.say(f"caught {_logging_lock_free()}")


ITERATORS: list = []


def main(scenario: str, method: str) -> None:
    if scenario == "sigint":
        _sigint_loop(method)
        return
    if scenario == "nested":
        it = _iterator(method, helpers.nested_then_block, chunksize=4)
        helpers.say("ready")
        next(it)
        return
    if scenario == "thread":
        box: list = []

        def start() -> None:
            box.append(_iterator(method))
            next(box[0])

        t = threading.Thread(target=start)
        t.start()
        t.join()
        it = box[0]
        next(it)
        helpers.say("survived")
    else:
        pool = None
        if scenario.startswith("pool_"):
            scenario = scenario[len("pool_") :]
            pool = WorkerPool(2, generator=torch.Generator(), mp_start_method=method)
            ITERATORS.append(pool)
        it = _iterator(method, pool=pool)
        next(it)
        next(it)
    ITERATORS.append(it)  # still open when the interpreter exits
    if scenario == "exit":
        helpers.say("ready")
        sys.stdin.readline()
        return
    if scenario == "os_exit":
        _on_stdin(lambda: os._exit(0))
    helpers.say("ready")
    next(it)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
