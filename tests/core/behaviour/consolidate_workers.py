"""Worker functions for the multiprocessing tests of consolidate (importable under spawn)."""

from __future__ import annotations

from typing import Any

import torch


def describe_consolidated(queue_in: Any, queue_out: Any) -> None:
    """Answer, for each tensordict received (until None): consolidated? shared? how many
    storages? the values of ("b", "c")."""
    torch.set_num_threads(1)
    while (td := queue_in.get()) is not None:
        _describe(td, queue_out)


def _describe(td: Any, queue_out: Any) -> None:
    tensors = [t for t in td.values(True, True) if isinstance(t, torch.Tensor)]
    ptrs = {t.untyped_storage().data_ptr() for t in tensors}
    shared = all(t.untyped_storage().is_shared() for t in tensors)
    queue_out.put((td.is_consolidated(), shared, len(ptrs), td["b", "c"].tolist()))
