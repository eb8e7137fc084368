"""PersistentTensorDict on HDF5 files: lazy reads, writes to the file, pickling, map_iter."""

# ruff: noqa: SIM118

from __future__ import annotations

import multiprocessing as mp
import pickle

import h5py
import numpy as np
import pytest
import torch

from tensordict import NonTensorData, PersistentTensorDict, TensorDict, is_leaf_nontensor
from tensordict.errors import BatchSizeError, FormatValueError, LockedError, ShapeMismatchError

from . import helpers


@pytest.fixture
def td() -> TensorDict:
    return TensorDict(
        {
            "x": torch.arange(20.0).view(10, 2),
            "n": {"y": torch.arange(10 * 3).view(10, 3), "z": torch.ones(10, 4, 2)},
            "label": "hello",
        },
        [10],
    )


@pytest.fixture
def ptd(tmp_path, td) -> PersistentTensorDict:
    out = PersistentTensorDict.from_dict(td, filename=tmp_path / "f.h5")
    yield out
    out.close()


def test_from_dict_writes_one_dataset_per_leaf_readable_by_h5py(ptd, td, tmp_path):
    ptd.close()
    with h5py.File(tmp_path / "f.h5", "r") as f:
        np.testing.assert_array_equal(f["x"][()], td["x"].numpy())
        np.testing.assert_array_equal(f["n/y"][()], td["n", "y"].numpy())
        assert f["label"][()] == b"hello"


def test_keys_and_shapes_need_no_data_read(ptd):
    # non-tensor entries (the string "label") are leaves only with is_leaf_nontensor, as upstream
    assert set(ptd.keys(True, True)) == {"x", ("n", "y"), ("n", "z")}
    everything = ptd.keys(True, True, is_leaf=is_leaf_nontensor)
    assert set(everything) == {"x", ("n", "y"), ("n", "z"), "label"}
    assert ptd["n"].batch_size == torch.Size([10])


def test_nested_batch_size_is_the_stored_one(tmp_path):
    td = TensorDict(
        {"a": torch.zeros(3, 4), "b": TensorDict({"c": torch.zeros(3, 4, 5)}, [3, 4, 5])}, [3, 4]
    )
    ptd = PersistentTensorDict.from_dict(td, filename=tmp_path / "g.h5")
    assert ptd.batch_size == torch.Size([3, 4])
    assert ptd["b"].batch_size == torch.Size([3, 4, 5])


def test_foreign_file_gets_its_batch_size_inferred(tmp_path):
    with h5py.File(tmp_path / "raw.h5", "w") as f:
        f["x"] = np.zeros((3, 4), dtype=np.float32)
        f.create_group("sub")["y"] = np.arange(60).reshape(3, 4, 5)
    ptd = PersistentTensorDict.from_h5(tmp_path / "raw.h5")
    assert ptd.batch_size == torch.Size([3, 4])
    assert ptd["sub"].batch_size == torch.Size([3, 4, 5])
    assert PersistentTensorDict.from_h5(tmp_path / "raw.h5", batch_dims=1).batch_size == (3,)


@pytest.mark.parametrize(
    "index",
    [
        3,
        -1,
        slice(2, 7),
        slice(1, 9, 3),
        torch.tensor([7, 1, 7]),
        [0, 9],
        torch.arange(10) % 3 == 0,
        (Ellipsis, None),
        torch.tensor([[1, 2], [3, 4]]),
    ],
    ids=["int", "neg", "slice", "step", "repeat", "list", "mask", "none", "2d"],
)
def test_indexing_reads_the_same_rows_as_memory(ptd, td, index):
    view = ptd[index]
    expected = td[index]
    assert view.batch_size == expected.batch_size
    assert torch.equal(view["x"], expected["x"])
    assert torch.equal(view["n", "z"], expected["n", "z"])


def test_index_of_index_composes(ptd, td):
    assert torch.equal(ptd[2:9][torch.tensor([5, 0])]["x"], td[2:9][torch.tensor([5, 0])]["x"])


