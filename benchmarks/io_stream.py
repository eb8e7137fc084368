"""Streaming a 1 GiB HDF5 file and a 1 GiB Parquet file through ``map_iter`` (2 workers).

Run: ``python -m benchmarks.io_stream [--size 1GiB] [--repeat R]`` (writes two files of that size to
a temporary directory and removes them; ``--size 64MiB`` is a smoke run). Every contender reduces
each chunk of 65,536 rows to its sum, so the work is reading.

HDF5 (one float32 dataset of 256 columns):

- ``map_iter``: ``PersistentTensorDict.from_h5(path).map_iter(fn, num_workers=2, chunksize=...)``;
  each worker reads its own rows from the file (a chunk is a slice, not data);
- ``upstream map_iter``: the same lines under upstream tensordict 0.15.3 (its venv, when present),
  timed inside that process;
- ``h5py loop``: one process reading ``ds[start:stop]`` chunk after chunk.

Parquet (64 float32 columns):

- ``map_iter``: ``TensorDict.from_parquet(path)`` then ``map_iter`` over it (workers forked);
- ``upstream map_iter``: the same lines under upstream 0.15.3;
- ``pyarrow loop``: one process iterating ``ParquetFile.iter_batches``.

Reported: GB/s (median, min, max over the repeats) and the ratio of medians to the library loop.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHUNK = 65_536
H5_COLS = 256
PQ_COLS = 64
UPSTREAM = Path(os.environ.get("UPSTREAM_VENV", Path.home() / ".cache" / "td-upstream-venv"))


def chunk_sum(chunk: Any) -> Any:
    """The work per chunk: read every value once."""
    return torch.tensor([float(v.sum()) for v in chunk.values(True, True)]).sum()


def write_h5(path: Path, size: int) -> int:
    import h5py

    rows = size // (H5_COLS * 4)
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("x", shape=(rows, H5_COLS), dtype="float32")
        rng = np.random.default_rng(0)
        for start in range(0, rows, CHUNK):
            stop = min(start + CHUNK, rows)
            ds[start:stop] = rng.random((stop - start, H5_COLS), dtype=np.float32)
    return rows * H5_COLS * 4


def write_parquet(path: Path, size: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = size // (PQ_COLS * 4)
    rng = np.random.default_rng(0)
    schema = pa.schema([(f"c{i}", pa.float32()) for i in range(PQ_COLS)])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, 4 * CHUNK):
            n = min(4 * CHUNK, rows - start)
            cols = [pa.array(rng.random(n, dtype=np.float32)) for _ in range(PQ_COLS)]
            writer.write_table(pa.Table.from_arrays(cols, schema=schema))
    return rows * PQ_COLS * 4


def h5_map_iter(path: Path) -> float:
    from tensordict import PersistentTensorDict

    t0 = time.perf_counter()
    ptd = PersistentTensorDict.from_h5(path)
    for _ in ptd.map_iter(chunk_sum, num_workers=2, chunksize=CHUNK, generator=torch.Generator()):
        pass
    ptd.close()
    return time.perf_counter() - t0


def h5_loop(path: Path) -> float:
    import h5py

    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        ds = f["x"]
        for start in range(0, ds.shape[0], CHUNK):
            float(ds[start : start + CHUNK].sum())
    return time.perf_counter() - t0


def parquet_map_iter(path: Path) -> float:
    from tensordict import TensorDict

    t0 = time.perf_counter()
    td = TensorDict.from_parquet(path)
    for _ in td.map_iter(chunk_sum, num_workers=2, chunksize=CHUNK, generator=torch.Generator()):
        pass
    return time.perf_counter() - t0


def parquet_loop(path: Path) -> float:
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    for batch in pq.ParquetFile(path).iter_batches(batch_size=CHUNK):
        sum(float(np.asarray(c).sum()) for c in batch.columns)
    return time.perf_counter() - t0


UPSTREAM_SCRIPT = """
import json, sys, time, torch
from tensordict import PersistentTensorDict, TensorDict
def chunk_sum(chunk):
    return torch.tensor([float(v.sum()) for v in chunk.values(True, True)]).sum()
