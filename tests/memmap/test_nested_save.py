"""Nested (jagged) tensors in saved tensordicts, in upstream's layout: ``<key>.memmap`` holds the
values one element after another, ``<key>.shape.memmap`` the ``(n, ndim)`` int64 element sizes,
and ``meta.json`` says ``"is_nested": true`` with the sizes' shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import MemmapFormatError

from .helpers import td_meta, write_json

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")


def jagged(*rows: int, width: int = 3, start: float = 0.0) -> torch.Tensor:
    parts, at = [], start
    for n in rows:
        parts.append(torch.arange(at, at + n * width).reshape(n, width))
        at += n * width
    return torch.nested.nested_tensor(parts, layout=torch.jagged)


def elements(t: torch.Tensor) -> list:
    return [e.tolist() for e in t.unbind(0)]


def test_jagged_tensor_round_trips_through_memmap(tmp_path: Path) -> None:
    nt = jagged(2, 4)
    td = TensorDict({"nt": nt, "a": torch.ones(2)}, [2])
    td.memmap(tmp_path / "td")
    loaded = TensorDict.load_memmap(tmp_path / "td")
    assert loaded["nt"].layout is torch.jagged
    assert elements(loaded["nt"]) == elements(nt)
    assert loaded["a"].tolist() == [1.0, 1.0]


def test_jagged_tensor_is_written_in_upstreams_layout(tmp_path: Path) -> None:
    TensorDict({"sub": {"nt": jagged(1, 3, width=2)}}, [2]).save(tmp_path / "td")
    sub = tmp_path / "td" / "sub"
    meta = json.loads((sub / "meta.json").read_text())
    assert meta["nt"] == {
        "device": "cpu",
        "shape": [2, 2],
        "dtype": "torch.float32",
        "is_nested": True,
    }
    sizes = torch.from_file(str(sub / "nt.shape.memmap"), size=4, dtype=torch.int64)
    assert sizes.tolist() == [1, 2, 3, 2]
    values = torch.from_file(str(sub / "nt.memmap"), size=8, dtype=torch.float32)
    assert values.tolist() == [float(i) for i in range(8)]


def test_memmap_in_place_keeps_a_jagged_tensor_that_views_the_file(tmp_path: Path) -> None:
    td = TensorDict({"nt": jagged(2, 1)}, [2]).memmap_(tmp_path / "td")
    assert td.is_locked and td["nt"].layout is torch.jagged
    td["nt"].values()[0, 0] = 42.0
    assert TensorDict.load_memmap(tmp_path / "td")["nt"].values()[0, 0] == 42.0


def test_memmap_in_place_twice_does_not_rewrite(tmp_path: Path) -> None:
    td = TensorDict({"nt": jagged(2, 1)}, [2]).memmap_(tmp_path / "td")
    before = (tmp_path / "td" / "nt.memmap").stat().st_ino
    td.memmap_(tmp_path / "td")
    assert (tmp_path / "td" / "nt.memmap").stat().st_ino == before


def test_memmap_like_gives_zeros_of_the_same_sizes(tmp_path: Path) -> None:
    out = TensorDict({"nt": jagged(2, 3, start=1.0)}, [2]).memmap_like(tmp_path / "td")
    assert [list(e.shape) for e in out["nt"].unbind(0)] == [[2, 3], [3, 3]]
    assert out["nt"].values().abs().sum() == 0


def test_jagged_tensor_round_trips_through_an_archive(tmp_path: Path) -> None:
    nt = jagged(3, 1, width=2)
    TensorDict({"nt": nt}, [2]).save(tmp_path / "td.tdz")
    loaded = TensorDict.load_memmap(tmp_path / "td.tdz")
    assert elements(loaded["nt"]) == elements(nt)


def write_upstream_nested(root: Path, sizes: list[list[int]], values: list[float]) -> None:
    root.mkdir()
    torch.tensor(values, dtype=torch.float32).numpy().tofile(root / "nt.memmap")
    torch.tensor(sizes, dtype=torch.int64).numpy().tofile(root / "nt.shape.memmap")
    shape = [len(sizes), len(sizes[0])]
    entry = {"device": "cpu", "shape": shape, "dtype": "torch.float32", "is_nested": True}
    write_json(str(root), td_meta({"nt": entry}, [len(sizes)]))


def test_upstream_nested_tensor_ragged_in_one_dim_loads_as_jagged(tmp_path: Path) -> None:
    write_upstream_nested(tmp_path / "td", [[1, 2], [2, 2]], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    nt = TensorDict.load_memmap(tmp_path / "td")["nt"]
    assert nt.layout is torch.jagged
    assert elements(nt) == [[[0.0, 1.0]], [[2.0, 3.0], [4.0, 5.0]]]


def test_upstream_nested_tensor_ragged_in_two_dims_loads_as_strided_nested(tmp_path: Path) -> None:
    write_upstream_nested(tmp_path / "td", [[1, 2], [2, 1]], [0.0, 1.0, 2.0, 3.0])
    nt = TensorDict.load_memmap(tmp_path / "td")["nt"]
    assert nt.is_nested and nt.layout is torch.strided
    assert elements(nt) == [[[0.0, 1.0]], [[2.0], [3.0]]]


def test_strided_nested_tensor_whose_second_dim_is_a_batch_dim_loads(tmp_path: Path) -> None:
    # members (3, 4) and (3, 5) in a tensordict of batch size [2, 3] (upstream loads it)
    parts = [torch.arange(12.0).view(3, 4), torch.arange(15.0).view(3, 5)]
    TensorDict({"a": torch.nested.nested_tensor(parts)}, [2, 3]).memmap(tmp_path / "td")
    out = TensorDict.load(tmp_path / "td")
    assert out.batch_size == torch.Size([2, 3])
    assert out[1, 2]["a"].tolist() == parts[1][2].tolist()


def test_strided_nested_tensor_ragged_inside_the_batch_dims_is_refused(tmp_path: Path) -> None:
    write_upstream_nested(tmp_path / "td", [[1, 2], [2, 2]], [0.0] * 6)
    meta = json.loads((tmp_path / "td" / "meta.json").read_text())
    meta["shape"] = [2, 2]  # the first member has 1 row: dim 1 cannot be a batch dim
    (tmp_path / "td" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(MemmapFormatError, match="does not start with the batch size"):
        TensorDict.load_memmap(tmp_path / "td")


def test_nested_entry_with_a_shape_that_is_not_2d_is_refused(tmp_path: Path) -> None:
    write_upstream_nested(tmp_path / "td", [[1, 2], [2, 2]], [0.0] * 6)
    meta = json.loads((tmp_path / "td" / "meta.json").read_text())
    meta["nt"]["shape"] = [2, 2, 1]
    (tmp_path / "td" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(MemmapFormatError, match="2-d shape"):
        TensorDict.load_memmap(tmp_path / "td")


def test_nested_entry_with_a_truncated_values_file_is_refused(tmp_path: Path) -> None:
    write_upstream_nested(tmp_path / "td", [[1, 2], [2, 2]], [0.0] * 5)
    with pytest.raises(MemmapFormatError, match="truncated"):
        TensorDict.load_memmap(tmp_path / "td")


def test_describe_counts_the_bytes_of_a_nested_tensor(tmp_path: Path) -> None:
    from tensordict.memmap.describe import describe

    TensorDict({"nt": jagged(2, 4)}, [2]).save(tmp_path / "td")
    (entry,) = describe(tmp_path / "td").children
    assert entry.nbytes == 6 * 3 * 4 and entry.problems == []
    assert entry.value == "nested: 2 elements"
