"""Prototype features (their API may change): :func:`~tensordict.prototype.fx.symbolic_trace`."""

from tensordict.prototype.fx import symbolic_trace

__all__ = ["symbolic_trace"]
