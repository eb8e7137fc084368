"""Compiling test functions the same way everywhere: Dynamo with the ``eager`` backend (no code
generation, so a test costs the tracing only), the frame count kept to check recompiles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo.testing import CompileCounterWithBackend


def compiled(fn: Callable[..., Any], fullgraph: bool = True) -> Callable[..., Any]:
    """``fn`` compiled whole (a graph break fails the call)."""
    torch._dynamo.reset_code_caches()
    return torch.compile(fn, backend="eager", fullgraph=fullgraph)


def frames_after_each_call(fn: Callable[..., Any], *calls: tuple[Any, ...]) -> list[int]:
    """Compile ``fn`` once, call it with each argument tuple in turn, and return the number of
    frames compiled so far after each call (a recompile shows as a step up)."""
    torch._dynamo.reset_code_caches()
    counter = CompileCounterWithBackend("eager")
    fn_c = torch.compile(fn, backend=counter, fullgraph=True)
    counts = []
    for args in calls:
        fn_c(*args)
        counts.append(counter.frame_count)
    return counts
