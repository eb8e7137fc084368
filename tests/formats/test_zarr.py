"""PersistentTensorDict on Zarr stores: layout readable by zarr itself, lazy reads, writes."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch
import zarr

from tensordict import NonTensorData, TensorDict
from tensordict.errors import BatchSizeError, FormatValueError


@pytest.fixture
def td() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(12.0).view(3, 4), "b": {"c": torch.arange(60).view(3, 4, 5)}, "s": "hi"},
        [3, 4],
        names=["x", "y"],
    )


def test_zarr_reads_what_was_written(tmp_path, td):
    td.to_zarr(tmp_path / "s.zarr")
    root = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    np.testing.assert_array_equal(root["a"][...], td["a"].numpy())
    np.testing.assert_array_equal(root["b/c"][...], td["b", "c"].numpy())
    assert root.attrs["__tensordict__"]["batch_size"] == [3, 4]
    assert json.loads(bytes(root["s"][...])) == "hi"
    assert root.metadata.consolidated_metadata is not None


def test_round_trip_keeps_batch_sizes_names_and_strings(tmp_path, td):
    td.to_zarr(tmp_path / "s.zarr")
    back = TensorDict.from_zarr(tmp_path / "s.zarr")
    assert back.batch_size == (3, 4) and back["b"].batch_size == (3, 4)
    assert back.names == ["x", "y"] and back["s"] == "hi"
    assert (back.to_tensordict() == td).all()


def test_chunked_store_reads_only_the_rows_asked(tmp_path, monkeypatch):
    td = TensorDict({"x": torch.arange(100.0).view(50, 2)}, [50])
    ptd = td.to_zarr(tmp_path / "c.zarr", chunks=(10,))
    assert zarr.open_group(str(tmp_path / "c.zarr"), mode="r")["x"].chunks == (10, 2)
    regions = []
    read = type(ptd._node).read
    monkeypatch.setattr(type(ptd._node), "read", lambda s, k, r: regions.append(r) or read(s, k, r))
    assert torch.equal(ptd[12:14]["x"], td["x"][12:14])
    assert regions == [(slice(12, 14, None),)]


def test_writes_and_structure_changes_keep_consolidated_metadata_fresh(tmp_path, td):
    ptd = td.to_zarr(tmp_path / "s.zarr")
    ptd[1] = TensorDict({"a": torch.zeros(4), "b": {"c": torch.zeros(4, 5, dtype=torch.long)}}, [4])
    ptd["new"] = torch.ones(3, 4)
    ptd.del_("s")
    ptd.rename_key_("new", "renamed")
    back = TensorDict.from_zarr(tmp_path / "s.zarr")
    assert set(back.keys()) == {"a", "b", "renamed"}
    assert (back["a"][1] == 0).all() and (back["a"][0] != 0).any()


def test_python_objects_need_json_or_an_explicit_pickle(tmp_path):
    ptd = TensorDict({"a": torch.zeros(3)}, [3]).to_zarr(tmp_path / "p.zarr")
    ptd.set("j", NonTensorData({"k": [1, 2]}, batch_size=[3]))
    assert ptd["j"] == {"k": [1, 2]}
    strict = TensorDict({"a": torch.zeros(3)}, [3]).to_zarr(tmp_path / "q.zarr", allow_pickle=False)
    with pytest.raises(FormatValueError, match="allow_pickle"):
        strict.set("o", NonTensorData(object(), batch_size=[3]))


def test_pickle_reopens_the_store(tmp_path, td):
    ptd = td.to_zarr(tmp_path / "s.zarr")
    again = pickle.loads(pickle.dumps(ptd[1:]))
    assert torch.equal(again["b", "c"], td["b", "c"][1:])


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_map_iter_workers_read_the_store(tmp_path, start_method):
    from . import helpers

    td = TensorDict({"x": torch.arange(16.0).view(8, 2)}, [8])
    ztd = td.to_zarr(tmp_path / "m.zarr", chunks=(2,))
    out = list(
        ztd.map_iter(
            helpers.describe,
            num_workers=2,
            chunksize=0,
            mp_start_method=start_method,
            generator=torch.Generator(),
        )
    )
    assert torch.equal(torch.stack([o["x"] for o in out]), td["x"])
    assert all(bool(o["is_view"]) for o in out)


def test_a_store_written_by_zarr_itself_opens_lazily(tmp_path):
    root = zarr.open_group(str(tmp_path / "raw.zarr"), mode="w")
    root.create_array("x", data=np.arange(24, dtype=np.float32).reshape(6, 4), chunks=(2, 4))
    root.create_group("sub").create_array("y", data=np.arange(6, dtype=np.int64), chunks=(3,))
    back = TensorDict.from_zarr(tmp_path / "raw.zarr")
    assert back.batch_size == (6,) and back["sub"].batch_size == (6,)
    np.testing.assert_array_equal(back[2:4]["x"].numpy(), root["x"][2:4])
    assert back["sub", "y"].dtype == torch.int64 and back[5]["sub", "y"].item() == 5
    assert TensorDict.from_zarr(tmp_path / "raw.zarr", batch_dims=2).batch_size == (6,)


def test_map_into_a_zarr_out(tmp_path):
    from . import helpers

    td = TensorDict({"x": torch.arange(16.0).view(8, 2)}, [8])
    source = td.to_zarr(tmp_path / "in.zarr", chunks=(2,))
    out = td.clone().zero_().to_zarr(tmp_path / "out.zarr", chunks=(2,))
    source.map(helpers.double, num_workers=2, num_chunks=4, out=out, generator=torch.Generator())
    assert torch.equal(TensorDict.from_zarr(tmp_path / "out.zarr")["x"], td["x"] * 2)


def test_writing_a_tensordict_consolidates_the_metadata_once(tmp_path, monkeypatch):
    # consolidating reads every array's metadata: once per array made a write of n arrays
    # cost n² (512 leaves: 85 s instead of 3 s)
    from tensordict.formats import zarr as zarr_format

    calls = []
    real = zarr_format.consolidate

    def count(node):
        calls.append(node)
        real(node)

    monkeypatch.setattr(zarr_format, "consolidate", count)
    td = TensorDict({"a": torch.arange(3), "b": {"c": torch.ones(3), "d": torch.zeros(3)}}, [3])
    out = td.to_zarr(tmp_path / "s.zarr")
    assert len(calls) == 1
    consolidated = zarr.open_consolidated(str(tmp_path / "s.zarr"))
    assert sorted(consolidated.keys()) == ["a", "b"]
    assert sorted(consolidated["b"].keys()) == ["c", "d"]
    out["e"] = torch.full((3,), 2)  # a change after the write consolidates again, at once
    assert len(calls) == 2
    assert "e" in zarr.open_consolidated(str(tmp_path / "s.zarr"))
    assert torch.equal(TensorDict.from_zarr(tmp_path / "s.zarr")["b", "d"], torch.zeros(3))


def test_opening_a_store_reads_its_members_in_one_request(tmp_path, monkeypatch):
    # each lookup by key is a round trip through zarr's event loop: two per array (kind, then
    # shape) made a store of 512 arrays open in 0.3-0.6 s instead of 0.05 s
    from tensordict.formats.zarr import ZarrGroup

    td = TensorDict({f"k{i}": torch.full((2,), i) for i in range(20)}, [2])
    td["nested"] = TensorDict({"x": torch.ones(2, 3)}, [2])
    td.to_zarr(tmp_path / "s.zarr")
    lookups = []
    real = ZarrGroup._get

    def count(self, key):
        lookups.append(key)
        return real(self, key)

    monkeypatch.setattr(ZarrGroup, "_get", count)
    back = TensorDict.from_zarr(tmp_path / "s.zarr")
    assert len(lookups) < 5
    assert back.batch_size == torch.Size([2])
    assert torch.equal(back["k7"], torch.full((2,), 7)) and back["nested", "x"].shape == (2, 3)
    with pytest.raises(BatchSizeError, match="does not fit the array"):
        TensorDict.from_zarr(tmp_path / "s.zarr", batch_size=[3])
