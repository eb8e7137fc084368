"""TensorDictStore against a real redis-server: layout, row reads and writes, reconnecting,
map_iter workers, and a server that goes away."""

# ruff: noqa: SIM118
from __future__ import annotations

import pickle

import pytest
import redis
import torch

from tensordict import LazyStackedTensorDict, TensorDict, is_leaf_nontensor
from tensordict.errors import (
    LockedError,
    ShapeMismatchError,
    StoreConnectionError,
    StoreDataError,
    StoreKeyError,
)
from tensordict.store import LazyStackedTensorDictStore, TensorDictStore

from . import helpers
from .server import RedisServer, find_binary


@pytest.fixture
def td() -> TensorDict:
    return TensorDict(
        {"obs": torch.arange(30.0).view(10, 3), "n": {"x": torch.arange(10)}, "label": "a"}, [10]
    )


@pytest.fixture
def store(td, store_kwargs) -> TensorDictStore:
    out = TensorDictStore.from_tensordict(td, **store_kwargs)
    yield out
    out.close()


def _commands(store, monkeypatch) -> list:
    sent: list = []
    run = type(store._conn).run

    def spy(self, commands, write=False):
        commands = list(commands)
        sent.append(commands)
        return run(self, commands, write)

    monkeypatch.setattr(type(store._conn), "run", spy)
    return sent


def test_layout_is_upstreams(store, store_kwargs):
    client = redis.Redis(**store_kwargs)
    prefix = f"tensordict:{{{store._td_id}}}:"
    assert client.get(prefix + "__batch_size__") == b"[10]"
    assert client.smembers(prefix + "__keys__") == {b"obs", b"n.x", b"label"}
    assert client.hgetall(prefix + "m:obs") == {b"shape": b"[10, 3]", b"dtype": b"torch.float32"}
    assert client.get(prefix + "d:obs") == torch.arange(30.0).numpy().tobytes()


def test_keys_and_shapes_download_no_data(store, monkeypatch):
    sent = _commands(store, monkeypatch)
    assert set(store.keys(True, True)) == {"obs", ("n", "x")}  # non-tensor: not a leaf
    assert set(store.keys(True, True, is_leaf=is_leaf_nontensor)) == {"obs", ("n", "x"), "label"}
    assert "obs" in repr(store)
    assert not [
        c for batch in sent for c in batch if c[0] in ("get", "getrange") and "d:obs" in c[1][0]
    ]


@pytest.mark.parametrize(
    "index",
    [
        5,
        -1,
        slice(2, 5),
        slice(1, None, 3),
        torch.tensor([7, 1, 7]),
        [0, 9],
        torch.arange(10) % 4 == 0,
        ...,
    ],
    ids=["int", "neg", "slice", "step", "repeat", "list", "mask", "ellipsis"],
)
def test_indexing_reads_the_same_rows_as_memory(store, td, index):
    got = store[index]
    assert isinstance(got, TensorDict)
    assert torch.equal(got["obs"], td[index]["obs"])
    assert torch.equal(got["n", "x"], td[index]["n", "x"])


def test_a_row_read_is_one_round_trip_of_byte_ranges(store, monkeypatch):
    store._conn.metas(["obs", "n.x", "label"])  # metadata cached, as after the first call
    sent = _commands(store, monkeypatch)
    store[2:4]
    data_calls = [batch for batch in sent if any(c[0] == "getrange" for c in batch)]
    assert len(data_calls) == 1
    ranges = {c[1][0].rsplit(":", 1)[1]: c[1][1:] for c in data_calls[0] if c[0] == "getrange"}
    assert ranges["obs"] == (24, 47)  # rows 2 and 3 of 12 bytes


@pytest.mark.parametrize(
    "index",
    [3, slice(2, 6), slice(0, None, 4), torch.tensor([8, 1]), torch.arange(10) > 6],
    ids=["int", "slice", "step", "tensor", "mask"],
)
def test_setitem_writes_exactly_the_selected_rows(store, td, index):
    rows = td[index].batch_size
    value = TensorDict({"obs": -torch.ones(3), "n": {"x": torch.tensor(-1)}}, [])
    value = value.expand(rows) if rows else value
    store[index] = value
    td[index] = value
    assert torch.equal(store["obs"], td["obs"])
    assert torch.equal(store["n", "x"], td["n", "x"])


