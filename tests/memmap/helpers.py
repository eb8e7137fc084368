"""Importable helpers for the memmap tests: worker functions (run under fork and spawn) and
hand-written upstream-format directories.

Workers are module-level so that spawn can import them by name; every result travels back through
a pipe, so the parent waits on data, never on time.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

TYPE_TD = "<class 'tensordict._td.TensorDict'>"
TYPE_LAZY = "<class 'tensordict._lazy.LazyStackedTensorDict'>"
TYPE_NON_TENSOR = "<class 'tensordict.tensorclass.NonTensorData'>"
TYPE_NON_TENSOR_STACK = "<class 'tensordict.tensorclass.NonTensorStack'>"


# ====================================================================== sample data
DTYPES = [
    torch.float16,
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


def sample(dtype: torch.dtype, shape: tuple[int, ...] = (3, 4)) -> torch.Tensor:
    """Distinct, non-trivial values of ``dtype``."""
    base = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape) - 5
    if dtype is torch.bool:
        return base.remainder(3) == 0
    if dtype is torch.uint8:
        return (base + 5).to(dtype)
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    return base.to(dtype)


def raw_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


# ====================================================================== running a worker
def run_in_process(method: str, target: Callable[..., Any], *args: Any) -> Any:
    """Run ``target(conn, *args)`` in a fresh ``method`` process and return what it sends back.

    The worker sends ``("ok", value)`` or ``("error", traceback text)`` as pickle bytes. A worker
    that dies without answering makes this raise instead of hanging.
    """
    import multiprocessing as mp

    ctx = mp.get_context(method)
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(child, *args), daemon=True)
    proc.start()
    child.close()
    try:
        # poll() with a generous deadline only bounds a broken worker; a healthy one answers at
        # once and recv() returns as soon as the data is there.
        if not parent.poll(120):
            raise AssertionError(f"{method} worker sent nothing (exitcode {proc.exitcode})")
        status, value = pickle.loads(parent.recv_bytes())
    except EOFError:
        proc.join(30)
        raise AssertionError(f"{method} worker died (exitcode {proc.exitcode})") from None
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
            proc.join(30)
        parent.close()
    if status != "ok":
        raise AssertionError(f"{method} worker failed:\n{value}")
    return value


def _answer(conn: Any, fn: Callable[[], Any]) -> None:
    import traceback

    # Results go back as plain pickle bytes: tensors travel by value, not as shared-memory
    # handles that would die with this process.
    try:
        message = pickle.dumps(("ok", fn()))
    except BaseException:
        message = pickle.dumps(("error", traceback.format_exc()))
    conn.send_bytes(message)
    conn.close()


def _loads(payload: bytes, use_cloudpickle: bool) -> Any:
    if use_cloudpickle:
        import cloudpickle

        return cloudpickle.loads(payload)
    return pickle.loads(payload)


# ====================================================================== workers
def describe_views(conn: Any, payload: bytes, use_cloudpickle: bool) -> None:
    """Unpickle a dict of tensordicts / tensors; report their type, file, values, and pickled
    views of their views (for the parent to unpickle in turn)."""

    def work() -> dict[str, Any]:
        from tensordict import MemoryMappedTensor, TensorDict

        objs = _loads(payload, use_cloudpickle)
        out: dict[str, Any] = {}
        for name, obj in objs.items():
            leaf = obj["x"] if isinstance(obj, TensorDict) else obj
            out[name] = {
                "is_mmt": isinstance(leaf, MemoryMappedTensor),
                "filename": leaf.filename if isinstance(leaf, MemoryMappedTensor) else None,
                "values": leaf.as_subclass(torch.Tensor).clone(),
                # a view of the received view, pickled again: a view of a view after pickling
                "reviewed": pickle.dumps(leaf[1:][::2]),
            }
        return out

    _answer(conn, work)


def shared_mapping(conn: Any, payloads: list[bytes]) -> None:
    """Unpickle several chunks of the same file; report whether they share one mapping."""

    def work() -> dict[str, Any]:
        chunks = [pickle.loads(p) for p in payloads]
        leaves = [c["x"] for c in chunks]
        bases = {leaf.untyped_storage().data_ptr() for leaf in leaves}
        return {
            "n_bases": len(bases),
            "storage_nbytes": [leaf.untyped_storage().nbytes() for leaf in leaves],
            "sums": [float(leaf.sum()) for leaf in leaves],
        }

    _answer(conn, work)


def write_into_anonymous(conn: Any, td: Any) -> None:
    """Receive an anonymous memory-mapped tensordict (by handle) and write into it."""

    def work() -> dict[str, Any]:
        from tensordict import MemoryMappedTensor

        leaf = td["x"]
        before = leaf.as_subclass(torch.Tensor).clone()
        leaf.fill_(7)
        td["n", "y"].fill_(-1)
        return {
            "is_mmt": isinstance(leaf, MemoryMappedTensor),
            "filename": leaf.filename,
            "before": before,
        }

    _answer(conn, work)


def load_read_only(conn: Any, prefix: str) -> None:
    """Drop the capabilities that let root ignore file modes, then load ``prefix``."""

    def work() -> dict[str, Any]:
        from tensordict import TensorDict
        from tensordict.memmap import io  # noqa: F401  (imported while still privileged)

        try:
            drop_dac_capabilities()
        except OSError as err:
            return {"skip": f"cannot drop CAP_DAC_OVERRIDE here: {err}"}
        writable = os.access(os.path.join(prefix, "a.memmap"), os.W_OK)
        if writable:
            return {"skip": "file modes are not enforced on this file system"}
        td = TensorDict.load_memmap(prefix)
        values = td["a"].as_subclass(torch.Tensor).clone()
        nested = td["b", "c"].as_subclass(torch.Tensor).clone()
        td["a"][0] = 1000.0  # private copy-on-write mapping: never reaches the file
        return {
            "a": values,
            "c": nested,
            "a_after_write": float(td["a"][0]),
            "type": type(td["a"]).__name__,
        }

    _answer(conn, work)


# ====================================================================== privileges
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2


def drop_dac_capabilities() -> None:
    """Make this process obey file modes even as root (Linux capset; this process only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    mask = ~((1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)) & 0xFFFFFFFF
    data[0].effective &= mask
    data[0].permitted &= mask
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


# ====================================================================== upstream directories
def leaf_meta(array: np.ndarray, dtype: str) -> dict[str, Any]:
    return {"device": "cpu", "shape": list(array.shape), "dtype": dtype, "is_nested": False}


def td_meta(entries: dict[str, Any], shape: list[int]) -> dict[str, Any]:
    """A TensorDict meta.json as upstream 0.15 writes it: no _format_version, no _class."""
    return {**entries, "shape": shape, "device": "cpu", "_type": TYPE_TD}


def write_json(directory: str, meta: dict[str, Any], compact: bool = False) -> None:
    """``meta.json`` the way upstream writes it: orjson (compact, raw UTF-8) or stdlib json
    (default separators, ``\\uXXXX`` escapes)."""
    os.makedirs(directory, exist_ok=True)
    if compact:
        text = json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    else:
        text = json.dumps(meta).encode("ascii")
    with open(os.path.join(directory, "meta.json"), "wb") as f:
        f.write(text)


def write_array(path: str, array: np.ndarray) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.ascontiguousarray(array).tofile(path)
