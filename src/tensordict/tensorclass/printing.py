"""``repr`` of tensorclass instances, in upstream tensordict's layout.

Fields held in the inner tensordict come first, as ``name=...`` lines sorted as whole strings (like
a tensordict's field lines); then the fields stored outside it (``y=None``) in insertion order;
then ``batch_size``, ``device`` and ``is_shared``::

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

from tensordict.core.printing import field_lines

__all__ = ["tensorclass_repr"]

_INDENT = "    "


def _is_shared(td: Any) -> bool:
    try:
        return bool(td.is_shared()) and not td.is_memmap()
    except Exception:
        return False


def tensorclass_repr(self: Any) -> str:
    """The repr of a tensorclass instance."""
    td = self._tensordict
    lines = field_lines(td._own_items(), sep="=")
    parts = [textwrap.indent("\n" + ",\n".join(lines), _INDENT)] if lines else []
    parts += [textwrap.indent(f"{k}={v!r}", _INDENT) for k, v in self._non_tensordict.items()]
    parts += [
        f"{_INDENT}batch_size={td.batch_size}",
        f"{_INDENT}device={td.device}",
        f"{_INDENT}is_shared={_is_shared(td)}",
    ]
    body = ",\n".join(parts)
    return f"{type(self).__name__}({body})"
