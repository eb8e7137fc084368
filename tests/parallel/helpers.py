"""Worker functions for the parallel tests (importable, so every start method can run them)."""

from __future__ import annotations

import os
import random
import signal
import time

import numpy as np
import torch

from tensordict import MemoryMappedTensor, NonTensorData, TensorDict, get_worker_info


def add_one(data):
    return data.empty().set("y", data["x"] + 1)


def reduce_sum(data):
    return data.empty().set("y", data["x"].sum(-1))


def as_tensor(data):
    return data["x"] * 2


def return_none(data):
    return None


def return_lambda(data):
    """A tensordict that holds a lambda: a valid result that does not pickle."""
    return TensorDict({"f": NonTensorData(lambda: 0)}, [])


def return_dict(data):
    return {"y": data["x"] + 1}


def return_int(data):
    return 3


def return_list_of_tensordicts(data):
    return [data.clone()]


def describe_chunk(data):
    """Flags about the chunk fn receives (one row per element)."""
    x = data.get("x")
    flags = torch.tensor(
        [
            data.is_memmap(),
            data.is_locked,
            isinstance(x, MemoryMappedTensor),
            data.batch_size[0] if data.batch_size else -1,
        ]
    )
    return TensorDict({"flags": flags.expand(*data.batch_size, 4).clone()}, data.batch_size)


def worker_identity(data):
    info = get_worker_info()
    row = torch.tensor(
        [
            -1 if info.id is None else info.id,
            -1 if info.seed is None else info.seed,
            info.num_workers,
            info.pid,
            torch.get_num_threads(),
        ]
    )
    return TensorDict({"info": row.expand(*data.batch_size, 5).clone()}, data.batch_size)


def draw_random(data):
    """Numbers from every RNG a worker is seeded with."""
    row = torch.tensor(
        [torch.rand(()).item(), float(np.random.rand()), random.random()], dtype=torch.float64
    )
    return TensorDict({"r": row.expand(*data.batch_size, 3).clone()}, data.batch_size)


def raise_on_three(data):
    if int(data["x"].reshape(-1)[0]) == 3:
        raise ValueError("bad chunk three")
    return data.empty().set("y", data["x"] + 1)


def exit_on_three(data):
    if int(data["x"].reshape(-1)[0]) == 3:
        os._exit(3)
    return data.empty().set("y", data["x"] + 1)


def sigkill_on_three(data):
    if int(data["x"].reshape(-1)[0]) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return data.empty().set("y", data["x"] + 1)


def interrupt_parent(data):
    """Send SIGINT to the main process (like Ctrl-C), then keep the worker busy."""
    os.kill(os.getppid(), signal.SIGINT)
    return data.empty().set("y", data["x"] + 1)


def marks_path() -> tuple[str, int]:
    return os.environ["TD_TEST_MARKS"], int(os.environ["TD_TEST_N"])


def record_start(data):
    """Flag the chunk's elements as started and check the in-flight window at that moment.

    The marks file holds ``n`` start flags, then the number of results the consumer has taken,
    then a violation flag set when more than ``2 * num_workers + 1`` chunks are started but not
    consumed (elements are chunks: ``chunksize=1``).
    """
    path, n = marks_path()
    marks = MemoryMappedTensor.from_filename(path, torch.int64, [n + 2])
    marks[data["idx"]] = 1
    started = int(marks[:n].sum())
    window = 2 * get_worker_info().num_workers
    if started > int(marks[n]) + window + 1:
        marks[n + 1] = 1
    return data.empty().set("y", data["idx"])


def fill_out(data):
    return TensorDict({"y": data["x"] * 10}, data.batch_size)


def ragged(data):
    """Element i gives a y of length i + 1 (results that cannot be stacked densely)."""
    n = int(data["x"]) + 1
    return TensorDict({"y": torch.ones(n)}, [])


def scale_sample(sample):
    """fn on tensorclass chunks: attribute access, TensorDict-style access, tensorclass result."""
    from tests.tensorclass.classes import Sample

    assert type(sample).__name__ == "Sample"
    assert torch.equal(sample["obs"], sample.obs) and torch.equal(sample.get("obs"), sample.obs)
    return Sample(
        obs=sample.obs * 2,
        reward=sample.reward + 1,
        label=sample.label,
        batch_size=sample.batch_size,
    )


def clone_chunk(data):
    return data.clone()


def count_fds(_=None):
    return len(os.listdir("/proc/self/fd"))


def busy_sum(data):
    """A few tens of milliseconds of real work, then a result (chunks still running at close).

    Runs in a user's fork pool, which map_iter does not configure: one thread, or OpenMP (whose
    pool the forking parent may have started) can deadlock in the child.
    """
    torch.set_num_threads(1)
    a = torch.randn(200, 200)
    for _ in range(30):
        a = torch.tanh(a @ a)
    return data["x"].sum()