def test_view_reads_only_its_rows(ptd, monkeypatch):
    regions = []
    read = type(ptd._node).read
    monkeypatch.setattr(
        type(ptd._node), "read", lambda self, k, r: regions.append(r) or read(self, k, r)
    )
    ptd[4:6]["x"]
    assert regions == [(slice(4, 6, None),)]


@pytest.mark.parametrize(
    "index", [1, slice(2, 5), torch.tensor([8, 2]), torch.arange(10) > 6, slice(0, 10, 4)]
)
def test_setitem_writes_exactly_the_selected_rows(tmp_path, ptd, td, index):
    value = TensorDict({"x": -torch.ones(2), "n": {"y": -torch.ones(3, dtype=torch.long)}}, [])
    ptd[index] = value.expand(td[index].batch_size) if td[index].batch_size else value
    td[index] = value.expand(td[index].batch_size) if td[index].batch_size else value
    reopened = PersistentTensorDict.from_h5(tmp_path / "f.h5")
    assert torch.equal(reopened["x"], td["x"])
    assert torch.equal(reopened["n", "y"], td["n", "y"])


def test_setitem_validates_before_writing(ptd, td):
    bad = TensorDict({"x": torch.ones(2), "n": {"y": torch.ones(7)}}, [])
    with pytest.raises(ShapeMismatchError):
        ptd[0] = bad
    assert torch.equal(ptd["x"], td["x"])  # x was valid but not written


def test_setitem_refuses_a_tensordict_of_another_batch_size(ptd, td):
    with pytest.raises(ShapeMismatchError, match="Cannot broadcast the tensordict"):
        ptd[2:4] = td[:3]
    assert torch.equal(ptd["x"], td["x"])


def test_setitem_drops_extra_leading_ones_as_torch(ptd, td):
    ptd[1] = TensorDict({"x": torch.tensor([[5.0, 6.0]])}, [])
    ptd[2] = {"n": {"y": torch.full((1, 1, 3), -1)}}
    assert ptd["x"][1].tolist() == [5.0, 6.0] and ptd["n", "y"][2].tolist() == [-1, -1, -1]
    assert torch.equal(ptd["x"][3:], td["x"][3:])


def test_rename_onto_an_existing_key_is_refused(ptd, td):
    for safe in (True, False):
        with pytest.raises(KeyError, match="already present in TensorDict"):
            ptd.rename_key_("x", "n", safe=safe)
    assert torch.equal(ptd["x"], td["x"]) and torch.equal(ptd["n", "y"], td["n", "y"])


def test_view_writes_go_to_the_file(ptd):
    view = ptd[3:5]
    view.set_("x", torch.zeros(2, 2))
    view["n", "y"] = torch.full((2, 3), 7)
    assert (ptd["x"][3:5] == 0).all() and (ptd["x"][:3] != 0).any()
    assert (ptd["n", "y"][3:5] == 7).all()


def test_in_place_ops_write_to_the_file(ptd, td):
    ptd.apply_(lambda t: t + 1)
    assert torch.equal(ptd["x"], td["x"] + 1)
    ptd.zero_()
    assert (ptd["n", "z"] == 0).all()
    ptd.fill_("x", 3.0)
    assert (ptd["x"] == 3).all()
    ptd.update_({"x": torch.ones(10, 2)})
    assert (ptd["x"] == 1).all()
    ptd.set_at_("x", torch.tensor([5.0, 6.0]), 2)
    assert ptd["x"][2].tolist() == [5.0, 6.0]
    ptd.masked_fill_(torch.arange(10) < 2, -1.0)
    assert (ptd["x"][:2] == -1).all() and (ptd["x"][2:] != -1).all()


