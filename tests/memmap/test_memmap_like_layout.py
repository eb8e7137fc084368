"""``memmap_like`` over a saved tensordict whose layout changed: a leaf of another dtype, row
shape or fewer rows gets fresh zeros, never the old bytes reinterpreted or cut; a leaf of the
same layout keeps its content (a buffer reopened, as upstream)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tensordict import TensorDict


def _saved(tmp_path: Path) -> Path:
    TensorDict({"x": torch.arange(1.0, 9.0).view(4, 2), "n": {"y": torch.ones(4)}}, [4]).memmap(
        tmp_path / "p"
    )
    return tmp_path / "p"


@pytest.mark.parametrize(
    ("x", "why"),
    [
        (torch.empty(4, 2, dtype=torch.int64), "another dtype"),
        (torch.empty(2, 2), "fewer rows"),
        (torch.empty(4, 1), "another row shape"),
        (torch.empty(2, 4), "the same bytes, other rows"),
    ],
)
def test_a_changed_layout_gets_fresh_zeros(tmp_path, x, why):
    prefix = _saved(tmp_path)
    like = TensorDict({"x": x, "n": {"y": torch.empty(x.shape[0])}}, [x.shape[0]])
    out = like.memmap_like(prefix)
    assert not out["x"].any(), why
    assert torch.equal(TensorDict.load_memmap(prefix)["x"], torch.zeros_like(x))


def test_the_same_layout_keeps_its_content(tmp_path):
    prefix = _saved(tmp_path)
    out = TensorDict({"x": torch.empty(4, 2), "n": {"y": torch.empty(4)}}, [4]).memmap_like(prefix)
    assert torch.equal(out["x"], torch.arange(1.0, 9.0).view(4, 2))  # reopened, as upstream


def test_more_rows_of_the_same_layout_are_grown_with_zeros(tmp_path):
    prefix = _saved(tmp_path)
    with pytest.warns(FutureWarning, match="grown with zeros"):
        out = TensorDict({"x": torch.empty(6, 2), "n": {"y": torch.empty(6)}}, [6]).memmap_like(
            prefix
        )
    assert torch.equal(out["x"][:4], torch.arange(1.0, 9.0).view(4, 2))
    assert not out["x"][4:].any()
