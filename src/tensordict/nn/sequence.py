"""TensorDictSequential: tensordict modules run one after the other on the same tensordict.

The sequence's ``in_keys`` are the keys some module reads before any earlier module wrote them;
its ``out_keys`` are every key a module writes (once, in the order of their last write).
``selected_out_keys`` / ``select_out_keys`` keep only some outputs: the intermediate results are
computed on a shallow copy and only the selected keys are written back. ``select_subsequence``
extracts the modules needed to go from some keys to others.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from torch import nn

from tensordict.core.behaviour.base import TensorDictBase
from tensordict.core.dense import TensorDict
from tensordict.core.keys import NestedKey, leaf_or_non_tensor, unravel_key_list
from tensordict.core.lazy.stack import LazyStackedTensorDict
from tensordict.nn.common import (
    TensorDictModule,
    TensorDictModuleBase,
    WrapModule,
    _selection,
    dispatch,
)
from tensordict.nn.utils import _set_skip_existing_None

__all__ = ["TensorDictSequential"]


def _keys_of(modules: list[Any]) -> tuple[list[NestedKey], list[NestedKey]]:
    """(in_keys, out_keys) of modules run in this order."""
    in_keys: list[NestedKey] = []
    written: list[NestedKey] = []
    for module in modules:
        for key in module.in_keys:
            if key not in written and key not in in_keys:
                in_keys.append(key)
        written += module.out_keys
    out_keys = [k for i, k in enumerate(written) if k not in written[i + 1 :]]
    return in_keys, out_keys


def _as_modules(modules: Iterable[Any]) -> list[Any]:
    """Plain callables (tensordict -> tensordict) are wrapped in :class:`WrapModule`."""
    return [m if TensorDictModuleBase.is_tdmodule_compatible(m) else WrapModule(m) for m in modules]


class TensorDictSequential(TensorDictModule):
    """Run tensordict modules (or functions of a tensordict) in order.

    Args:
        *modules: the modules, given one by one, as one list, or as one (ordered) dict of named
            modules (then ``seq["name"]`` gives a module).

    Keyword Args:
        partial_tolerant: skip a module whose inputs are missing (for a lazy stack, run it on
            the members that have them).
        selected_out_keys: the outputs to keep (intermediate ones are not written).
        inplace: True writes into the input; False into a new tensordict; ``"empty"`` into
            ``tensordict.empty()``; None (default) lets the modules decide.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["hidden"]),
        ...     TensorDictModule(lambda h: h * 2, in_keys=["hidden"], out_keys=["y"]),
        ...     selected_out_keys=["y"],
        ... )
        >>> seq.in_keys, seq.out_keys
        (['x'], ['y'])
        >>> sorted(seq(TensorDict(x=torch.zeros(1))).keys())
        ['x', 'y']
    """

    module: Any
    _select_before_return = False

    def __init__(
        self,
        *modules: Any,
        partial_tolerant: bool = False,
        selected_out_keys: list[NestedKey] | None = None,
        inplace: bool | str | None = None,
    ) -> None:
        if len(modules) == 1 and isinstance(modules[0], dict):
            names = list(modules[0])
            converted = _as_modules(modules[0].values())
            container: nn.Module = nn.ModuleDict(collections.OrderedDict(zip(names, converted)))
        else:
            if len(modules) == 1 and isinstance(modules[0], collections.abc.MutableSequence):
                modules = tuple(modules[0])
            converted = _as_modules(modules)
            container = nn.ModuleList(converted)
        in_keys, out_keys = _keys_of(converted)
        self._complete_out_keys = list(out_keys)
        super().__init__(module=container, in_keys=in_keys, out_keys=out_keys)
        self.inplace = inplace
        self.partial_tolerant = partial_tolerant
        if selected_out_keys:
            self._select(selected_out_keys)
        else:
            self._select_before_return = False

    @property
    def out_keys(self) -> Any:
        return self._out_keys_apparent

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        keys = unravel_key_list(list(value))
        self._out_keys = keys
        self._out_keys_apparent = keys
        self._complete_out_keys = list(keys)

    @staticmethod
    def _convert_modules(modules: Iterable[Any]) -> list[Any]:
        return _as_modules(modules)

    def _compute_in_and_out_keys(self, modules: Iterable[Any]) -> tuple[list[Any], list[Any]]:
        return _keys_of(list(modules))

    def _select(self, keys: Iterable[NestedKey]) -> None:
        selected = _selection(tuple(keys))
        if not all(k in self.out_keys for k in selected):
            raise ValueError(
                f"All keys in selected_out_keys must be in out_keys: got {selected}, the "
                f"sequence writes {self.out_keys}."
            )
        self._select_before_return = True
        self._out_keys_apparent = selected

    def select_out_keys(self, *selected_out_keys: NestedKey) -> TensorDictSequential:
        """Keep only these outputs (intermediate results are not written); returns the sequence.

        Raises:
            ValueError: a key the sequence does not write.
        """
        self._select(selected_out_keys)
        return self

    def reset_out_keys(self) -> TensorDictSequential:
        """Write every output again; returns the sequence."""
        self.out_keys = list(self._complete_out_keys)
        self._select_before_return = False
        return self

    def _module_iter(self) -> Iterator[Any]:
        if isinstance(self.module, nn.ModuleDict):
            yield from self.module.values()
        else:
            yield from self.module

    def _keep_options(self, sequence: TensorDictSequential) -> TensorDictSequential:
        sequence.partial_tolerant = self.partial_tolerant
        sequence.inplace = self.inplace
        return sequence

    def select_subsequence(
        self,
        in_keys: Iterable[NestedKey] | None = None,
        out_keys: Iterable[NestedKey] | None = None,
    ) -> TensorDictSequential:
        """The modules needed to compute ``out_keys`` from ``in_keys`` (a new sequence).

        A module is kept if it can run from ``in_keys`` and what earlier kept modules write,
        and if something it writes is needed for ``out_keys``.

        Raises:
            ValueError: no module is left.
        """
        available = unravel_key_list(list(self.in_keys if in_keys is None else in_keys))
        wanted = unravel_key_list(list(self.out_keys if out_keys is None else out_keys))
        modules = list(self._module_iter())
        keep = set(range(len(modules)))
        for i, module in enumerate(modules):
            if type(module) is TensorDictSequential:
                try:
                    module = modules[i] = module.select_subsequence(in_keys=available)
                except ValueError:
                    keep.discard(i)
                    continue
            if all(k in available for k in module.in_keys):
                available.extend(module.out_keys)
            else:
                keep.discard(i)
        for i in sorted(keep, reverse=True):
            module = modules[i]
            if not any(k in wanted for k in module.out_keys):
                keep.discard(i)
                continue
            if type(module) is TensorDictSequential:
                module = modules[i] = module.select_subsequence(out_keys=wanted)
            wanted.extend(module.in_keys)
        if not keep:
            raise ValueError(
                "No modules left after selection. Make sure that in_keys and out_keys are coherent."
            )
        kept = sorted(keep)
        if isinstance(self.module, nn.ModuleDict):
            names = list(self.module)
            return self._keep_options(
                type(self)(collections.OrderedDict((names[i], modules[i]) for i in kept))
            )
        return self._keep_options(type(self)(*[modules[i] for i in kept]))

    def _run_module(self, module: Any, tensordict: TensorDictBase, **kwargs: Any) -> Any:
        if not self.partial_tolerant or all(
            k in tensordict.keys(include_nested=True) for k in module.in_keys
        ):
            return module(tensordict, **kwargs)
        if isinstance(tensordict, LazyStackedTensorDict):
            for member in tensordict.tensordicts:
                if not all(k in member.keys(include_nested=True) for k in module.in_keys):
                    continue
                out = module(member, **kwargs)
                if isinstance(out, TensorDictBase) and out is not member:
                    written = [k for k in module.out_keys if k in out.keys(include_nested=True)]
                    if written:
                        member.update(out, keys_to_update=written)
        return tensordict

    def _get_module_num_or_key(self, module: Any) -> Any:
        return self._module_name(module)

    def _module_name(self, module: Any) -> Any:
        items = (
            self.module.named_children()
            if isinstance(self.module, nn.ModuleDict)
            else enumerate(self.module)
        )
        return next((name for name, m in items if m is module), "?")

    @dispatch(auto_batch_size=False)
    @_set_skip_existing_None()
    def forward(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Run the modules in order; see the class documentation for where results go."""
        if kwargs:
            raise RuntimeError(
                "TensorDictSequential does not support keyword arguments other than "
                f"'tensordict_out' or in_keys: {self.in_keys}. Got {list(kwargs)} instead."
            )
        separate = (
            tensordict_out is not None
            or self._select_before_return
            or self.inplace is False
            or self.inplace == "empty"
        )
        work = tensordict.copy() if separate else tensordict
        if tensordict_out is None:
            if self.inplace is False:
                tensordict_out = TensorDict()
            elif self.inplace == "empty":
                tensordict_out = tensordict.empty()
            elif self.inplace is True:
                tensordict_out = tensordict
        for module in self._module_iter():
            try:
                work = self._run_module(module, work)
            except Exception as err:
                if hasattr(err, "add_note"):
                    err.add_note(f"Failed while executing module '{self._module_name(module)}'.")
                raise
        if tensordict_out is not None:
            if tensordict_out is not work:
                # key by key: a nested output key whose parent tensordict_out lacks is created
                for key in self.out_keys:
                    value = work.get(key, None)
                    if value is not None:
                        tensordict_out.set(key, value)
            return tensordict_out
        if self._select_before_return:
            keys = list(
                set(self.out_keys).union(tensordict.keys(True, True, is_leaf=leaf_or_non_tensor))
            )
            return tensordict.update(work, keys_to_update=keys)
        return work

    def __len__(self) -> int:
        return len(self.module)

    def __getitem__(self, index: int | slice | str) -> Any:
        if isinstance(index, (int, str)):
            return self.module[index]
        return self._keep_options(type(self)(*self.module[index]))

    def __setitem__(self, index: int | slice | str, module: Any) -> None:
        if callable(module):
            (module,) = _as_modules([module])
        self._edit_modules(lambda container: container.__setitem__(index, module))

    def __delitem__(self, index: int | slice | str) -> None:
        self._edit_modules(lambda container: container.__delitem__(index))

    def _edit_modules(self, edit: Callable[[Any], None]) -> None:
        """Apply ``edit`` to the modules, refusing edits that lose selected outputs."""
        if isinstance(self.module, nn.ModuleDict):
            trial: Any = nn.ModuleDict(collections.OrderedDict(self.module.items()))
        else:
            trial = nn.ModuleList(list(self.module))
        edit(trial)
        if self._select_before_return:
            _, out_keys = _keys_of(
                list(trial.values() if isinstance(trial, nn.ModuleDict) else trial)
            )
            lost = [k for k in self._out_keys_apparent if k not in out_keys]
            if lost:
                raise ValueError(
                    f"The edit would remove the selected out_keys {lost}. Call reset_out_keys() "
                    "before the edit, or select other keys."
                )
        edit(self.module)
        selected = self._out_keys_apparent if self._select_before_return else None
        self.in_keys, self.out_keys = _keys_of(list(self._module_iter()))
        if selected is not None:
            self._out_keys_apparent = selected
