"""``tensordict._reductions``: upstream's path of the pickling reductions; re-exports only."""

from tensordict.core.consolidate import (  # noqa: F401
    rebuild_consolidated as _rebuild_tensordict_files_consolidated,
)
from tensordict.core.pickling import reduce_td as _reduce_td  # noqa: F401

__all__: list[str] = []
