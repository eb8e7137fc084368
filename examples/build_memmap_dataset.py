"""Build a memory-mapped dataset bigger than memory from many files, with worker processes that
write straight into it.

    python examples/build_memmap_dataset.py                     # 64 files of 4,096 rows
    python examples/build_memmap_dataset.py --files 8 --rows-per-file 512

The raw data here is a folder of ``.npy`` files (stand-ins for images, audio or logs). The steps:

1. ``memmap_like`` preallocates the dataset's files on disk at their final size (nothing is
   held in memory, so the dataset may be larger than RAM);
2. ``map(..., out=dataset)`` runs ``load_files`` in worker processes on chunks of a small
   tensordict of file numbers; each worker reads its files, decodes them and writes its rows
   into the dataset's files itself: nothing travels back to this process;
3. ``TensorDict.load_memmap`` opens the finished dataset, in this or any later process.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile

import numpy as np
import torch

from tensordict import TensorDict

FEATURES = 32


def write_raw_files(folder: str, files: int, rows_per_file: int) -> None:
    """The raw data: one ``.npy`` file of ``rows_per_file`` x FEATURES float32 per source."""
    rng = np.random.default_rng(0)
    for i in range(files):
        array = rng.standard_normal((rows_per_file, FEATURES), dtype=np.float32) + i
        np.save(os.path.join(folder, f"part-{i:05d}.npy"), array)


def load_files(chunk: TensorDict, folder: str, rows_per_file: int) -> TensorDict:
    """Runs in a worker: the rows of the files whose numbers are in ``chunk``.

    ``chunk["file"]`` holds one file number per row of the chunk's batch (one row per file
    here); the result has one row per file, each holding that file's rows."""
    rows = [np.load(os.path.join(folder, f"part-{int(i):05d}.npy")) for i in chunk["file"]]
    x = torch.from_numpy(np.stack(rows))
    return TensorDict(
        {"x": x, "source": chunk["file"][:, None].expand(-1, rows_per_file).clone()},
        chunk.batch_size,
    )


def build(raw: str, out: str, files: int, rows_per_file: int, workers: int) -> TensorDict:
    # what the dataset looks like (no memory used: expanded empty tensors)
    layout = TensorDict(
        {
            "x": torch.empty((), dtype=torch.float32).expand(files, rows_per_file, FEATURES),
            "source": torch.empty((), dtype=torch.int64).expand(files, rows_per_file),
        },
        [files],
    )
    dataset = layout.memmap_like(out)  # the files, at their final size, zero-filled
    todo = TensorDict({"file": torch.arange(files)}, [files])
    todo.map(
        functools.partial(load_files, folder=raw, rows_per_file=rows_per_file),
        num_workers=workers,
        chunksize=4,
        out=dataset,
        generator=torch.Generator(),
    )
    data = TensorDict.load_memmap(out)  # in this process, or any later one
    data.batch_size = [files, rows_per_file]  # one row per sample ...
    return data.view(-1)  # ... in one batch dimension (a view: nothing is copied)


def main(argv: list[str] | None = None) -> TensorDict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--rows-per-file", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", help="the dataset's folder (default: a temporary one)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        raw = os.path.join(scratch, "raw")
        os.mkdir(raw)
        write_raw_files(raw, args.files, args.rows_per_file)
        out = args.out or os.path.join(scratch, "dataset")
        data = build(raw, out, args.files, args.rows_per_file, args.workers)
        size = data["x"].numel() * 4 / 2**20
        print(f"{data.batch_size[0]} samples, {size:.1f} MiB of features in {out}")
        # each file's rows hold its number + noise: check a few
        for i in (0, args.files - 1):
            rows = data[data["source"] == i]
            print(f"file {i}: {rows.batch_size[0]} rows, mean {rows['x'].mean():.2f}")
        return data.clone()  # in memory: the temporary folder goes away


if __name__ == "__main__":
    main()