def test_setitem_validates_every_entry_before_writing(store, td):
    with pytest.raises(ShapeMismatchError):
        store[0] = TensorDict({"obs": torch.ones(3), "n": {"x": torch.ones(5)}}, [])
    assert torch.equal(store["obs"], td["obs"])


def test_setitem_drops_extra_leading_ones_as_torch(store, td):
    # torch accepts t[0] = tensor([1.0]) for a scalar slot: so does the store, row and nested
    store[2] = TensorDict({"n": {"x": torch.tensor([7])}}, [])
    store[4] = {"obs": torch.full((1, 1, 3), -1.0)}
    assert store["n", "x"][2].item() == 7
    assert torch.equal(store["obs"][4], -torch.ones(3))
    assert torch.equal(store["obs"][3], td["obs"][3])


def test_python_objects_are_written_per_element(store):
    store[1:3] = TensorDict({"obs": torch.zeros(2, 3), "label": "b"}, [2])
    assert [store[i]["label"] for i in range(4)] == ["a", "b", "b", "a"]
    assert store.to_tensordict()["label"][:4] == ["a", "b", "b", "a"]


def test_writes_to_an_empty_store_preallocate(store_kwargs):
    s = TensorDictStore(batch_size=[4], **store_kwargs)
    s[0] = TensorDict({"obs": torch.ones(3), "label": "hello"}, [])
    assert torch.equal(s["obs"][1], torch.zeros(3))
    assert s[0]["label"] == "hello" and s[1]["label"] is None


def test_in_place_methods_write_on_the_server(store, td):
    store.apply_(lambda t: t * 2)
    assert torch.equal(store["obs"], td["obs"] * 2)
    store.set_at_("obs", torch.full((3,), 7.0), 4)
    assert (store["obs"][4] == 7).all() and (store["obs"][3] != 7).all()
    store.fill_("obs", 1.0)
    store.zero_()
    assert (store["n", "x"] == 0).all()


def test_structure_changes(store):
    store["new", "y"] = torch.ones(10, 2)
    assert store["new"].batch_size == (10,) and isinstance(store["new"], TensorDictStore)
    store.rename_key_("new", "renamed")
    assert torch.equal(store["renamed", "y"], torch.ones(10, 2))
    store.del_("renamed")
    assert "renamed" not in store.keys()
    store.lock_()
    with pytest.raises(LockedError):
        store["other"] = torch.zeros(10)


def test_shape_operations_raise_and_work_on_a_local_copy(store):
    with pytest.raises(RuntimeError, match="to_local"):
        store.view(2, 5)
    assert store.to_local().view(2, 5).shape == (2, 5)


def test_reconnect_by_id_and_pickle(store, td, store_kwargs):
    again = TensorDictStore.from_store(td_id=store._td_id, **store_kwargs)
    assert again.batch_size == (10,) and torch.equal(again["obs"], td["obs"])
    copy = pickle.loads(pickle.dumps(store[...] if False else store))
    assert copy._td_id == store._td_id and torch.equal(copy["n", "x"], td["n", "x"])
    with pytest.raises(StoreKeyError, match="No TensorDictStore"):
        TensorDictStore.from_store(td_id="nope", **store_kwargs)
    with pytest.raises(KeyError):  # what upstream code catches
        TensorDictStore.from_store(td_id="nope", **store_kwargs)


def test_clone_copies_the_data_under_a_new_id(store):
    clone = store.clone()
    assert clone._td_id != store._td_id
    clone["obs"] = torch.zeros(10, 3)
    assert (store["obs"] != 0).any()
    assert store.clone(False)._td_id == store._td_id


def test_a_half_written_entry_is_never_read_as_valid(store, store_kwargs):
    client = redis.Redis(**store_kwargs)
    client.set(f"tensordict:{{{store._td_id}}}:d:obs", b"\x00" * 7)  # truncated bytes
    store._conn.meta_cache.clear()
    with pytest.raises(StoreDataError, match="obs"):
        store["obs"]
    with pytest.raises(StoreDataError):
        store[0]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_map_iter_workers_reconnect_and_read_their_rows(store, td, start_method):
    out = list(
        store.map_iter(
            helpers.rows_times_two,
            num_workers=2,
            chunksize=4,
            mp_start_method=start_method,
            generator=torch.Generator(),
        )
    )
    assert torch.equal(torch.cat([o["obs"] for o in out]), td["obs"] * 2)


