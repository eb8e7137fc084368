"""map(out=...): every result is checked against its slice of out before anything is written."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import OutMismatchError, ShapeMismatchError
from tests.parallel import helpers

N = 20


def source() -> TensorDict:
    return TensorDict({"x": torch.arange(float(N))}, [N])


def make_out(kind: str, tmp_path, feature: tuple[int, ...] = ()) -> TensorDict:
    out = TensorDict({"y": torch.full((N, *feature), -1.0)}, [N])
    if kind == "memmap":
        return out.memmap_like(tmp_path / "out").apply_(lambda t: t.fill_(-1.0))
    if kind == "shared":
        return out.share_memory_()
    return out


def run(fn, out, **kw):
    kw.setdefault("chunksize", 5)
    return source().map(fn, num_workers=2, out=out, generator=torch.Generator(), **kw)


KINDS = ["plain", "memmap", "shared"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_one_row_result_for_a_larger_chunk_raises_instead_of_broadcasting(kind, tmp_path):
    out = make_out(kind, tmp_path)
    with pytest.raises(OutMismatchError, match=r"batch_size is \[1\], the slice's is \[5\]"):
        run(helpers.first_row_only, out)
    assert (out["y"] == -1).all(), "no slice was written"


@pytest.mark.parametrize("kind", KINDS)
def test_a_result_with_another_key_raises_and_adds_nothing(kind, tmp_path):
    out = make_out(kind, tmp_path)
    with pytest.raises(OutMismatchError, match=r"not in out: \['w'\]; missing: \['y'\]"):
        run(helpers.wrong_key, out)
    assert set(out.keys()) == {"y"} and (out["y"] == -1).all()


@pytest.mark.parametrize("kind", KINDS)
def test_a_leaf_that_would_broadcast_into_out_raises(kind, tmp_path):
    out = make_out(kind, tmp_path, feature=(4,))
    with pytest.raises(OutMismatchError, match=r"'y' has shape \[5, 1\], the slice's is \[5, 4\]"):
        run(helpers.wide_leaf, out)
    assert (out["y"] == -1).all()


@pytest.mark.parametrize("kind", KINDS)
def test_a_tensor_result_for_a_tensordict_out_raises(kind, tmp_path):
    out = make_out(kind, tmp_path)
    with pytest.raises(OutMismatchError, match="returned a Tensor"):
        run(helpers.as_tensor, out)


@pytest.mark.parametrize("kind", KINDS)
def test_none_results_leave_their_own_slice_and_shift_nothing(kind, tmp_path):
    out = make_out(kind, tmp_path)
    run(helpers.none_for_chunk_zero, out)
    expected = source()["x"] * 10
    expected[:5] = -1
    assert torch.equal(out["y"], expected)


@pytest.mark.parametrize("kind", KINDS)
def test_chunksize_zero_results_are_checked_against_their_element(kind, tmp_path):
    out = make_out(kind, tmp_path)
    with pytest.raises(OutMismatchError, match=r"batch_size is \[1\], the slice's is \[\]"):
        run(helpers.first_row_only, out, chunksize=0)


def test_a_plain_out_is_untouched_when_a_later_chunk_does_not_fit(tmp_path):
    out = make_out("plain", tmp_path)
    with pytest.raises(OutMismatchError, match="chunk 2"):
        run(helpers.bad_for_chunk_two, out)
    assert (out["y"] == -1).all(), "the chunks before the bad one were not written either"


def test_a_memmap_out_keeps_the_bad_chunks_slice_as_it_was(tmp_path):
    out = make_out("memmap", tmp_path)
    with pytest.raises(OutMismatchError, match="chunk 2"):
        run(helpers.bad_for_chunk_two, out)
    assert (out["y"][10:15] == -1).all(), "the chunk that did not fit wrote nothing"


def test_out_mismatch_error_is_a_shape_mismatch_value_error():
    assert issubclass(OutMismatchError, ShapeMismatchError)
    assert issubclass(OutMismatchError, ValueError)


def test_an_out_that_is_not_a_tensordict_raises_before_work():
    with pytest.raises(TypeError, match="out must be a tensordict"):
        run(helpers.fill_out, torch.zeros(N))