def orphan_grandchild_then_exit(data):
    """Chunk 1: leave a grandchild holding every inherited descriptor, then die."""
    if int(data["x"].reshape(-1)[0]) == 1:
        pid = os.fork()
        if pid == 0:
            signal.pause()  # until the test kills it
            os._exit(0)
        with open(os.environ["TD_TEST_GRANDCHILD"], "w") as f:
            f.write(str(pid))
        os._exit(3)
    return data.empty().set("y", data["x"] + 1)


def leave_a_thread(data):
    """Start a non-daemon thread that outlives the chunk (the process cannot exit while it runs)."""
    import threading

    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=False).start()
    return data.empty().set("y", data["x"] + 1)


def exit_on_three_tensor(data):
    """A bare tensor result (torch pools share tensors by descriptor); chunk 3 kills its worker."""
    if int(data["x"].reshape(-1)[0]) == 3:
        os._exit(3)
    return data["x"] * 2


# ------------------------------------------------------------ results that do not fit out=
def first_row_only(data):
    """One row whatever the chunk's size (would broadcast into a larger slice)."""
    return TensorDict({"y": data["x"].reshape(-1)[:1] * 10}, [1])


def wrong_key(data):
    """The right rows under a key out does not have."""
    return TensorDict({"w": data["x"] * 10}, data.batch_size)


def wide_leaf(data):
    """The right batch size, a leaf of shape [n, 1] where out has [n, 4] (would broadcast)."""
    return TensorDict({"y": (data["x"] * 10).unsqueeze(-1)}, data.batch_size)


def none_for_chunk_zero(data):
    """None for the chunk holding element 0, the chunk's rows times ten otherwise."""
    if int(data["x"].reshape(-1)[0]) == 0:
        return None
    return TensorDict({"y": data["x"] * 10}, data.batch_size)


def bad_for_chunk_two(data):
    """Fits out for every chunk but the one starting at element 10 (of chunks of 5)."""
    if int(data["x"].reshape(-1)[0]) == 10:
        return TensorDict({"y": data["x"][:1]}, [1])
    return TensorDict({"y": data["x"] * 10}, data.batch_size)


# ------------------------------------------------------------ lifecycle harness (process deaths)
def say(line: str) -> None:
    """A line on stdout in one write (processes sharing the pipe do not interleave it)."""
    os.write(1, f"{line}\n".encode())


def announce_then_block(data):
    """Elements 0 and 1: a result. Later ones: ignore SIGTERM, say ``running <pid>`` on stdout
    (inherited from the harness) and block until killed."""
    if int(data["x"].reshape(-1)[0]) < 2:
        return data.empty().set("y", data["x"] + 1)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    say(f"running {os.getpid()}")
    while True:
        signal.pause()


# ------------------------------------------------------------ nested map_iter
def nested_map(data):
    """fn that runs map itself: ``y = x + 1`` computed by two workers of its own."""
    return data.map(add_one, num_workers=2, chunksize=2, generator=torch.Generator())


def nested_twice(data):
    """fn whose fn runs map too (three levels of pools)."""
    return data.map(nested_map, num_workers=1, generator=torch.Generator())


def nested_then_block(data):
    """fn that runs map_iter over its chunk with ``announce_then_block`` (which never returns)."""
    it = data.map_iter(announce_then_block, num_workers=2, chunksize=1, generator=torch.Generator())
    return TensorDict({"n": torch.tensor(len(list(it)))}, [])


# ------------------------------------------------------------ per-chunk seeds
def chunk_draws(data):
    """The chunk's index and seed (from get_worker_info), and draws from every seeded RNG."""
    info = get_worker_info()
    row = torch.tensor(
        [
            info.chunk,
            -1 if info.chunk_seed is None else info.chunk_seed,
            torch.randint(0, 2**62, ()).item(),
            int(np.random.randint(0, 2**62, dtype=np.int64)),
            random.getrandbits(62),
        ]
    )
    return TensorDict({"row": row.expand(*data.batch_size, 5).clone()}, data.batch_size)


def sigterm_is_default(data):
    """Whether SIGTERM has its default action in the worker (1) or a handler (0)."""
    return torch.tensor([int(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)])


# ------------------------------------------------------------ persistent pools
def mapping_of_x(data):
    """Where the chunk's ``x`` is mapped (the start of its storage) and its first value."""
    x = data.get("x")
    row = torch.tensor([x.untyped_storage().data_ptr(), int(x.reshape(-1)[0])], dtype=torch.int64)
    return TensorDict({"m": row.expand(*data.batch_size, 2).clone()}, data.batch_size)


