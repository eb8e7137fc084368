"""``select_out_keys``: a forward hook that removes the outputs a caller did not ask for.

The module keeps computing all its outputs (``out_keys_source``); its ``out_keys`` show the
selection, and after each call the hook drops from the result the other outputs (and nested
tensordicts left empty by that). Calls with tensors instead of a tensordict (``@dispatch``)
already return only the selected ``out_keys``.
"""

from __future__ import annotations

from typing import Any

from tensordict.core.behaviour.base import TensorDictBase, is_tensor_collection
from tensordict.core.keys import NestedKey
from tensordict.errors import OutKeyNotFoundError

__all__ = ["OutKeyNotFoundError", "OutKeysSelect"]


class OutKeysSelect:
    """The forward hook installed by :meth:`TensorDictModuleBase.select_out_keys`."""

    def __init__(self, out_keys: list[NestedKey]) -> None:
        self.out_keys = list(out_keys)
        self.source: list[NestedKey] = []
        self.module: Any = None

    def attach(self, module: Any) -> None:
        """Narrow ``module.out_keys`` to the selection (the module must write every key)."""
        missing = [k for k in self.out_keys if k not in module.out_keys]
        if missing:
            raise OutKeyNotFoundError(
                f"Can't select non existent keys: {missing}. The module out_keys are "
                f"{module.out_keys}."
            )
        self.source = list(module.out_keys)
        module._out_keys_apparent = self.out_keys
        if module.out_keys != self.out_keys:
            setter = getattr(type(module), "out_keys", None)
            if isinstance(setter, property) and setter.fset is not None:
                module.out_keys = self.out_keys
        if module.out_keys != self.out_keys:
            raise RuntimeError(f"{type(module).__name__} does not support select_out_keys.")
        self.module = module

    def __call__(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> Any:
        first = args[0] if args else kwargs.get("tensordict")
        if not is_tensor_collection(first):
            return self._narrow_values(module, output)
        if not is_tensor_collection(output):
            return output
        in_keys = list(module.in_keys)
        keep = set(module.out_keys) | set(in_keys)
        dropped = [k for k in self.source if k not in keep]
        if dropped:
            output.exclude(*dropped, inplace=True)
        for key in dropped:
            _drop_empty_parents(output, key, keep)
        return output

    def _narrow_values(self, module: Any, output: Any) -> Any:
        """Tensors in, tensors out (``@dispatch``): keep the values of the selected keys."""
        if isinstance(output, tuple) and len(output) == len(self.source) != len(module.out_keys):
            kept = tuple(v for k, v in zip(self.source, output) if k in module.out_keys)
            return kept[0] if len(kept) == 1 else kept
        return output

    def remove(self) -> None:
        """Give the module back its full ``out_keys``."""
        if self.module is not None and self.module.out_keys == self.out_keys:
            self.module.out_keys = self.source


def _drop_empty_parents(td: TensorDictBase, key: NestedKey, keep: set[Any]) -> None:
    if isinstance(key, str):
        return
    for depth in range(len(key) - 1, 0, -1):
        parent = key[:depth] if depth > 1 else key[0]
        if parent in keep:
            return
        value = td.get(parent, None)
        if not is_tensor_collection(value) or not value.is_empty():
            return
        td.del_(parent)
