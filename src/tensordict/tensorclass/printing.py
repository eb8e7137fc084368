"""``repr`` of tensorclass instances, in upstream tensordict's layouts.

As for tensordicts, the compact form is the default (``MyData(batch_size=[3, 4], fields={X:
f32[1], y: None})``: the fields held in the inner tensordict, then those stored outside it). With
``set_printoptions(compact=False)`` (or an option only it shows), the detailed form: fields held
in the inner tensordict first, as ``name=...`` lines sorted as whole strings (like a tensordict's
field lines); then the fields stored outside it (``y=None``) in insertion order; then
``batch_size``, ``device`` and ``is_shared``, each unless the print options hide it::

    MyData(
        X=Tensor(shape=torch.Size([3, 4, 1]), device=cpu, dtype=torch.float32, is_shared=False),
        y=None,
        batch_size=torch.Size([3, 4]),
        device=None,
        is_shared=False)

As upstream, an instance without fields in its tensordict prints no newline after the opening
parenthesis.
"""

from __future__ import annotations

import textwrap
from typing import Any

from tensordict.core.options import get_printoptions
from tensordict.core.serial.compact_repr import compact_repr
from tensordict.core.serial.printing import field_lines, header_parts

__all__ = ["tensorclass_repr"]

_INDENT = "    "


def tensorclass_repr(self: Any) -> str:
    """The repr of a tensorclass instance: compact unless the print options ask for details.

    Examples:
        >>> import torch
        >>> from tensordict import set_printoptions, tensorclass
        >>> @tensorclass
        ... class Obs:
        ...     x: torch.Tensor
        >>> obs = Obs(x=torch.zeros(3, 4), batch_size=[3])
        >>> obs
        Obs(batch_size=[3], fields={x: f32[4]})
        >>> with set_printoptions(compact=False, show_device=False, show_is_shared=False):
        ...     print(repr(obs))
        Obs(
            x=Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, is_shared=False),
            batch_size=torch.Size([3]))
    """
    if get_printoptions()["compact"]:
        try:
            return compact_repr(self)
        except Exception:  # (a repr must not raise: the detailed form reads less metadata)
            pass
    td = self._tensordict
    lines = field_lines(td._own_items(), sep="=")
    parts = [textwrap.indent("\n" + ",\n".join(lines), _INDENT)] if lines else []
    parts += [textwrap.indent(f"{k}={v!r}", _INDENT) for k, v in self._non_tensordict.items()]
    parts += [f"{_INDENT}{part}" for part in header_parts(td)]
    body = ",\n".join(parts)
    return f"{type(self).__name__}({body})"
