"""``tensordict.functional``: upstream's import path of the free functions; re-exports only."""

from tensordict.core.behaviour.padding import collate, pad, pad_sequence, unpad_sequence
from tensordict.core.functional import (
    dense_stack_tds,
    group_by,
    make_tensordict,
    merge_tensordicts,
)

__all__ = [
    "collate",
    "dense_stack_tds",
    "group_by",
    "make_tensordict",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
    "unpad_sequence",
]
