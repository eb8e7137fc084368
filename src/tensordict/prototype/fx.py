"""``torch.fx`` tracing of tensordict modules (upstream's ``tensordict.prototype.fx``).

The implementation lives in :mod:`tensordict.nn.fx`.
"""

from tensordict.nn.fx import TDGraphModule, symbolic_trace

__all__ = ["TDGraphModule", "symbolic_trace"]
