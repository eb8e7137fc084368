"""send/recv and broadcast of a tensordict between two gloo processes, here and with upstream
tensordict, against one flat tensor sent with ``torch.distributed`` (the limit).

Run: ``python -m benchmarks.distributed [--quick]``. The workload is a TensorDict of 100 float32
leaves (10 nested tensordicts of 10 leaves, batch size ``[rows]``, leaves ``[rows, 8]``) of 64 MiB
in all, not consolidated; the limit sends one ``uint8`` tensor of the same size.

Timed, per operation, on rank 0, between two barriers (so both ranks are done):

* ``send/recv``: rank 0 ``td.send(1)``, rank 1 ``td.recv(0)`` into a tensordict of zeros
  (limit: ``dist.send`` / ``dist.recv`` of the flat tensor into an existing buffer);
* ``broadcast``: rank 0 ``td.broadcast(0)``, rank 1 ``TensorDict().broadcast(0)``; both return
  a consolidated tensordict, so rank 0 copies its 64 MiB into one storage (limit:
  ``dist.broadcast`` into an existing buffer; into a fresh ``torch.empty`` each time, the memory
  a new tensordict needs; and followed by a copy of 64 MiB on rank 0, the consolidated result);
* ``broadcast (consolidated source)``: the same from a tensordict rank 0 consolidated once before
  the timed calls (``td.consolidate(metadata=True)``), as a loop that broadcasts the same
  tensordict does: no copy is then needed on rank 0 (limit: ``dist.broadcast`` into an existing
  buffer). The plain ``broadcast`` must copy rank 0's leaves into one storage (its result is
  consolidated, upstream's too), so its fair limit is ``broadcast + source copy``.

Each contender is a pair of processes (``--rank``), started with this interpreter (here, and the
limit) or upstream's (``$TD_UPSTREAM_PYTHON``, default ``~/.cache/td-upstream-venv/bin/python``);
the contenders take turns, round after round, so that machine noise hits all alike, and a ratio
is taken within a round, then the median over rounds. Every process runs one torch thread, with
glibc's mmap threshold fixed (fresh buffers always fault their pages in, as in
``benchmarks/consolidate.py``), on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIB = 1 << 20
UPSTREAM_PYTHON = Path(
    os.environ.get("TD_UPSTREAM_PYTHON", "~/.cache/td-upstream-venv/bin/python")
).expanduser()
FIXED_MMAP_THRESHOLD = "glibc.malloc.mmap_threshold=131072"
OPS = {
    "tensordict": ("send/recv", "broadcast", "broadcast (consolidated source)"),
    "limit": ("send/recv", "broadcast", "broadcast (fresh buffer)", "broadcast + source copy"),
}


def _workload(size_mib: int, fill: float) -> Any:
    import torch

    from tensordict import TensorDict

    rows = size_mib * MIB // (100 * 8 * 4)
    groups = {
        f"g{g}": TensorDict({f"x{i}": torch.full((rows, 8), fill) for i in range(10)}, [rows])
        for g in range(10)
    }
    return TensorDict(groups, batch_size=[rows])


def _ops(contender: str, rank: int, size_mib: int) -> tuple[dict[str, Callable[[], Any]], Any]:
    """The operations this rank times, and (rank 1 of a tensordict pair) the tensordict that
    ``send/recv`` fills."""
    import torch
    import torch.distributed as dist

    from tensordict import TensorDict

    if contender == "limit":
        nbytes = (size_mib * MIB // (100 * 8 * 4)) * 100 * 8 * 4
        flat = torch.full((nbytes,), 1 if rank == 0 else 0, dtype=torch.uint8)

        def fresh() -> None:
            dist.broadcast(flat if rank == 0 else torch.empty(nbytes, dtype=torch.uint8), 0)

        send: Callable[[], Any] = (lambda: dist.send(flat, 1)) if rank == 0 else (
            lambda: dist.recv(flat, 0)
        )  # fmt: skip
        copy = torch.zeros_like(flat)  # (warm: its pages faulted in once)

        def then_copy() -> None:
            dist.broadcast(flat, 0)
            if rank == 0:
                copy.copy_(flat)

        ops = {"send/recv": send, "broadcast": lambda: dist.broadcast(flat, 0)}
        ops["broadcast (fresh buffer)"] = fresh
        ops["broadcast + source copy"] = then_copy
        return ops, None
    td = _workload(size_mib, 1.0 if rank == 0 else 0.0)
    if rank == 0:
        # (consolidated once, untimed: what a loop that broadcasts the same storage sends)
        cons = td.consolidate(metadata=True)
        ops = {"send/recv": lambda: td.send(1), "broadcast": lambda: td.broadcast(0)}
        ops["broadcast (consolidated source)"] = lambda: cons.broadcast(0)
        return ops, None
    ops = {"send/recv": lambda: td.recv(0), "broadcast": lambda: TensorDict().broadcast(0)}
    ops["broadcast (consolidated source)"] = lambda: TensorDict().broadcast(0)
    return ops, td


def measure(contender: str, rank: int, port: int, size_mib: int, repeat: int) -> dict[str, Any]:
    """Times of each operation on this rank (rank 0's are the result), and where the
    ``tensordict`` it ran was imported from."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    ops, received = _ops(contender, rank, size_mib)
    times: dict[str, list[float]] = {}
    for name, op in ops.items():
        dist.barrier()
        out = op()  # warm-up, checked
        if name.startswith("broadcast") and contender == "tensordict" and rank == 1:
            assert float(out["g9", "x9"][-1, -1]) == 1.0, "broadcast: wrong values"
        samples = []
        for _ in range(repeat):
            dist.barrier()
            t0 = time.perf_counter()
            op()
            dist.barrier()
            samples.append(time.perf_counter() - t0)
        times[name] = samples
    if received is not None:
        assert float(received["g0", "x0"][0, 0]) == 1.0, "send/recv: wrong values"
    dist.barrier()
    dist.destroy_process_group()
    import tensordict

    return {"times": times, "module": tensordict.__file__}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pair(python: Path | str, contender: str, size_mib: int, repeat: int) -> dict[str, Any]:
    """One contender's times: two processes of ``python``; rank 0's result."""
    port, script = _free_port(), str(Path(__file__).resolve())
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.setdefault("GLIBC_TUNABLES", FIXED_MMAP_THRESHOLD)
    root = str(Path(__file__).resolve().parents[1])
    if str(python) == sys.executable:  # (this tree's tensordict first, as in the parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p) or root
    else:
        env.pop("PYTHONPATH", None)
    procs = []
    for rank in (0, 1):
        args = ["--rank", str(rank), "--port", str(port), "--contender", contender]
        args += ["--size", str(size_mib), "--repeat", str(repeat)]
        procs.append(
            subprocess.Popen(
                [str(python), script, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=root,
            )
        )
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode:
            raise RuntimeError(f"{python} {contender} failed:\n{err[-2000:]}")
    result: dict[str, Any] = json.loads(outs[0][0].strip().splitlines()[-1])
    ours = Path(result["module"]).resolve().is_relative_to(Path(root).resolve())
    if ours and str(python) != sys.executable:  # (upstream's must not import this tree)
        raise RuntimeError(f"{python} imported tensordict from {result['module']}, not its own")
    times: dict[str, Any] = result["times"]
    return times


def run(
    rounds: int = 5, repeat: int = 5, size_mib: int = 64, upstream: bool = True
) -> dict[str, Any]:
    """Rounds of (here, upstream, limit) pairs in turn; per operation: GB/s and the ratios."""
    contenders: list[tuple[str, Path | str, str]] = [("here", sys.executable, "tensordict")]
    if upstream and UPSTREAM_PYTHON.exists():
        contenders.append(("upstream", UPSTREAM_PYTHON, "tensordict"))
    contenders.append(("limit", sys.executable, "limit"))
    medians: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in contenders}
    for r in range(rounds):
        turn = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
        for name, python, contender in turn:
            times = _pair(python, contender, size_mib, repeat)
            medians[name].append({op: statistics.median(t) for op, t in times.items()})
    nbytes = (size_mib * MIB // (100 * 8 * 4)) * 100 * 8 * 4
    rows = []
    for op in OPS["tensordict"]:
        for name in ("here", "upstream"):
            if not medians.get(name):
                continue
            rows.append(_row(op, name, medians, nbytes))
    for op in OPS["limit"]:
        rows.append(_row(op, "limit", medians, nbytes))
    config = {"rounds": rounds, "repeat": repeat, "size_bytes": nbytes, "leaves": 100}
    return {"rows": rows, "config": config, "medians": medians}


def _row(op: str, name: str, medians: dict[str, list[dict[str, float]]], nbytes: int) -> dict:
    seconds = [m[op] for m in medians[name]]
    rates = [nbytes / s / 1e9 for s in seconds]
    row: dict[str, Any] = {
        "name": f"{op} {nbytes / MIB:.0f} MiB, 100 leaves: {name}",
        "unit": "GB/s",
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "ms": statistics.median(seconds) * 1e3,
        "ratios": {},
        "reference": "",
    }
    if name == "here":
        refs = [("upstream", "upstream", op), ("limit", "limit", op.split(" (")[0])]
        if op == "broadcast":
            refs.append(("limit, fresh buffer", "limit", "broadcast (fresh buffer)"))
            refs.append(("limit + source copy", "limit", "broadcast + source copy"))
        for label, ref, ref_op in refs:
            if medians.get(ref):  # per round, like with like: ours over the reference's rate
                pairs = zip(medians[name], medians[ref])
                ratios = [theirs[ref_op] / ours[op] for ours, theirs in pairs]
                row["ratios"][label] = {"median": statistics.median(ratios)}
        row["reference"] = "target >= 1.0x upstream and >= 0.8x limit"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, help="(internal) measure as this rank")
    parser.add_argument("--port", type=int)
    parser.add_argument("--contender", choices=sorted(OPS))
    parser.add_argument("--size", type=int, default=64, help="MiB")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="16 MiB, 2 rounds of 3")
    args = parser.parse_args()
    if args.rank is not None:
        print(json.dumps(measure(args.contender, args.rank, args.port, args.size, args.repeat)))
        return
    if args.quick:
        raw = run(rounds=2, repeat=3, size_mib=16)
    else:
        raw = run(rounds=args.rounds, repeat=args.repeat, size_mib=args.size)
    for row in raw["rows"]:
        ratios = ", ".join(f"{r['median']:.2f}x {k}" for k, r in row["ratios"].items())
        print(f"{row['name']:<52} {row['median']:6.2f} GB/s {row['ms']:8.1f} ms  {ratios}")


if __name__ == "__main__":
    main()