def test_set_new_key_and_delete_and_rename(ptd):
    ptd["w"] = torch.zeros(10)
    ptd["deep", "er"] = torch.ones(10, 2)
    assert ptd["deep", "er"].shape == (10, 2)
    ptd.rename_key_("w", "w2")
    assert "w2" in ptd.keys() and "w" not in ptd.keys()
    ptd.del_("deep")
    assert "deep" not in ptd.keys()
    with pytest.raises(BatchSizeError):
        ptd["bad"] = torch.zeros(3)


def test_set_replacing_an_entry_warns(ptd):
    with pytest.warns(UserWarning, match="^Replacing an array with another one is inefficient"):
        ptd.set("x", torch.zeros(10, 5))
    assert ptd["x"].shape == (10, 5)


def test_locked_tensordict_refuses_new_keys(ptd):
    ptd.lock_()
    with pytest.raises(LockedError):
        ptd["new"] = torch.zeros(10)
    ptd["x"][0] = 1.0  # reading is allowed
    ptd[0] = TensorDict({"x": torch.zeros(2)}, [])  # so are in-place writes
    assert (ptd["x"][0] == 0).all()


def test_read_only_file_refuses_writes(ptd, tmp_path):
    ptd.close()
    ro = PersistentTensorDict.from_h5(tmp_path / "f.h5")
    with pytest.raises(FormatValueError, match="read-only"):
        ro[0] = TensorDict({"x": torch.zeros(2)}, [])


def test_bfloat16_is_refused_with_a_clear_error(tmp_path):
    td = TensorDict({"x": torch.zeros(3, dtype=torch.bfloat16)}, [3])
    with pytest.raises(FormatValueError, match="bfloat16"):
        td.to_h5(tmp_path / "b.h5")


def test_non_tensor_data_round_trips(tmp_path):
    td = TensorDict({"a": 0, "c": "a string!", ("d", "e"): "another"}, []).expand(10)
    ptd = PersistentTensorDict.from_dict(td, filename=tmp_path / "n.h5")
    assert ptd["c"] == b"a string!"  # upstream 0.15 reads HDF5 strings as bytes
    assert ptd.get("c").batch_size == (10,)
    ptd.set("f", NonTensorData(1, batch_size=[10]))
    assert ptd["f"] == 1
    back = ptd.to_tensordict()
    assert back["d", "e"] == b"another"


def test_pickle_reopens_by_name(ptd, td):
    clone = pickle.loads(pickle.dumps(ptd[2:4]))
    assert torch.equal(clone["x"], td["x"][2:4])
    assert clone.filename == ptd.filename


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_another_process_reads_the_file(ptd, td, start_method):
    ctx = mp.get_context(start_method)
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=helpers.read_in_child, args=(ptd[1:3], child))
    proc.start()
    child.close()
    status, data = parent.recv()
    proc.join()
    assert status == "ok", data
    assert torch.equal(torch.as_tensor(data["x"]), td["x"][1:3])


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_map_iter_workers_read_their_chunks_from_the_file(ptd, td, start_method):
    out = list(
        ptd.map_iter(
            helpers.describe,
            num_workers=2,
            chunksize=0,
            mp_start_method=start_method,
            generator=torch.Generator(),
        )
    )
    assert torch.equal(torch.stack([o["x"] for o in out]), td["x"])
    assert all(bool(o["is_view"]) for o in out)


def test_map_into_a_persistent_out(tmp_path, ptd, td):
    out = PersistentTensorDict.from_dict(
        td.select("x").clone().zero_(), filename=tmp_path / "out.h5"
    )
    ptd.select("x").map(
        helpers.double, num_workers=2, num_chunks=3, out=out, generator=torch.Generator()
    )
    assert torch.equal(out["x"], td["x"] * 2)


def test_to_h5_and_from_h5_are_methods_of_tensordict(tmp_path, td):
    ptd = td.to_h5(tmp_path / "m.h5", compression="gzip")
    assert isinstance(ptd, PersistentTensorDict)
    with h5py.File(tmp_path / "m.h5", "r") as f:
        assert f["n/z"].compression == "gzip"
    back = TensorDict.from_h5(tmp_path / "m.h5")
    assert torch.equal(back["n", "y"], td["n", "y"])


