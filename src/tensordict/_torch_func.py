"""``tensordict._torch_func``: upstream's module of the torch functions on tensordicts;
re-exports only (its private ``_stack`` / ``_cat`` keep upstream's signatures)."""

from tensordict.core.behaviour.combine import private_cat as _cat  # noqa: F401
from tensordict.core.behaviour.combine import private_stack as _stack  # noqa: F401
from tensordict.core.behaviour.combine import where as _where  # noqa: F401

__all__: list[str] = []
