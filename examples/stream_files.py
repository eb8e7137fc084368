"""Stream an HDF5 file and a Parquet file through worker processes, without loading either.

    pip install ".[h5,arrow]"
    python examples/stream_files.py                    # 200,000 rows
    python examples/stream_files.py --rows 20000

HDF5: ``TensorDict.from_h5(path)`` opens the file lazily (a ``PersistentTensorDict``): indexing
reads only the rows asked for. ``map_iter`` over it hands each worker chunk numbers, and the
worker reads its rows from the file itself (spawned workers reopen it by name).

Parquet: ``pyarrow`` reads the file one record batch at a time (``iter_batches``);
``TensorDict.from_arrow`` turns each batch into a tensordict without copying its columns, and
``append_memmap`` adds it to a memory-mapped dataset that ``map_iter`` then streams like any
other. Memory holds one batch at a time, whatever the size of the file.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import torch

from tensordict import TensorDict, append_memmap
from tensordict.formats import from_arrow


def column_sums(chunk: TensorDict) -> TensorDict:
    """Runs in a worker: the sum of each column over the chunk's rows."""
    return chunk.apply(lambda column: column.double().sum(0, keepdim=True), batch_size=[1])


def total(parts: list[TensorDict]) -> TensorDict:
    return torch.cat(parts).apply(lambda column: column.sum(0), batch_size=[])


def write_files(folder: str, rows: int) -> tuple[str, str]:
    import h5py
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 8), dtype=np.float32)
    label = rng.integers(0, 10, rows)
    h5_path = os.path.join(folder, "data.h5")
    with h5py.File(h5_path, "w") as f:
        f["x"], f["label"] = x, label
    parquet_path = os.path.join(folder, "data.parquet")
    table = pa.table({"x": pa.FixedSizeListArray.from_arrays(x.reshape(-1), 8), "label": label})
    pq.write_table(table, parquet_path, row_group_size=max(1, rows // 8))
    return h5_path, parquet_path


def stream_h5(path: str, workers: int) -> TensorDict:
    data = TensorDict.from_h5(path)  # nothing read yet
    parts = data.map_iter(
        column_sums, num_workers=workers, chunksize=8192, generator=torch.Generator()
    )
    return total(list(parts))


def stream_parquet(path: str, folder: str, workers: int) -> TensorDict:
    import pyarrow.parquet as pq

    dataset = os.path.join(folder, "from-parquet")
    for i, batch in enumerate(pq.ParquetFile(path).iter_batches(batch_size=8192)):
        rows = from_arrow(batch)
        if i == 0:
            rows.memmap(dataset)  # the first batch creates the dataset
        else:
            append_memmap(dataset, rows)  # the others grow it
    data = TensorDict.load_memmap(dataset)
    parts = data.map_iter(
        column_sums, num_workers=workers, chunksize=8192, generator=torch.Generator()
    )
    return total(list(parts))


def main(argv: list[str] | None = None) -> tuple[TensorDict, TensorDict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        h5_path, parquet_path = write_files(folder, args.rows)
        from_h5 = stream_h5(h5_path, args.workers)
        from_parquet = stream_parquet(parquet_path, folder, args.workers)
    for name, sums in (("HDF5", from_h5), ("Parquet", from_parquet)):
        print(f"{name}: sum of x {sums['x'].sum():.2f}, sum of labels {int(sums['label'])}")
    assert torch.allclose(from_h5["x"], from_parquet["x"])
    assert int(from_h5["label"]) == int(from_parquet["label"])
    return from_h5, from_parquet


if __name__ == "__main__":
    main()
