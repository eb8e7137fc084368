"""``map(out=...)``: check each result against its slice of ``out``, then write it there.

A result is written only if it fits its slice exactly: the same leaf keys, the same batch size and
the same shape for every leaf (dtypes are cast, as ``update_`` does). Nothing is broadcast, no key
is added, no slice is shifted by a chunk that returned ``None`` (its slice is left as it was).

A memory-mapped or shared ``out`` is written by the workers, each chunk's slice as soon as the
chunk is done; a plain ``out`` is written by the parent once every chunk has succeeded.
"""

from __future__ import annotations

from typing import Any

from tensordict.core.collection import TensorCollection
from tensordict.core.keys import leaf_or_non_tensor
from tensordict.errors import BatchSizeError, OutMismatchError
from tensordict.parallel.plan import ChunkPlan, take

__all__ = ["check_out", "check_slice", "write_result", "write_results"]


def check_out(td: Any, out: Any, dim: int) -> None:
    """``out`` must be a tensordict as long as ``td`` along ``dim`` (checked before any work)."""
    inner = _unwrap(out)
    if not isinstance(inner, TensorCollection):
        raise TypeError(
            f"out must be a tensordict or a tensorclass, got {type(out).__name__}. Preallocate "
            "it with td.memmap_like(prefix) or with the structure fn returns."
        )
    n = td.batch_size[dim]
    m = out.batch_size[dim] if len(out.batch_size) > dim else None
    if m != n:
        raise BatchSizeError(
            f"out has batch_size={list(out.batch_size)} but td has {list(td.batch_size)}: out must "
            f"have the same size ({n}) along dim {dim}. Preallocate it with td.memmap_like(prefix) "
            "or fn's output structure."
        )


def _unwrap(value: Any) -> Any:
    return value._tensordict if getattr(type(value), "_is_tensorclass", False) else value


def _leaf_shapes(td: Any) -> dict[Any, Any]:
    return {
        key: tuple(getattr(value, "shape", ()))
        for key, value in td.items(
            include_nested=True, leaves_only=True, is_leaf=leaf_or_non_tensor
        )
    }


def check_result(result: Any, target: Any, k: int) -> None:
    """Raise :class:`~tensordict.errors.OutMismatchError` unless ``result`` fits ``target``
    (chunk ``k``'s slice of ``out``) exactly: same leaf keys, batch size and leaf shapes."""
    inner = _unwrap(result)
    where = f"the result of fn for chunk {k} cannot be written to its slice of out"
    if not isinstance(inner, TensorCollection):
        raise OutMismatchError(
            f"{where}: fn returned a {type(result).__name__}, out needs a tensordict (or None to "
            "leave the slice as it is)."
        )
    if inner.batch_size != target.batch_size:
        raise OutMismatchError(
            f"{where}: its batch_size is {list(inner.batch_size)}, the slice's is "
            f"{list(target.batch_size)}. Return one row per element of the chunk (nothing is "
            "broadcast)."
        )
    got, want = _leaf_shapes(inner), _leaf_shapes(_unwrap(target))
    if got.keys() != want.keys():
        extra, missing = (
            sorted(got.keys() - want.keys(), key=str),
            sorted(want.keys() - got.keys(), key=str),
        )
        raise OutMismatchError(
            f"{where}: its keys differ from out's (not in out: {extra}; missing: {missing}). "
            "Return exactly the keys of out, or pass an out with the keys fn returns."
        )
    for key, shape in want.items():
        if got[key] != shape:
            raise OutMismatchError(
                f"{where}: {key!r} has shape {list(got[key])}, the slice's is {list(shape)} "
                "(nothing is broadcast)."
            )


def check_slice(out: Any, plan: ChunkPlan, k: int, result: Any) -> Any:
    """Chunk ``k``'s slice of ``out``, once ``result`` is checked to fit it (None: no check)."""
    target = take(out, plan.dim, plan.index(k))
    if result is not None:
        check_result(result, target, k)
    return target


def write_result(out: Any, plan: ChunkPlan, k: int, result: Any) -> None:
    """Write chunk ``k``'s result into its slice of a memory-mapped or shared ``out`` (in a
    worker): checked first, so a result that does not fit writes nothing."""
    if result is not None:
        check_slice(out, plan, k, result).update_(result)


def write_results(out: Any, plan: ChunkPlan, results: list[Any]) -> None:
    """Write each chunk's result, already checked with :func:`check_slice`, into a plain ``out``
    (``None``: the chunk's slice is left as it was)."""
    prefix = (slice(None),) * plan.dim
    for k, result in enumerate(results):
        if result is not None:
            out[prefix + (plan.index(k),)] = result
