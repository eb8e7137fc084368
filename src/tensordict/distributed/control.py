"""The control exchange of a point-to-point transfer: what the sender announces, what the receiver
answers, and the words for a transfer whose ends do not fit.

The sender's control message (``int64``, at most :data:`CTRL_CAP` of them) announces its data
messages: their kind (leaves, or chunks of a consolidated storage), count, total and largest
size, the fingerprint of its structure, its ``pseudo_rand`` and as many of its records as fit
(see :mod:`~tensordict.distributed.schema`). The receiver answers (at most :data:`ACK_CAP`
``int64``) with a status and, when they do not fit, its own count, size and the record where the
two differ, so that both ranks can say what is wrong.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from tensordict.distributed import schema
from tensordict.errors import TransferMismatchError

__all__ = ["ACK_CAP", "CTRL_CAP", "Announce", "Answer", "Side", "compare"]

MAGIC = 0x7464_0001_7274_6431  # the package's transfers, version 1
CTRL_CAP = 1024
ACK_CAP = 64
_HEAD = 9  # int64 before the records in a control message
LEAVES, STORAGE = 1, 2
OK, MISMATCH, KIND, NOT_CONSOLIDATED, PSEUDO_RAND = range(5)
_KIND_WORDS = {LEAVES: "leaf by leaf", STORAGE: "as one consolidated storage"}


class Side(NamedTuple):
    """One end of a transfer, as far as the other end must know it."""

    kind: int
    messages: int  # data messages
    total: int  # bytes
    largest: int  # bytes of the largest data message
    fingerprint: int
    pseudo_rand: bool
    records: list[int]
    tensors: int  # leaves (the records' count)


class Announce:
    """The sender's control message: build it from a :class:`Side`, or parse a received one."""

    @staticmethod
    def build(side: Side) -> torch.Tensor:
        recs = side.records[: CTRL_CAP - _HEAD]
        head = [MAGIC, side.kind, side.messages, side.total, side.largest, side.fingerprint]
        head += [int(side.pseudo_rand), len(side.records), side.tensors]
        return torch.tensor(head + recs, dtype=torch.int64)

    @staticmethod
    def buffer() -> torch.Tensor:
        return torch.zeros(CTRL_CAP, dtype=torch.int64)

    @staticmethod
    def parse(t: torch.Tensor, doing: str) -> tuple[Side, bool]:
        """The sender's side, and whether its records are complete."""
        v = t.tolist()
        if v[0] != MAGIC:
            raise TransferMismatchError(
                f"{doing}: the first message is not a tensordict transfer of this package. The "
                "other rank runs another version (or upstream tensordict), or sends something "
                "else with the same tags: run the same tensordict on both ranks."
            )
        n = v[7]
        shown = min(n, CTRL_CAP - _HEAD)
        side = Side(v[1], v[2], v[3], v[4], v[5], bool(v[6]), v[_HEAD : _HEAD + shown], v[8])
        return side, shown == n


class Answer(NamedTuple):
    """The receiver's answer: a status and, on a mismatch, where its side differs."""

    status: int
    tensors: int = 0
    total: int = 0
    at: int = -1  # the first tensor that differs (-1: unknown)
    record: tuple[int, ...] | None = None

    def build(self) -> torch.Tensor:
        rec = list(self.record or ())[: ACK_CAP - 6]
        head = [MAGIC, self.status, self.tensors, self.total, self.at, len(rec)]
        out = torch.zeros(ACK_CAP, dtype=torch.int64)
        out[: 6 + len(rec)] = torch.tensor(head + rec, dtype=torch.int64)
        return out

    @staticmethod
    def buffer() -> torch.Tensor:
        return torch.zeros(ACK_CAP, dtype=torch.int64)

    @classmethod
    def parse(cls, t: torch.Tensor) -> Answer:
        v = t.tolist()
        if v[0] != MAGIC:
            return cls(MISMATCH)
        record = tuple(v[6 : 6 + v[5]]) if v[5] else None
        return cls(v[1], v[2], v[3], v[4], record)


