"""``tensordict._torch_func``: upstream's module of the torch functions on tensordicts;
re-exports only."""

from tensordict.core.behaviour.combine import cat as _cat  # noqa: F401
from tensordict.core.behaviour.combine import stack as _stack  # noqa: F401
from tensordict.core.behaviour.combine import where as _where  # noqa: F401

__all__: list[str] = []