def test_from_any_opens_an_h5py_file_lazily(tmp_path):
    from tensordict import from_any

    path = tmp_path / "any.h5"
    TensorDict(a=torch.arange(12.0).view(3, 4), batch_size=[3]).to_h5(path)
    with h5py.File(path, "r") as f:
        assert isinstance(from_any(f), PersistentTensorDict)
        assert TensorDict.from_any(f, auto_batch_size=True).batch_size == (3, 4)
        got = TensorDict.from_any(f, batch_size=[3])
        assert got.batch_size == (3,) and torch.equal(got["a"][2], torch.arange(8.0, 12.0))


def test_upstreams_method_cache_reads_as_empty(ptd):
    # upstream code reads td._cache (None: nothing cached); every read here goes to the file
    ptd.lock_()
    assert ptd.flatten_keys() is not ptd.flatten_keys()
    ptd.unlock_()
    assert ptd._cache is None


def test_memmap_in_place_is_refused_and_a_copy_offered(ptd, tmp_path):
    from tensordict.errors import MemmapInPlaceError

    with pytest.raises(MemmapInPlaceError, match=r"td\.memmap\(prefix\)"):
        ptd.memmap_(tmp_path / "mm")
    assert not (tmp_path / "mm").exists()
    copy = ptd.memmap(tmp_path / "copy")
    assert copy.is_memmap() and type(copy) is TensorDict


def test_a_view_of_the_batch_dims_is_refused_outside_the_legacy_mode(ptd):
    from tensordict import set_lazy_legacy
    from tensordict.errors import LazyViewError

    with pytest.raises(LazyViewError, match="Call `reshape` or `to_tensordict\\(\\)` first"):
        ptd.view(-1)
    assert ptd.view(torch.float32).batch_size == ptd.batch_size
    with pytest.warns(DeprecationWarning), set_lazy_legacy(True):
        assert ptd.view(-1).batch_size == (ptd.batch_size.numel(),)


def test_a_tensor_requiring_grad_is_not_stored_without_its_gradient(ptd):
    from tensordict.errors import StoredGradError

    before = ptd["x"].clone()
    with pytest.raises(StoredGradError, match="requires_grad=True"):
        ptd.set("x", torch.randn_like(before).requires_grad_())
    assert torch.equal(ptd["x"], before)
    assert issubclass(StoredGradError, RuntimeError)


def test_a_nested_group_of_a_locked_file_cannot_be_unlocked_alone(td, tmp_path):
    import gc

    root = PersistentTensorDict.from_dict(td, filename=tmp_path / "g.h5").lock_()
    nested = root.get("n")
    assert nested.is_locked
    with pytest.raises(LockedError, match="Cannot unlock"):
        nested.unlock_()
    del root
    gc.collect()
    nested.unlock_()  # its holder is gone
    assert not nested.is_locked


def test_to_in_place_is_refused_as_a_type_error(ptd):
    with pytest.raises(TypeError, match="Cannot use inplace=True"):
        ptd.to(torch.float64, inplace=True)


def test_to_its_own_device_in_place_is_refused_too(td, tmp_path):
    ptd = PersistentTensorDict.from_dict(td, filename=tmp_path / "d.h5", device="cpu")
    assert ptd.device == torch.device("cpu")
    with pytest.raises(TypeError, match="Cannot use inplace=True"):
        ptd.to("cpu", inplace=True)
    assert ptd.to("cpu")["x"].device == torch.device("cpu")


def test_a_legacy_shape_view_writes_in_place_into_the_file(ptd):
    from tensordict import set_lazy_legacy

    with pytest.warns(DeprecationWarning), set_lazy_legacy(True):
        view = ptd.unsqueeze(0)
    view.set_("x", torch.ones_like(view["x"]))
    assert (ptd["x"] == 1).all()
