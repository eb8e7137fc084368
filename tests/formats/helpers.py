"""Importable helpers for the format tests: worker functions (run under fork and spawn)."""

from __future__ import annotations

from typing import Any

import torch


def double(chunk: Any) -> Any:
    """A map_iter function: the chunk's ``x`` doubled, read from the chunk (a lazy view)."""
    return chunk.to_tensordict() * 2


def describe(chunk: Any) -> Any:
    """The class of the chunk a worker gets and the rows it holds."""
    from tensordict import TensorDict

    return TensorDict(
        {"x": chunk["x"], "is_view": torch.tensor(type(chunk).__name__ != "TensorDict")}, []
    )


def read_in_child(ptd: Any, conn: Any) -> None:
    """Read every entry of a pickled or inherited persistent tensordict and send it home."""
    try:
        conn.send(("ok", ptd.to_tensordict().to_dict(convert_tensors=True)))
    except BaseException as err:  # the parent reports it
        conn.send(("err", repr(err)))
    finally:
        conn.close()
