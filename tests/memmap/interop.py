"""Both sides of the interop tests: runs under this library and under upstream tensordict 0.15.3
(``~/.cache/td-upstream-venv``), so it uses only the API the two share.

``python -m tests.memmap.interop write DIR`` saves one directory per class upstream writes, and
one packed archive (``<name>.tdz``) of each;
``python -m tests.memmap.interop read DIR...`` loads each and prints a JSON summary of its values.
Both tests compare the summaries of the two libraries.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TypedTensorDict,
    tensorclass,
)

#: upstream refuses to save jagged tensors: there the same values are a strided nested tensor
UPSTREAM = "site-packages" in (tensordict.__file__ or "")


@tensorclass
class Point:
    xy: torch.Tensor
    name: str


class State(TypedTensorDict):
    obs: torch.Tensor
    reward: torch.Tensor


def nested_values() -> torch.Tensor:
    parts = [torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(4, 3) + 100]
    return torch.nested.nested_tensor(parts, layout=torch.strided if UPSTREAM else torch.jagged)


def samples() -> dict[str, Any]:
    """One object per class upstream writes, keyed by the folder it is saved to."""
    lazy = LazyStackedTensorDict(
        TensorDict({"x": torch.zeros(2, 3)}, [2]),
        TensorDict({"x": torch.ones(2, 3), "only": torch.arange(2)}, [2]),
        TensorDict({"x": torch.full((2, 3), 2.0)}, [2]),
        stack_dim=0,
    )
    return {
        "tensordict": TensorDict(
            {"a": torch.arange(6.0).reshape(3, 2), "i": torch.tensor([1, 2, 3], dtype=torch.int16)},
            [3],
        ),
        "nested": TensorDict(
            {"outer": {"inner": {"z": torch.arange(3)}, "b": torch.ones(3, dtype=torch.bool)}},
            [3],
        ),
        "lazy": lazy,
        "non_tensor_data": TensorDict({"s": NonTensorData("hello", batch_size=[3])}, [3]),
        "non_tensor_stack": TensorDict(
            {"words": NonTensorStack.from_list(["a", "b", "c"])}
            if hasattr(NonTensorStack, "from_list")
            else {"words": NonTensorStack(["a", "b", "c"])},
            [3],
        ),
        "tensorclass": Point(xy=torch.arange(8.0).reshape(4, 2), name="pts", batch_size=[4]),
        "jagged": TensorDict(
            {"nt": nested_values(), "sub": {"nt": nested_values()}, "a": torch.ones(2)}, [2]
        ),
        "sub": TensorDict({"a": torch.arange(12.0).reshape(4, 3)}, [4, 3])._get_sub_tensordict(
            (slice(None), slice(0, 2))
        ),
        "typed": State(obs=torch.arange(6.0).reshape(3, 2), reward=torch.ones(3), batch_size=[3]),
        "mixed": TensorDict(
            {
                "lazy": lazy.clone(),
                "p": Point(xy=torch.zeros(3, 2, 2), name="q", batch_size=[3, 2]),
            },
            [3],
        ),
    }


def summary(obj: Any) -> Any:
    """Values, shapes and classes of ``obj`` as plain JSON (the same under both libraries)."""
    if isinstance(obj, torch.Tensor) and obj.is_nested:  # jagged here, strided upstream
        return {"dtype": str(obj.dtype), "nested": [e.tolist() for e in obj.unbind(0)]}
    if isinstance(obj, torch.Tensor):
        return {"dtype": str(obj.dtype), "shape": list(obj.shape), "values": obj.tolist()}
    if isinstance(obj, (NonTensorData, NonTensorStack)):  # upstream: a kind of lazy stack
        return {"class": "non-tensor", "data": obj.tolist()}
    if type(obj).__name__ == "_SubTensorDict":
        return {"class": "_SubTensorDict", "view": summary(obj.to_tensordict())}
    if isinstance(obj, LazyStackedTensorDict):
        return {
            "class": "LazyStackedTensorDict",
            "stack_dim": obj.stack_dim,
            "members": [summary(m) for m in obj.tensordicts],
        }
    if isinstance(obj, TensorDict):
        keys = sorted(obj.keys())
        return {
            "class": "TensorDict",
            "batch_size": list(obj.batch_size),
            "entries": {k: summary(obj.get(k)) for k in keys},
        }
    if isinstance(obj, Point):
        return {"class": "Point", "xy": summary(obj.xy), "name": obj.name}
    if isinstance(obj, str):
        return obj
    raise TypeError(f"no summary for {type(obj).__name__}")


def write(root: str) -> None:
    for name, obj in samples().items():
        obj.memmap(os.path.join(root, name))
        obj.memmap(os.path.join(root, name + ".tdz"))


def read(root: str) -> dict[str, Any]:
    out = {}
    for name in samples():
        for saved in (name, name + ".tdz"):
            out[saved] = summary(TensorDict.load_memmap(os.path.join(root, saved)))
    return out


if __name__ == "__main__":
    command, roots = sys.argv[1], sys.argv[2:]
    if command == "write":
        write(roots[0])
    else:
        print(json.dumps({root: read(root) for root in roots}))
