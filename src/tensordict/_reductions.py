"""``tensordict._reductions``: upstream's path of the pickling reductions (re-exports).

Importing it (``import tensordict`` does) lets ``torch.load(weights_only=True)`` read saved
tensordicts, as upstream.
"""

from tensordict.core.behaviour.consolidate import (  # noqa: F401
    rebuild_consolidated as _rebuild_tensordict_files_consolidated,
)
from tensordict.core.serial.pickling import reduce_td as _reduce_td  # noqa: F401
from tensordict.core.serial.upstream_pickle import make_td as _make_td  # noqa: F401
from tensordict.core.serial.upstream_pickle import register_safe_globals as _register_safe_globals

_register_safe_globals()

__all__: list[str] = []
