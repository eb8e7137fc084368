"""The functions the map_iter benchmarks run in worker processes, and the DataLoader dataset.

They live at module level in a module of their own so that ``spawn`` workers (and
``multiprocessing.Pool`` workers) can import them by name.
"""

from __future__ import annotations

import itertools
import os
import pickle
import selectors
import struct
from collections.abc import Callable
from typing import Any

import torch

from tensordict import NonTensorStack, TensorDict


def reduce_chunk(td: TensorDict) -> TensorDict:
    """The [map] reduce: a row sum, 1 KiB in -> 4 bytes out."""
    return td.empty().set("y", td["x"].sum(-1))


def transform_chunk(td: TensorDict) -> TensorDict:
    """The [map] transform: ``y = 2 * x``, as many bytes out as in."""
    return td.empty().set("y", td["x"] * 2)


def no_collate(item: Any) -> Any:
    """DataLoader ``collate_fn`` that hands an item over as it is (a TensorDict is not a dict)."""
    return item


def plain_loop(td: TensorDict, fn: Callable[[TensorDict], Any], chunksize: int) -> int:
    """The reference: ``fn`` on every chunk in this process, one thread of work. Returns chunks."""
    n = td.batch_size[0]
    count = 0
    for s in range(0, n, chunksize):
        fn(td[s : s + chunksize])
        count += 1
    return count


class ChunkDataset(torch.utils.data.Dataset):
    """A map-style dataset whose item ``i`` is ``fn(td[i * cs:(i + 1) * cs])``.

    Used with ``DataLoader(batch_size=None, collate_fn=no_collate)``, so that the DataLoader's
    workers do exactly what map_iter's workers do: slice a chunk and apply ``fn`` to it.
    """

    def __init__(self, td: TensorDict, fn: Callable[[TensorDict], Any], chunksize: int) -> None:
        self.td = td
        self.fn = fn
        self.chunksize = chunksize
        self.n = td.batch_size[0]

    def __len__(self) -> int:
        return -(-self.n // self.chunksize)

    def __getitem__(self, i: int) -> Any:
        s = i * self.chunksize
        return self.fn(self.td[s : s + self.chunksize])


# ---------------------------------------------------------------------- work that needs cores
#: the matmul workload's weights (fixed, so every process computes the same thing)
_W = torch.randn(256, 256, generator=torch.Generator().manual_seed(0)) / 16


def pyrows_chunk(td: TensorDict) -> TensorDict:
    """Pure Python per row (GIL-bound): mean, spread and zero crossings of the first 32 values."""
    feats = []
    for row in td["x"][:, :32].tolist():
        mean = sum(row) / len(row)
        spread = sum((v - mean) ** 2 for v in row) / len(row)
        crossings = sum(1 for a, b in itertools.pairwise(row) if (a - mean) * (b - mean) < 0)
        feats.append((mean, spread, float(crossings)))
    return td.empty().set("y", torch.tensor(feats))


def matmul_chunk(td: TensorDict) -> TensorDict:
    """``(x @ W).relu().sum(-1)`` with W 256x256 (torch-bound; torch threads may help)."""
    return td.empty().set("y", (td["x"] @ _W).relu().sum(-1))


def decode_chunk(td: TensorDict) -> TensorDict:
    """Bytes -> tensor per sample: a 32x32 uint8 image, scaled, standardised, column means."""
    out = []
    for raw in td["raw"]:
        img = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(32, 32).float().div_(255)
        img = (img - img.mean()) / (img.std() + 1e-6)
        out.append(img.mean(0))
    return td.empty().set("y", torch.stack(out))


def encoded_images(n: int) -> TensorDict:
    """``n`` samples whose ``raw`` entry is 1,024 bytes (a 32x32 uint8 image), in memory."""
    gen = torch.Generator().manual_seed(0)
    pool = [bytes(torch.randint(0, 256, (1024,), generator=gen, dtype=torch.uint8).numpy())]
    pool += [bytes(reversed(pool[0])), bytes(sorted(pool[0]))]
    return TensorDict({"raw": NonTensorStack(*[pool[i % 3] for i in range(n)])}, [n])


def bare_processes(
    td: TensorDict,
    fn: Callable[[TensorDict], Any],
    chunksize: int,
    copy: bool = False,
    send: bool = False,
) -> int:
    """The limit of process parallelism: two forked processes run ``fn`` over alternate chunks,
    with no engine and nothing sent back. Returns the chunks run.

    ``copy=True``: each process also copies every result's leaves once into a warm buffer it
    reuses, the one copy a result that crosses processes needs at least (the floor for
    workloads with large results).

    ``send=True``: each process also sends every result back, pickled (``pickle.dumps``, one
    length-prefixed message per result through a pipe), and this process reads and unpickles
    each one as it comes (the fair limit for tiny chunks, whose results must reach the caller).
    """
    n = td.batch_size[0]
    starts = list(range(0, n, chunksize))
    pids, pipes = [], []
    for wid in range(2):
        read_end, write_end = os.pipe() if send else (-1, -1)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                torch.set_num_threads(1)
                for other in pipes:  # the sibling's read end: not ours to hold
                    os.close(other)
                sink: dict[Any, torch.Tensor] = {}
                out = os.fdopen(write_end, "wb", buffering=1 << 16) if send else None
                for s in starts[wid::2]:
                    result = fn(td[s : s + chunksize])
                    if copy and result is not None:
                        _copy_leaves(result, sink)
                    if out is not None:
                        send_result(out, result)
                if out is not None:
                    out.close()
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
        if send:
            os.close(write_end)
            pipes.append(read_end)
    received = _receive_all(pipes) if send else 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"a bare benchmark process (pid {pid}) failed")
    if send and received != len(starts):
        raise RuntimeError(f"the bare processes sent {received} results for {len(starts)} chunks")
    return len(starts)