kind, path, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
td = PersistentTensorDict.from_h5(path) if kind == "h5" else TensorDict.from_parquet(path)
for _ in td.map_iter(chunk_sum, num_workers=2, chunksize=chunk):
    pass
print(json.dumps(time.perf_counter() - t0))
"""


def upstream(kind: str, path: Path) -> float | None:
    """Seconds of the same map_iter under upstream tensordict, or None without its venv."""
    python = UPSTREAM / "bin" / "python"
    if not python.exists():
        return None
    script = Path(tempfile.mkdtemp()) / "upstream_io.py"
    script.write_text(textwrap.dedent(UPSTREAM_SCRIPT))
    done = subprocess.run(
        [str(python), "-W", "ignore", str(script), kind, str(path), str(CHUNK)],
        capture_output=True,
        text=True,
        cwd=script.parent,
        timeout=1800,
        # upstream's package, never this tree's (a PYTHONPATH pointing at src/ would win)
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    shutil.rmtree(script.parent, ignore_errors=True)
    if done.returncode:
        print(f"upstream {kind} failed: {done.stderr[-500:]}", file=sys.stderr)
        return None
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def run(size_mib: int = 1024, repeat: int = 3) -> dict[str, Any]:
    """Write both files, time every contender ``repeat`` times (interleaved); rows and raw."""
    size = size_mib << 20
    folder = Path(tempfile.mkdtemp(prefix="io-stream-"))
    try:
        files = {"h5": folder / "data.h5", "parquet": folder / "data.parquet"}
        nbytes = {
            "h5": write_h5(files["h5"], size),
            "parquet": write_parquet(files["parquet"], size),
        }
        contenders = {
            "h5": {"map_iter": h5_map_iter, "h5py loop": h5_loop},
            "parquet": {"map_iter": parquet_map_iter, "pyarrow loop": parquet_loop},
        }
        seconds: dict[str, dict[str, list[float]]] = {k: {} for k in contenders}
        for _ in range(repeat):
            for kind, fns in contenders.items():
                for name, fn in fns.items():
                    seconds[kind].setdefault(name, []).append(fn(files[kind]))
                up = upstream(kind, files[kind])
                if up is not None:
                    seconds[kind].setdefault("upstream map_iter", []).append(up)
        return {"bytes": nbytes, "seconds": seconds, "rows": _rows(nbytes, seconds)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _rows(nbytes: dict[str, int], seconds: dict[str, dict[str, list[float]]]) -> list[dict]:
    rows = []
    for kind, by_name in seconds.items():
        loop = "h5py loop" if kind == "h5" else "pyarrow loop"
        base = statistics.median(by_name[loop])
        gb = nbytes[kind] / 1e9
        for name, samples in by_name.items():
            med = statistics.median(samples)
            rows.append(
                {
                    "name": f"{kind} {nbytes[kind] >> 20} MiB: {name}",
                    "median": gb / med,
                    "min": gb / max(samples),
                    "max": gb / min(samples),
                    "unit": "GB/s",
                    "ratios": {} if name == loop else {loop: {"median": base / med}},
                    "reference": "",
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.io_stream", description=__doc__)
    parser.add_argument("--size", default="1GiB", help="size of each file, e.g. 64MiB or 1GiB")
    parser.add_argument("--size-mib", type=int, default=None, help="the same in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from tensordict.sizes import parse_size

    size_mib = args.size_mib if args.size_mib is not None else parse_size(args.size) >> 20
    torch.set_num_threads(1)
    raw = run(max(size_mib, 1), args.repeat)
    for row in raw["rows"]:
        ratio = "".join(f"  {v['median']:.2f}x {k}" for k, v in row["ratios"].items())
        print(
            f"{row['name']:<40} {row['median']:6.2f} GB/s "
            f"(min {row['min']:.2f}, max {row['max']:.2f}){ratio}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
