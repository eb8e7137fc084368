"""memmap_, memmap, memmap_like, load_memmap, save/load, saved_path, refresh and make_memmap."""

# `key in td` is refused by design: membership tests go through td.keys().
# ruff: noqa: SIM118

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorData,
    NonTensorStack,
    TensorDict,
)
from tensordict.errors import (
    AlreadyMemmappedError,
    BatchSizeError,
    IncompleteMemmapError,
    MemmapFormatError,
)
from tensordict.memmap import io


def make() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(12.0).reshape(3, 4),
            "b": {"c": torch.arange(3), "d": {"e": torch.ones(3, 2, dtype=torch.bool)}},
            "s": "label",
        },
        [3],
    )


def leaves(td: Any) -> dict[tuple[str, ...], torch.Tensor]:
    return {
        k if isinstance(k, tuple) else (k,): v
        for k, v in td.items(True, True)
        if isinstance(v, torch.Tensor)
    }


def file_ids(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_ino for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def spy_writes(monkeypatch) -> list[tuple[str, Any]]:
    """Record every data file write (path, source tensor or None for zero-filled)."""
    calls: list[tuple[str, Any]] = []
    real = io.write_file

    def spy(path: str, src: Any, shape: Any, dtype: Any, **options: Any) -> None:
        calls.append((path, src))
        real(path, src, shape, dtype, **options)

    monkeypatch.setattr(io, "write_file", spy)
    return calls


# ====================================================================== memmap_
def test_memmap_in_place_returns_self_locked_and_memmap(tmp_path: Path) -> None:
    td = make()
    out = td.memmap_(tmp_path)
    assert out is td and td.is_locked and td.is_memmap()
    assert td["b"].is_locked and td["b"].is_memmap()


def test_memmap_in_place_replaces_every_leaf_with_its_file(tmp_path: Path) -> None:
    td = make()
    before = {k: v.clone() for k, v in leaves(td).items()}
    td.memmap_(tmp_path)
    for key, value in leaves(td).items():
        assert isinstance(value, MemoryMappedTensor)
        assert value.filename is not None and value.filename.startswith(str(tmp_path))
        assert torch.equal(value.as_subclass(torch.Tensor), before[key])
    assert td["s"] == "label"


def test_memmap_in_place_keeps_nested_tensordict_objects(tmp_path: Path) -> None:
    td = make()
    nested = td["b"]
    td.memmap_(tmp_path)
    assert td["b"] is nested and isinstance(nested["c"], MemoryMappedTensor)


def test_memmap_in_place_with_the_same_prefix_is_a_no_op(tmp_path: Path, spy_writes) -> None:
    td = make().memmap_(tmp_path)
    leaf = td["a"]
    ids = file_ids(tmp_path)
    spy_writes.clear()
    assert td.memmap_(tmp_path) is td
    assert td["a"] is leaf and spy_writes == [] and file_ids(tmp_path) == ids


def test_memmap_in_place_with_the_same_prefix_writes_keys_added_meanwhile(tmp_path: Path):
    td = make().memmap_(tmp_path)
    with td.unlock_():
        td["new"] = torch.full((3,), 7)
    td.memmap_(tmp_path)
    assert isinstance(td["new"], MemoryMappedTensor)
    assert TensorDict.load_memmap(tmp_path)["new"].tolist() == [7, 7, 7]


def test_memmap_in_place_to_another_prefix_raises(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path / "one")
    with pytest.raises(AlreadyMemmappedError, match=r"^A filename was provided.*copy_existing"):
        td.memmap_(tmp_path / "two")
    assert not (tmp_path / "two").exists()
    assert td.saved_path == str(tmp_path / "one")


def test_memmap_in_place_to_another_prefix_copies_with_copy_existing(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path / "one")
    ids = file_ids(tmp_path / "one")
    td.memmap_(tmp_path / "two", copy_existing=True)
    assert td.saved_path == str(tmp_path / "two")
    assert td["a"].filename == str(tmp_path / "two" / "a.memmap")
    assert file_ids(tmp_path / "one") == ids
    assert torch.equal(TensorDict.load_memmap(tmp_path / "two")["a"], make()["a"])


def test_memmap_in_place_refuses_an_existing_save_without_existsok(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    with pytest.raises(FileExistsError, match="existsok"):
        make().memmap_(tmp_path, existsok=False)


def test_memmap_in_place_overwrites_an_existing_save_by_default(tmp_path: Path) -> None:
    TensorDict({"old": torch.zeros(3)}, [3]).memmap(tmp_path)
    make().memmap_(tmp_path)
    assert "old" not in TensorDict.load_memmap(tmp_path).keys()


def test_memmap_with_num_threads_writes_leaves_concurrently(tmp_path: Path, monkeypatch):
    barrier = threading.Barrier(2, timeout=60)
    threads: set[int] = set()
    real = io.write_file

    def meet(path: str, src: Any, shape: Any, dtype: Any, **options: Any) -> None:
        threads.add(threading.get_ident())
        barrier.wait()  # two writes must be in flight at once, or this breaks
        real(path, src, shape, dtype, **options)

    monkeypatch.setattr(io, "write_file", meet)
    td = TensorDict({f"k{i}": torch.full((2,), i) for i in range(4)}, [2])
    td.memmap_(tmp_path, num_threads=2)
    assert len(threads) == 2
    assert [td[f"k{i}"].tolist() for i in range(4)] == [[i, i] for i in range(4)]


def test_memmap_in_place_of_a_lazy_stack(tmp_path: Path) -> None:
    a = TensorDict({"x": torch.zeros(2)}, [2])
    b = TensorDict({"x": torch.ones(2), "y": torch.ones(2, 3)}, [2])
    ls = LazyStackedTensorDict(a, b, stack_dim=0)
    assert ls.memmap_(tmp_path) is ls
    assert ls.is_memmap() and ls.saved_path == str(tmp_path)
    assert isinstance(ls.tensordicts[1]["y"], MemoryMappedTensor)
    out = TensorDict.load_memmap(tmp_path)
    assert isinstance(out, LazyStackedTensorDict) and out.tensordicts[1]["y"].shape == (2, 3)


def test_memmap_copy_of_a_lazy_stack_leaves_the_source_unchanged(tmp_path: Path) -> None:
    a = TensorDict({"x": torch.zeros(2)}, [2])
    ls = LazyStackedTensorDict(a, a.clone(), stack_dim=0)
    out = ls.memmap(tmp_path)
    assert isinstance(out, LazyStackedTensorDict) and out is not ls
    assert out.saved_path == str(tmp_path) and out.is_memmap() and out.is_locked
    assert ls.saved_path is None and not ls.is_memmap() and type(a["x"]) is torch.Tensor


def test_lazy_stack_meta_json_is_byte_exact(tmp_path: Path) -> None:
    a = TensorDict({"x": torch.zeros(2)}, [2])
    LazyStackedTensorDict(a, a.clone(), stack_dim=1).memmap(tmp_path)
    # upstream 0.15.3's keys in its order, then the member count (which upstream ignores)
    assert (tmp_path / "meta.json").read_bytes() == (
        b'{"_type":"<class \'tensordict._lazy.LazyStackedTensorDict\'>","_format_version":1,'
        b'"_class":"tensordict:LazyStackedTensorDict","stack_dim":1,"stack_dim_name":null,'
        b'"num_members":2}'
    )
    assert (tmp_path / "0" / "x.memmap").is_file() and (tmp_path / "1" / "x.memmap").is_file()


def test_non_tensor_data_meta_json_is_byte_exact(tmp_path: Path) -> None:
    TensorDict({"s": "hello"}, [2]).memmap(tmp_path)
    assert (tmp_path / "s" / "meta.json").read_bytes() == (
        b'{"_type":"<class \'tensordict.tensorclass.NonTensorData\'>","data":"hello",'
        b'"_metadata":null,"_is_non_tensor":true}'
    )
    parent = json.loads((tmp_path / "meta.json").read_bytes())
    assert parent["s"] == {"type": "NonTensorData"}


def test_non_tensor_stack_meta_json_is_byte_exact(tmp_path: Path) -> None:
    td = TensorDict({"s": "a"}, [3])
    td[1] = TensorDict({"s": "b"}, [])
    td.memmap(tmp_path)
    assert (tmp_path / "s" / "meta.json").read_bytes() == (  # as upstream 0.15.3
        b'{"_type":"<class \'tensordict.tensorclass.NonTensorStack\'>","_format_version":1,'
        b'"_class":"tensordict:NonTensorStack","stack_dim":0,"device":null,"data":["a","b","a"]}'
    )


def test_non_tensor_entries_round_trip(tmp_path: Path) -> None:
    td = TensorDict({"s": NonTensorData({"k": [1, 2]}), "n": None, "x": torch.zeros(2)}, [2])
    td["t"] = NonTensorStack.from_list(["p", "q"])
    td.memmap(tmp_path)
    out = TensorDict.load_memmap(tmp_path)
    assert out["s"] == {"k": [1, 2]} and out["n"] is None and out["t"] == ["p", "q"]
    assert isinstance(out.get("s"), NonTensorData) and out.get("s").batch_size == (2,)


def test_unjsonable_non_tensor_data_goes_to_a_pickle_file(tmp_path: Path) -> None:
    TensorDict({"o": NonTensorData({1, 2}, batch_size=[2])}, [2]).memmap(tmp_path)
    meta = json.loads((tmp_path / "o" / "meta.json").read_bytes())
    assert "data" not in meta and (tmp_path / "o" / "other.pickle").is_file()
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True)["o"] == {1, 2}


# ====================================================================== anonymous
def test_memmap_in_place_without_prefix_is_anonymous_shared_memory(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    td = make().memmap_()
    assert td.is_memmap() and td.is_locked and td.saved_path is None
    for value in leaves(td).values():
        assert isinstance(value, MemoryMappedTensor) and value.filename is None
        assert value.is_shared()
    assert list(tmp_path.iterdir()) == []


def test_anonymous_memmap_in_place_keeps_values(tmp_path: Path) -> None:
    td = make().memmap_()
    assert all(torch.equal(v, leaves(make())[k]) for k, v in leaves(td).items())


def test_anonymous_memmap_in_place_twice_is_a_no_op() -> None:
    td = make().memmap_()
    leaf = td["a"]
    assert td.memmap_() is td and td["a"] is leaf


def test_anonymous_memmap_copy_leaves_the_source_unchanged() -> None:
    src = make()
    out = src.memmap()
    assert out is not src and not src.is_memmap() and type(src["a"]) is torch.Tensor
    assert isinstance(out["a"], MemoryMappedTensor) and out["a"].filename is None


# ====================================================================== memmap
def test_memmap_returns_a_new_locked_copy(tmp_path: Path) -> None:
    src = make()
    out = src.memmap(tmp_path)
    assert out is not src and out.is_locked and out.is_memmap()
    assert out["b"] is not src["b"]
    assert all(torch.equal(out.get(k), v) for k, v in leaves(src).items())


def test_memmap_leaves_the_source_unchanged(tmp_path: Path) -> None:
    src = make()
    before = {k: v for k, v in leaves(src).items()}
    src.memmap(tmp_path)
    assert not src.is_locked and not src.is_memmap() and src.saved_path is None
    assert not src["b"].is_memmap()
    for key, value in leaves(src).items():
        assert value is before[key] and type(value) is torch.Tensor


def test_memmap_copy_does_not_share_memory_with_the_source(tmp_path: Path) -> None:
    src = make()
    out = src.memmap(tmp_path)
    out["a"].fill_(-1)
    assert src["a"][0, 1].item() == 1.0


# ====================================================================== memmap_like
def test_memmap_like_is_zero_filled_with_the_same_structure(tmp_path: Path) -> None:
    src = make()
    out = src.memmap_like(tmp_path)
    assert set(out.keys(True, True)) == set(src.keys(True, True))
    for key, value in leaves(out).items():
        assert isinstance(value, MemoryMappedTensor)
        assert value.shape == src.get(key).shape and value.dtype == src.get(key).dtype
        assert not value.any()
    assert out["s"] == "label" and out.is_locked


def test_memmap_like_copies_no_data(tmp_path: Path, spy_writes) -> None:
    make().memmap_like(tmp_path)
    assert len(spy_writes) == 3 and all(src is None for _, src in spy_writes)


def test_memmap_like_leaves_the_source_unchanged(tmp_path: Path) -> None:
    src = make().memmap_(tmp_path / "src")
    ids = file_ids(tmp_path / "src")
    src.memmap_like(tmp_path / "out")
    assert src.saved_path == str(tmp_path / "src") and file_ids(tmp_path / "src") == ids
    assert src["a"].sum().item() == 66.0


def test_memmap_like_without_prefix_is_anonymous_zeros() -> None:
    out = make().memmap_like()
    assert out["a"].filename is None and not out["a"].any()


def test_memmap_like_outputs_are_writable_and_persist(tmp_path: Path) -> None:
    out = make().memmap_like(tmp_path)
    out["a"][1] = 5.0
    assert TensorDict.load_memmap(tmp_path)["a"][1].tolist() == [5.0] * 4


# ====================================================================== load_memmap
def test_load_memmap_gives_unlocked_memory_mapped_leaves(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    td = TensorDict.load_memmap(tmp_path)
    assert not td.is_locked and not td["b"].is_locked
    assert td.is_memmap()
    for value in leaves(td).values():
        assert isinstance(value, MemoryMappedTensor)
        assert value.filename.startswith(str(tmp_path))


def test_load_memmap_round_trips_values_and_structure(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    td = TensorDict.load_memmap(tmp_path)
    assert (td == make()).all()
    assert td.batch_size == (3,) and td["b", "d"].batch_size == (3,)
    assert td["s"] == "label"


def test_load_memmap_result_can_take_new_keys(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    td = TensorDict.load_memmap(tmp_path)
    td["extra"] = torch.zeros(3)
    assert "extra" in td.keys()


def test_loaded_leaves_write_through_to_the_files(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    TensorDict.load_memmap(tmp_path)["b", "c"][0] = 42
    assert TensorDict.load_memmap(tmp_path)["b", "c"].tolist() == [42, 1, 2]


def test_load_memmap_of_a_nested_folder_alone(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    assert TensorDict.load_memmap(tmp_path / "b")["d", "e"].shape == (3, 2)


def test_load_memmap_with_cpu_device(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    td = TensorDict.load_memmap(tmp_path, device="cpu")
    assert td["a"].device == torch.device("cpu") and td.device == torch.device("cpu")


def test_load_memmap_of_a_missing_directory_names_it(tmp_path: Path) -> None:
    with pytest.raises(IncompleteMemmapError, match="nowhere"):
        TensorDict.load_memmap(tmp_path / "nowhere")


# ====================================================================== save / load / saved_path
def test_save_and_load_are_the_memmap_pair(tmp_path: Path) -> None:
    src = make()
    saved = src.save(tmp_path)
    assert not src.is_memmap() and saved.saved_path == str(tmp_path)
    assert (TensorDict.load(tmp_path) == src).all()
    assert TensorDict.load.__func__ is TensorDict.load_memmap.__func__  # type: ignore[attr-defined]


def test_saved_path_is_absolute_for_a_relative_prefix(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    td = make().memmap_("rel")
    assert td.saved_path == str(tmp_path / "rel")
    assert td["b"].saved_path == str(tmp_path / "rel" / "b")


def test_saved_path_of_a_loaded_tensordict(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    assert TensorDict.load_memmap(tmp_path).saved_path == str(tmp_path)


def test_saved_path_of_a_plain_tensordict_is_none() -> None:
    assert make().saved_path is None


# ====================================================================== memmap_refresh_
def test_memmap_refresh_sees_what_another_writer_saved(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    other = make()
    other["a"] = other["a"] * 10
    other["z"] = torch.ones(3)
    other.memmap(tmp_path)
    assert td.memmap_refresh_() is td
    assert td["a"][1, 0].item() == 40.0 and td["z"].tolist() == [1.0] * 3
    assert td.is_locked


def test_memmap_refresh_needs_a_directory() -> None:
    with pytest.raises(MemmapFormatError, match="directory"):
        make().memmap_().memmap_refresh_()


# ====================================================================== make_memmap*
def test_make_memmap_adds_a_zero_filled_leaf_to_a_locked_tensordict(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    leaf = td.make_memmap("new", [3, 5], dtype=torch.int16)
    assert isinstance(leaf, MemoryMappedTensor) and td.get("new") is leaf
    assert leaf.shape == (3, 5) and leaf.dtype == torch.int16 and not leaf.any()
    assert leaf.filename == str(tmp_path / "new.memmap")


def test_make_memmap_records_the_leaf_in_meta_json(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    td.make_memmap("new", [3, 5], dtype=torch.int16)[2] = 9
    meta = json.loads((tmp_path / "meta.json").read_bytes())
    assert list(meta)[-5:] == ["shape", "device", "_type", "_format_version", "_class"]
    out = TensorDict.load_memmap(tmp_path)
    assert out["new"].dtype == torch.int16 and out["new"][2].tolist() == [9] * 5


def test_make_memmap_in_a_nested_tensordict(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    td.make_memmap(("b", "f"), [3], dtype=torch.float64)
    assert (tmp_path / "b" / "f.memmap").is_file()
    assert TensorDict.load_memmap(tmp_path)["b", "f"].dtype == torch.float64


def test_make_memmap_with_the_wrong_batch_shape_raises(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    with pytest.raises(BatchSizeError, match=r"\[3\]"):
        td.make_memmap("bad", [4, 2])


def test_make_memmap_refuses_a_metadata_key(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    with pytest.raises(MemmapFormatError, match="shape"):
        td.make_memmap("shape", [3])
    assert TensorDict.load_memmap(tmp_path).batch_size == (3,)


def test_make_memmap_needs_a_directory() -> None:
    with pytest.raises(MemmapFormatError, match="directory"):
        make().make_memmap("x", [3])


def test_make_memmap_from_tensor_copies_the_data(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    src = torch.arange(6.0).reshape(3, 2)
    leaf = td.make_memmap_from_tensor("m", src)
    assert isinstance(leaf, MemoryMappedTensor) and torch.equal(leaf, src)
    leaf.zero_()
    assert src.sum().item() == 15.0
    assert TensorDict.load_memmap(tmp_path)["m"].shape == (3, 2)


def test_make_memmap_from_tensor_without_copy_data_is_zeros(tmp_path: Path) -> None:
    td = make().memmap_(tmp_path)
    leaf = td.make_memmap_from_tensor("m", torch.ones(3, 2), copy_data=False)
    assert leaf.shape == (3, 2) and not leaf.any()


def test_make_memmap_on_a_loaded_tensordict(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    td = TensorDict.load_memmap(tmp_path)
    td.make_memmap_from_tensor("m", torch.ones(3))
    assert TensorDict.load_memmap(tmp_path)["m"].tolist() == [1.0] * 3


def test_files_written_match_the_leaf_count(tmp_path: Path) -> None:
    make().memmap(tmp_path)
    data_files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.memmap"))
    assert data_files == ["a.memmap", os.path.join("b", "c.memmap"), "b/d/e.memmap"]


# ====================================================================== views of a memmap td
TD_VIEWS = {
    "int": lambda td: td[1],
    "slice": lambda td: td[1:3],
    "unbind": lambda td: td.unbind(0)[2],
    "chunk": lambda td: td.chunk(2)[1],
    "split": lambda td: td.split([1, 2])[1],
    "torch.split": lambda td: torch.split(td, 2)[1],
    "view_of_view": lambda td: td[1:][1],
}


@pytest.mark.parametrize("name", list(TD_VIEWS))
def test_tensordict_views_keep_memory_mapped_leaves_on_the_same_files(tmp_path: Path, name):
    td = make().memmap_(tmp_path)
    view = TD_VIEWS[name](td)
    for key, value in leaves(view).items():
        assert isinstance(value, MemoryMappedTensor)
        assert value.filename == td.get(key).filename
        assert value.untyped_storage().data_ptr() == td.get(key).untyped_storage().data_ptr()


@pytest.mark.parametrize(
    "op",
    [lambda td: td + 1, lambda td: td.apply(lambda x: x * 2), lambda td: td.clone()],
    ids=["add", "apply", "clone"],
)
def test_tensordict_ops_give_plain_leaves(tmp_path: Path, op) -> None:
    out = op(make().memmap_(tmp_path))
    assert all(type(v) is torch.Tensor for v in leaves(out).values())
    assert not out.is_memmap()


# ====================================================================== overwriting a save
def test_overwriting_a_longer_lazy_stack_leaves_no_extra_members(tmp_path: Path) -> None:
    a = TensorDict({"x": torch.zeros(2)}, [2])
    LazyStackedTensorDict(a, a, a, stack_dim=0).memmap(tmp_path)
    LazyStackedTensorDict(a, a, stack_dim=0).memmap(tmp_path)
    out = TensorDict.load_memmap(tmp_path)
    assert len(out.tensordicts) == 2 and not (tmp_path / "2").exists()


def test_overwriting_pickled_non_tensor_data_removes_the_stale_pickle(tmp_path: Path) -> None:
    TensorDict({"o": NonTensorData({1, 2}, batch_size=[2])}, [2]).memmap(tmp_path)
    TensorDict({"o": "text"}, [2]).memmap(tmp_path)
    assert not (tmp_path / "o" / "other.pickle").exists()
    assert TensorDict.load_memmap(tmp_path)["o"] == "text"


def test_overwriting_a_pickled_non_tensor_stack_removes_the_stale_pickle(tmp_path: Path) -> None:
    TensorDict({"s": NonTensorStack.from_list([{1}, {2}])}, [2]).memmap(tmp_path)
    assert (tmp_path / "s" / "pickle.pkl").exists()
    TensorDict({"s": NonTensorStack.from_list(["a", "b"])}, [2]).memmap(tmp_path)
    assert not (tmp_path / "s" / "pickle.pkl").exists()


def test_saving_into_a_folder_never_touches_unrelated_saves_inside_it(tmp_path: Path) -> None:
    make().memmap(tmp_path / "runs" / "old")
    before = (tmp_path / "runs" / "old" / "meta.json").read_bytes()
    make().memmap(tmp_path / "runs")
    assert (tmp_path / "runs" / "old" / "meta.json").read_bytes() == before
    assert TensorDict.load_memmap(tmp_path / "runs" / "old")["b", "c"].tolist() == [0, 1, 2]


def test_memmap_in_place_without_prefix_keeps_a_directory_mapping(tmp_path) -> None:
    td = TensorDict({"x": torch.arange(3.0), "n": {"y": torch.ones(3)}}, [3]).memmap_(
        tmp_path / "d"
    )
    leaves = dict(td.items(True, True))
    assert td.memmap_() is td
    assert td.saved_path == str(tmp_path / "d")
    assert all(td[k] is v for k, v in leaves.items())


def test_memmap_in_place_to_another_prefix_names_the_existing_file(tmp_path) -> None:
    td = TensorDict({"x": torch.arange(3.0)}, [3]).memmap_(tmp_path / "d")
    with pytest.raises(RuntimeError, match="already has a file associated"):
        td.memmap_(tmp_path / "other")
