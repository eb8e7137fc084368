"""Objects pickled by one tensordict package and loaded by the other (this one and upstream
0.15.3): built and described with API both packages share, so the same code runs in both venvs
(imported as ``tests.core.serial.pickle_interop_objects`` from the repository root)."""

from __future__ import annotations

from typing import Any

import torch

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    tensorclass,
)


@tensorclass
class Point:
    """A tensorclass both packages import from this module."""

    x: torch.Tensor
    label: str


def build(folder: str) -> dict[str, Any]:
    """The objects, by name (``folder``: where the memory-mapped one lives)."""
    base = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    td = TensorDict(a=torch.arange(3), b={"c": base[:3]}, batch_size=[3], names=["n"], device="cpu")
    locked = TensorDict(a=torch.ones(2, 2), nested={"z": torch.zeros(2)}, batch_size=[2])
    locked.lock_()
    lazy = LazyStackedTensorDict.lazy_stack(
        [TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2))], 0
    )
    non_tensor = TensorDict(a=torch.zeros(2), s=NonTensorData("hi", batch_size=[2]), batch_size=[2])
    stack = TensorDict(a=torch.zeros(2), s=NonTensorStack("x", "y"), batch_size=[2])
    consolidated = TensorDict(a=torch.arange(3), b={"c": torch.ones(3, 2)}, batch_size=[3])
    # 64 KiB and more: the storage lives in a bytes object here, which protocols 3-4 write as is
    large = TensorDict(a=torch.arange(16384, dtype=torch.int32), b={"c": torch.ones(4)})
    point = Point(x=torch.arange(4.0).reshape(2, 2), label="p", batch_size=[2])
    memmapped = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3])
    return {
        "td": td,
        "locked": locked,
        "lazy": lazy,
        "non_tensor": non_tensor,
        "stack": stack,
        "consolidated": consolidated.consolidate(),
        "consolidated_large": large.consolidate(),
        "point": point,
        "memmap": memmapped.memmap(folder),
        "mmt": MemoryMappedTensor.from_tensor(torch.arange(4), filename=f"{folder}/t.memmap"),
    }


def describe(obj: Any) -> Any:
    """A JSON-able summary that reads the same under both packages."""
    if isinstance(obj, torch.Tensor):
        return {"class": type(obj).__name__, "dtype": str(obj.dtype), "values": obj.tolist()}
    if isinstance(obj, Point):
        return {"class": "Point", "x": describe(obj.x), "label": obj.label}
    out: dict[str, Any] = {
        "class": type(obj).__name__,
        "batch_size": list(obj.batch_size),
        "locked": bool(obj.is_locked),
    }
    if isinstance(obj, LazyStackedTensorDict):
        out["members"] = [describe(m) for m in obj.tensordicts]
        return out
    out["names"] = list(obj.names) if obj._has_names() else None
    out["device"] = None if obj.device is None else str(obj.device)
    out["memmap"] = bool(obj.is_memmap())
    out["entries"] = {
        key: describe(obj.get(key))
        if not isinstance(obj.get(key), (NonTensorData, NonTensorStack))
        else {"non_tensor": obj.get(key).tolist()}
        for key in sorted(obj.keys())
    }
    return out


def dump_all(folder: str) -> list[str]:
    """Write every object with pickle protocols 2, 4, 5 and ``torch.save``; the file names."""
    import pickle

    names = []
    for name, obj in build(folder + "/mm").items():
        for proto in (2, 4, 5):
            path = f"{folder}/{name}.p{proto}"
            with open(path, "wb") as f:
                pickle.dump(obj, f, protocol=proto)
            names.append(path)
        torch.save(obj, f"{folder}/{name}.pt")
        names.append(f"{folder}/{name}.pt")
    return names


def load_all(folder: str, names: list[str]) -> dict[str, Any]:
    """Load the files :func:`dump_all` wrote; their summaries by file name."""
    import os
    import pickle

    out = {}
    for path in names:
        if path.endswith(".pt"):
            obj = torch.load(path, weights_only=False)
        else:
            with open(path, "rb") as f:
                obj = pickle.load(f)
        out[os.path.basename(path)] = describe(obj)
    return out


def safe_loadable(names: list[str]) -> list[str]:
    """The ``torch.save`` files among ``names`` that ``torch.load`` reads with its default
    ``weights_only=True`` (basenames, sorted)."""
    import os

    ok = []
    for path in names:
        if path.endswith(".pt"):
            try:
                torch.load(path)
            except Exception:
                continue
            ok.append(os.path.basename(path))
    return sorted(ok)
