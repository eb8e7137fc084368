"""``tensordict._reductions``: upstream's path of the pickling reductions (re-exports).

Importing it (``import tensordict`` does) lets ``torch.load(weights_only=True)`` read saved
tensordicts and ``multiprocessing`` share a TensorDict's leaves, as upstream.
"""

from tensordict.core.behaviour.consolidate import (  # noqa: F401
    rebuild_consolidated as _rebuild_tensordict_files_consolidated,
)
from tensordict.core.serial.pickling import reduce_td as _reduce_td  # noqa: F401
from tensordict.core.serial.pickling import register_forking_reducer as _register_forking_reducer
from tensordict.core.serial.upstream_pickle import make_td as _make_td  # noqa: F401
from tensordict.core.serial.upstream_pickle import register_safe_globals as _register_safe_globals

_register_safe_globals()
_register_forking_reducer()

__all__: list[str] = []