def pid_of_worker(data):
    return torch.full(data.batch_size, os.getpid(), dtype=torch.int64)


def pid_leaving_a_thread(data):
    """The worker's pid, after starting a non-daemon thread that keeps the process from exiting."""
    leave_a_thread(data)
    return pid_of_worker(data)


def write_ones_into(td) -> None:
    """An mp.Process target: writes into the tensordict it was given (under spawn: pickled)."""
    td["x"].fill_(1.0)


#: the chunk the tiny-chunk helpers fail on (far enough in for runs to be coalesced by then)
TINY_FAIL_AT = 700


def raise_at_tiny_fail(data):
    if int(data["x"].reshape(-1)[0]) == TINY_FAIL_AT:
        raise ValueError(f"bad chunk {TINY_FAIL_AT}")
    return data.empty().set("y", data["x"] + 1)


def exit_at_tiny_fail(data):
    if int(data["x"].reshape(-1)[0]) == TINY_FAIL_AT:
        os._exit(5)
    return data.empty().set("y", data["x"] + 1)


def chunk_and_worker(data):
    """Per element: the chunk get_worker_info() names, and the worker's id."""
    info = get_worker_info()
    row = torch.tensor([info.chunk, info.id])
    return TensorDict({"who": row.expand(*data.batch_size, 2).clone()}, data.batch_size)


def mixed_results(data):
    """Results of several layouts (and None) over consecutive chunks, decided by x."""
    x = int(data["x"].reshape(-1)[0])
    if x % 7 == 3:
        return None
    if x % 5 == 1:
        return TensorDict({"z": torch.full((*data.batch_size, 2), x, dtype=torch.int16)}, [])
    if x % 11 == 4:
        return TensorDict({"y": torch.ones(2000) * x}, [])  # too large to be held back
    return data.empty().set("y", data["x"] + 1)


def wait_for_gate_after_chunk_zero(data):
    """Chunk 0 at once; later chunks once the file named by ``TD_TEST_GATE`` exists."""
    if int(data["x"].reshape(-1)[0]) > 0:
        gate = os.environ["TD_TEST_GATE"]
        while not os.path.exists(gate):
            time.sleep(0.001)
    return data.empty().set("y", data["x"] + 1)


_OUT = torch.zeros(1)


def reuse_output_buffer(data):
    """``y = x + 1`` written into one buffer the worker reuses for every chunk (1-row chunks)."""
    _OUT.copy_(data["x"].reshape(1) + 1)
    return TensorDict({"y": _OUT}, [1])


def reads_randomly(data):
    """Whether this process's mapping of the file ``$TD_TEST_MAPPED_FILE`` is advised
    MADV_RANDOM (the ``rr`` flag of its ``/proc/self/smaps`` entry), one row per chunk."""
    path = os.environ["TD_TEST_MAPPED_FILE"]
    flags, current = set(), False
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[:1].isdigit() or line[:1] in "abcdef":  # a mapping's first line
                current = line.rstrip().endswith(path)
            elif current and line.startswith("VmFlags:"):
                flags.update(line.split()[1:])
    return data.empty().set("rr", torch.full(data.batch_size, "rr" in flags))


HELD_FAIL_AT = 150


def held_mixed(data):
    """Results of every kind over consecutive chunks, decided by x: flat tensordicts small and
    large (through a shared-memory segment), None, a bare tensor, a non-tensor leaf, another
    layout."""
    x = int(data["x"].reshape(-1)[0])
    if x % 7 == 3:
        return None
    if x % 5 == 1:
        return TensorDict({"z": torch.full((*data.batch_size, 2), x, dtype=torch.int16)}, [])
    if x % 11 == 4:
        return torch.full((3,), float(x))
    if x % 13 == 2:
        return TensorDict({"tag": NonTensorData(f"chunk {x}"), "y": data["x"] + 1}, [])
    if x % 3 == 0:
        return TensorDict({"big": torch.full((40_000,), float(x))}, [])  # 160 KiB: a segment
    return data.empty().set("y", data["x"] + 1)


def big_result(data):
    """A 128 KiB result (through a shared-memory segment) filled with the chunk's x."""
    x = float(data["x"].reshape(-1)[0])
    return TensorDict({"y": torch.full((32_768,), x)}, [])


def raise_at_held_fail(data):
    if int(data["x"].reshape(-1)[0]) == HELD_FAIL_AT:
        raise ValueError(f"bad chunk {HELD_FAIL_AT}")
    return big_result(data)


def sigkill_at_held_fail(data):
    if int(data["x"].reshape(-1)[0]) == HELD_FAIL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    return big_result(data)


def lambda_at_held_fail(data):
    if int(data["x"].reshape(-1)[0]) == HELD_FAIL_AT:
        return return_lambda(data)
    return big_result(data)