def test_map_into_a_store(store, td, store_kwargs):
    out = TensorDictStore.from_tensordict(td.exclude("label").clone().zero_(), **store_kwargs)
    store.exclude("label").map(
        helpers.rows_times_two, num_workers=2, num_chunks=3, out=out, generator=torch.Generator()
    )
    assert torch.equal(out["obs"], torch.arange(30.0).view(10, 3) * 2)


def test_a_server_that_goes_away_raises_a_clear_error(td):
    binary = find_binary()
    if binary is None:
        pytest.skip("no redis-server binary")
    server = RedisServer(binary)
    try:
        # no retries with backoff (redis-py's default, ~3.5 s per call once the server is gone)
        no_retry = redis.retry.Retry(redis.backoff.NoBackoff(), 0)
        s = TensorDictStore.from_tensordict(td, port=server.port, retry=no_retry)
        server.kill()
        with pytest.raises(StoreConnectionError, match=r"went away|cannot be reached"):
            s["obs"]
        with pytest.raises(ConnectionError):  # what code catching connection errors expects
            s[0] = TensorDict({"obs": torch.zeros(3)}, [])
    finally:
        server.stop()


def test_lazy_stack_store(store_kwargs):
    tds = [TensorDict({"a": torch.randn(4, 3), "n": {"b": torch.randn(4)}}, [4]) for _ in range(5)]
    s = LazyStackedTensorDictStore.from_lazy_stack(LazyStackedTensorDict(*tds), **store_kwargs)
    assert s.batch_size == (5, 4) and s._count == 5 and "count=5" in repr(s)
    assert torch.equal(s[2]["a"], tds[2]["a"]) and torch.equal(s[-1]["n", "b"], tds[4]["n", "b"])
    assert torch.equal(s[1:3]["a"], torch.stack([tds[1]["a"], tds[2]["a"]]))
    s[0]["a"] = torch.ones(4, 3)  # a member view writes through
    assert (s[0]["a"] == 1).all() and torch.equal(s[1]["a"], tds[1]["a"])
    s[torch.tensor([3, 4])] = TensorDict(
        {"a": torch.zeros(2, 4, 3), "n": {"b": torch.zeros(2, 4)}}, [2, 4]
    )
    assert (s.to_tensordict()["a"][3:] == 0).all()
    again = LazyStackedTensorDictStore.from_store(td_id=s._td_id, **store_kwargs)
    assert torch.equal(pickle.loads(pickle.dumps(again))[2]["a"], tds[2]["a"])


def test_lazy_stack_of_different_shapes(store_kwargs):
    a, b = TensorDict({"x": torch.randn(3, 4)}, [3]), TensorDict({"x": torch.randn(3, 8)}, [3])
    s = LazyStackedTensorDict(a, b).to_store(**store_kwargs)
    assert torch.equal(s[1]["x"], b["x"]) and torch.equal(s[0]["x"], a["x"])
    with pytest.raises(ShapeMismatchError):
        s[0].set("x", torch.zeros(10, 10), inplace=True)


def test_run_sync_of_the_client_answers_as_upstream_code_expects(store, store_kwargs):
    # upstream code cleans up with store._run_sync(store._client.flushdb())
    assert store._run_sync(store._client.dbsize()) > 0
    assert store._run_sync(store._client.flushdb()) is True
    assert redis.Redis(**store_kwargs).dbsize() == 0


def test_run_sync_awaits_a_coroutine_inside_and_outside_a_running_loop(store):
    import asyncio

    async def value():
        return 3

    assert store._run_sync(value()) == 3

    async def inside():
        return store._run_sync(value())

    assert asyncio.run(inside()) == 3


def test_a_typed_store_is_filled_on_the_server(store_kwargs):
    from torch import Tensor

    from tensordict import TypedTensorDict

    class Row(TypedTensorDict):
        obs: Tensor
        reward: Tensor

    store = TensorDictStore.from_schema(
        {"obs": ([3], torch.float32), "reward": ([], torch.float32)}, batch_size=[4], **store_kwargs
    )
    typed = Row.from_tensordict(store)
    for i in range(4):
        typed[i] = TensorDict(obs=torch.full((3,), float(i)), reward=torch.tensor(-i))
    again = TensorDictStore.from_store(td_id=store._td_id, **store_kwargs)
    assert again["obs"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert again["reward"].tolist() == [0.0, -1.0, -2.0, -3.0]
    typed.reward = torch.ones(4)
    assert (again["reward"] == 1).all()
    store.close()
