"""``append_memmap``: grow a saved tensordict along its first batch dim, in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import tensordict
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict, append_memmap, tensorclass
from tensordict.errors import MemmapAppendError
from tensordict.memmap import append as append_mod


@tensorclass
class Obs:
    x: torch.Tensor
    tag: str


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def saved(tmp_path: Path) -> Path:
    td = TensorDict({"a": torch.arange(6.0).reshape(3, 2), "n": {"i": torch.arange(3)}}, [3])
    td.save(tmp_path / "s")
    return tmp_path / "s"


def rows(n: int, start: float = 100.0) -> TensorDict:
    a = torch.arange(start, start + 2 * n).reshape(n, 2)
    return TensorDict({"a": a, "n": {"i": torch.arange(n) + 10}}, [n])


def test_rows_are_appended_to_every_leaf(tmp_path: Path) -> None:
    root = saved(tmp_path)
    append_memmap(root, rows(2))
    loaded = TensorDict.load_memmap(root)
    assert loaded.batch_size == (5,)
    assert loaded["a"][3:].tolist() == [[100.0, 101.0], [102.0, 103.0]]
    assert loaded["n", "i"].tolist() == [0, 1, 2, 10, 11]


def test_a_tensordict_mapped_before_the_append_keeps_its_rows(tmp_path: Path) -> None:
    root = saved(tmp_path)
    before = TensorDict.load_memmap(root)
    append_memmap(root, rows(4))
    assert before["a"].shape == (3, 2)
    assert before["a"][2].tolist() == [4.0, 5.0]


def test_tensorclass_rows_are_appended_and_fields_kept(tmp_path: Path) -> None:
    Obs(x=torch.zeros(2, 3), tag="t", batch_size=[2]).save(tmp_path / "s")
    append_memmap(tmp_path / "s", Obs(x=torch.ones(1, 3), tag="t", batch_size=[1]))
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert isinstance(loaded, Obs) and loaded.tag == "t"
    assert loaded.x.sum(-1).tolist() == [0.0, 0.0, 3.0]


def test_an_empty_saved_tensordict_grows_from_no_file(tmp_path: Path) -> None:
    TensorDict({"a": torch.zeros(0, 2)}, [0]).save(tmp_path / "s")
    append_memmap(tmp_path / "s", TensorDict({"a": torch.ones(2, 2)}, [2]))
    assert TensorDict.load_memmap(tmp_path / "s")["a"].tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_an_equal_non_tensor_value_is_accepted_and_kept(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.zeros(2), "s": NonTensorData("k", batch_size=[2])}, [2])
    td.save(tmp_path / "s")
    append_memmap(tmp_path / "s", TensorDict({"a": torch.ones(1), "s": "k"}, [1]))
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert loaded["s"] == "k" and loaded["a"].tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    "bad, match",
    [
        (TensorDict({"a": torch.zeros(1, 2)}, [1]), "keys"),
        (
            TensorDict(
                {"a": torch.zeros(1, 3), "n": {"i": torch.zeros(1, dtype=torch.int64)}}, [1]
            ),
            "shape",
        ),
        (
            TensorDict(
                {
                    "a": torch.zeros(1, 2, dtype=torch.float64),
                    "n": {"i": torch.zeros(1, dtype=torch.int64)},
                },
                [1],
            ),
            "dtype",
        ),
        (
            TensorDict({"a": torch.zeros(1, 2), "n": {"i": torch.zeros(1, dtype=torch.int64)}}, []),
            "first batch",
        ),
        (TensorDict({"a": torch.zeros(1, 2), "n": torch.zeros(1)}, [1]), "Tensor"),
    ],
)
def test_rows_that_do_not_fit_are_refused_and_nothing_is_written(
    tmp_path: Path, bad: TensorDict, match: str
) -> None:
    root = saved(tmp_path)
    before = snapshot(root)
    with pytest.raises(MemmapAppendError, match=match):
        append_memmap(root, bad)
    assert snapshot(root) == before


def test_a_different_non_tensor_value_is_refused(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.zeros(2), "s": NonTensorData("k", batch_size=[2])}, [2])
    td.save(tmp_path / "s")
    with pytest.raises(MemmapAppendError, match="same value"):
        append_memmap(tmp_path / "s", TensorDict({"a": torch.ones(1), "s": "other"}, [1]))


def test_a_lazy_stack_cannot_grow(tmp_path: Path) -> None:
    lazy = LazyStackedTensorDict(
        TensorDict({"x": torch.zeros(2)}, [2]), TensorDict({"x": torch.ones(2)}, [2]), stack_dim=1
    )
    TensorDict({"l": lazy}, [2]).save(tmp_path / "s")
    with pytest.raises(MemmapAppendError, match="lazy stack"):
        append_memmap(tmp_path / "s", TensorDict({"l": lazy[:1]}, [1]))


def test_a_nested_tensor_cannot_grow(tmp_path: Path) -> None:
    nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
    TensorDict({"nt": nt}, [2]).save(tmp_path / "s")
    with pytest.raises(MemmapAppendError, match="nested tensor"):
        append_memmap(tmp_path / "s", TensorDict({"nt": nt}, [2]))


def test_an_archive_cannot_grow(tmp_path: Path) -> None:
    TensorDict({"a": torch.zeros(2)}, [2]).save(tmp_path / "s.tdz")
    with pytest.raises(MemmapAppendError, match="unpack_memmap"):
        append_memmap(tmp_path / "s.tdz", TensorDict({"a": torch.ones(1)}, [1]))


def test_rows_must_be_a_tensor_collection(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="tensordict or a tensorclass"):
        append_memmap(saved(tmp_path), {"a": torch.zeros(1, 2)})


def test_a_failure_while_replacing_metadata_puts_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = saved(tmp_path)
    before = snapshot(root)
    calls = []
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 2:  # the top meta.json is replaced, the nested one fails
            raise OSError("disk gone")
        real_replace(src, dst)

    monkeypatch.setattr(append_mod.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk gone"):
        append_memmap(root, rows(2))
    monkeypatch.undo()
    assert snapshot(root) == before
    assert TensorDict.load_memmap(root)["a"].shape == (3, 2)


def test_the_import_paths_serve_the_same_function() -> None:
    from tensordict._archive import append_memmap as from_archive

    assert tensordict.append_memmap is append_memmap is from_archive