def compare(mine: Side | None, theirs: Side, complete: bool) -> Answer:
    """The receiver's answer to ``theirs`` (``mine`` None: not consolidated)."""
    if mine is None:
        return Answer(NOT_CONSOLIDATED)
    if mine.kind != theirs.kind:
        return Answer(KIND, mine.tensors, mine.total)
    if mine.kind == LEAVES and mine.pseudo_rand != theirs.pseudo_rand:
        return Answer(PSEUDO_RAND, mine.tensors, mine.total)
    if mine.fingerprint == theirs.fingerprint and mine.total == theirs.total:
        return Answer(OK)
    here, there = schema.split_records(mine.records), schema.split_records(theirs.records)
    index = schema.first_difference(here, there)
    if index is None or (not complete and index >= len(there)):
        index = -1  # the records shown agree: the difference is further on, or in the layout
    record = here[index] if 0 <= index < len(here) else None
    return Answer(MISMATCH, mine.tensors, mine.total, index, record)


def mismatch_message(
    doing: str,
    answer: Answer,
    *,
    here: Side | None,
    there: Side | None,
    names: list[str],
    peer: int,
    sender: bool,
) -> str:
    """Why the two ends do not fit, from the side of the rank raising it, and what to do."""
    other = f"rank {peer}"
    if answer.status == NOT_CONSOLIDATED:
        what = (
            f"{'the receiver' if sender else 'this tensordict'} is not consolidated, so "
            "recv(consolidated=True) has no storage to receive into. Consolidate it first "
            "(td = td.consolidate(metadata=True)), or build it with TensorDict.from_remote_init"
        )
    elif answer.status == KIND:
        how = there.kind if there is not None else (LEAVES if here and here.kind == STORAGE else 0)
        mine = here.kind if here is not None else 0
        what = (
            f"this rank transfers {_KIND_WORDS.get(mine, '?')} and {other} "
            f"{_KIND_WORDS.get(how, '?')}: pass the same consolidated= on both sides"
        )
    elif answer.status == PSEUDO_RAND:
        what = "the two ranks pass different pseudo_rand: pass the same value on both sides"
    else:
        what = _structure_words(answer, here, there, names, other, sender)
    return (
        f"{doing}: the tensordicts of the two ranks do not fit: {what}. Nothing was written "
        f"into the receiving tensordict, and {other} raises too; the process group can be used "
        "again."
    )


def _structure_words(
    answer: Answer,
    here: Side | None,
    there: Side | None,
    names: list[str],
    other: str,
    sender: bool,
) -> str:
    if sender:  # the answer carries the receiver's side
        mine = schema.split_records(here.records) if here is not None else []
        theirs_at = answer.record
        counts = (len(mine), answer.tensors)
        totals = (here.total if here else 0, answer.total)
    else:
        mine = schema.split_records(here.records) if here is not None else []
        there_recs = schema.split_records(there.records) if there is not None else []
        theirs_at = there_recs[answer.at] if 0 <= answer.at < len(there_recs) else None
        counts = (len(mine), there.tensors if there is not None else 0)
        totals = (here.total if here else 0, there.total if there else 0)
    parts = [
        f"{counts[0]} tensors of {totals[0]} bytes here, {counts[1]} of {totals[1]} on {other}"
    ]
    i = answer.at
    if i >= 0:
        mine_at = mine[i] if i < len(mine) else None
        key = f" (key {names[i]})" if i < len(names) else ""
        parts.append(
            f"tensor #{i}{key} is {schema.describe(mine_at)} here and "
            f"{schema.describe(theirs_at)} on {other}"
        )
    else:
        parts.append("their dtypes, shapes or storage layouts differ")
    return "; ".join(parts) + (
        ". Give both ranks the same keys, dtypes and shapes (a lazy stack: the same members)"
    )


def names_of(leaves: list[Any]) -> list[str]:
    """The keys of ``leaves`` for messages: ``('a', 'b')``."""
    return [str(leaf.path) for leaf in leaves]
