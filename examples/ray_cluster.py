"""The same ``map_iter`` job on a Ray cluster: pass Ray's multiprocessing ``Pool`` as ``pool=``.

    pip install ".[ray]"            # on every node, in the same environment
    python examples/ray_cluster.py                     # a local Ray cluster on this machine
    RAY_ADDRESS=10.0.0.1:6379 python examples/ray_cluster.py --data /shared/datasets/train

Without ``RAY_ADDRESS`` (or ``--address``) Ray starts a cluster on this machine, so the script
runs anywhere. On a real cluster the dataset must be on a file system that every node mounts at
the same path (``--data``): each actor opens the memory-mapped files by name, and only chunk
numbers travel. ``fn`` must be importable on every node, or defined in the script (then Ray
sends it by value).
"""

from __future__ import annotations

import argparse
import tempfile

import torch

from tensordict import TensorDict


def row_norms(chunk: TensorDict) -> TensorDict:
    """Runs in a Ray actor: the norm of each row of the chunk."""
    return TensorDict({"norm": chunk["x"].norm(dim=-1)}, chunk.batch_size)


def main(argv: list[str] | None = None) -> torch.Tensor:
    from ray.util.multiprocessing import Pool

    import ray

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--data", help="a memory-mapped dataset every node can read")
    parser.add_argument("--address", help="the cluster (default: RAY_ADDRESS, else local)")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of a local cluster")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        if args.data:
            data = TensorDict.load_memmap(args.data)
        else:  # a dataset of our own, on this machine's disk (fine for a local cluster)
            x = torch.randn(args.rows, 64, generator=torch.Generator().manual_seed(0))
            data = TensorDict({"x": x}, [args.rows]).memmap_(folder)
        local = args.address is None
        ray.init(address=args.address, num_cpus=args.cpus if local else None, log_to_driver=False)
        try:
            nodes = len(ray.nodes())
            with Pool() as pool:  # one actor per CPU of the cluster
                norms = torch.cat(
                    [r["norm"] for r in data.map_iter(row_norms, chunksize=16_384, pool=pool)]
                )
        finally:
            ray.shutdown()
        expected = data["x"].norm(dim=-1)
    assert torch.allclose(norms, expected)
    print(f"{norms.numel()} row norms computed on {nodes} node(s); mean {norms.mean():.3f}")
    return norms


if __name__ == "__main__":
    main()
