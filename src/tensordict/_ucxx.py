"""``tensordict._ucxx``: upstream's path of the UCXX pipe (re-exports only).

The protocol lives in :mod:`tensordict.distributed.pipe`; the transport, the optional ``ucxx``
package, is imported only when a pipe connects or listens.
"""

import importlib.util

from tensordict.distributed.pipe import NEW_SCHEMA as _NEW_SCHEMA_FLAG
from tensordict.distributed.pipe import SAME_SCHEMA as _SAME_SCHEMA_FLAG
from tensordict.distributed.pipe import (
    TensorDictPipe,
    TensorDictServer,
    recv_tensordict,
    send_tensordict,
)
from tensordict.distributed.pipe import compute_total_bytes as _compute_total_bytes
from tensordict.distributed.pipe import metadata_hash as _metadata_hash

_has_ucxx = importlib.util.find_spec("ucxx") is not None

__all__ = [
    "TensorDictPipe",
    "TensorDictServer",
    "_NEW_SCHEMA_FLAG",
    "_SAME_SCHEMA_FLAG",
    "_compute_total_bytes",
    "_has_ucxx",
    "_metadata_hash",
    "recv_tensordict",
    "send_tensordict",
]