_LENGTH = struct.Struct("<I")


def send_result(out: Any, result: Any) -> None:
    """Write ``result`` pickled, length-prefixed, to the file ``out`` and flush it."""
    data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(data)))
    out.write(data)
    out.flush()


def end_results(out: Any) -> None:
    """Write the end of a stream of results (an empty message) without closing ``out``."""
    out.write(_LENGTH.pack(0))
    out.flush()


def _receive_all(fds: list[int], close: bool = True) -> int:
    """Read length-prefixed pickles from ``fds``, unpickling every one, until each ends (closes,
    or sends an empty message: then it stays open); closes them if ``close``. Returns how many
    results came."""
    count = 0
    buffers = {fd: bytearray() for fd in fds}
    with selectors.DefaultSelector() as selector:
        for fd in fds:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                fd = key.fd
                data = os.read(fd, 1 << 16)
                buf = buffers[fd]
                buf += data
                pos, ended = 0, not data
                while not ended and len(buf) - pos >= _LENGTH.size:
                    (length,) = _LENGTH.unpack_from(buf, pos)
                    end = pos + _LENGTH.size + length
                    if len(buf) < end:
                        break
                    if length:
                        pickle.loads(memoryview(buf)[pos + _LENGTH.size : end])
                        count += 1
                    else:
                        ended = True
                    pos = end
                del buf[:pos]
                if ended:
                    selector.unregister(fd)
                    if close:
                        os.close(fd)
    return count


def _copy_leaves(result: Any, sink: dict[Any, torch.Tensor]) -> None:
    """Copy the leaves of ``result`` into buffers of ``sink`` (allocated once, then reused)."""
    leaves = (
        result.values(include_nested=True, leaves_only=True)
        if isinstance(result, TensorDict)
        else [result]
    )
    for i, leaf in enumerate(leaves):
        raw = leaf.contiguous().view(-1).view(torch.uint8)
        buf = sink.get(i)
        if buf is None or buf.numel() < raw.numel():
            buf = sink[i] = torch.empty(raw.numel(), dtype=torch.uint8)
            buf.fill_(0)  # its pages are allocated here, once
        buf[: raw.numel()].copy_(raw)


class IndexDataset(torch.utils.data.Dataset):
    """A dataset whose item for a list of row indices is ``fn(td[indices])`` (a shuffled chunk),
    for ``DataLoader(sampler=BatchSampler(RandomSampler(...)), batch_size=None)``."""

    def __init__(self, td: TensorDict, fn: Callable[[TensorDict], Any]) -> None:
        self.td = td
        self.fn = fn

    def __len__(self) -> int:
        return int(self.td.batch_size[0])

    def __getitem__(self, rows: Any) -> Any:
        return self.fn(self.td[torch.as_tensor(rows)])
