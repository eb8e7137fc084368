"""TensorDictStore against hostile or failing servers: pickles written by another client, a
metadata cache made stale by another client, a server restarted empty, stopped (SIGSTOP),
killed, or a socket that accepts and never answers. Every call raises, never hangs or returns
wrong data."""

# ruff: noqa: SIM118
from __future__ import annotations

import pickle
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import NonTensorData, TensorDict, is_leaf_nontensor
from tensordict.errors import (
    PickleNotAllowedError,
    StoreConnectionError,
    StoreDataError,
    StoreTimeoutError,
)
from tensordict.store import LazyStackedTensorDictStore, TensorDictStore

from .server import RedisServer, find_binary

#: short enough for a quick test, long enough for a loaded machine to answer a live server
TIMEOUT = 0.5


class _Marker:
    """Unpickling this creates a file: proof that something was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


@pytest.fixture
def td() -> TensorDict:
    return TensorDict({"obs": torch.arange(30.0).view(10, 3), "n": {"x": torch.arange(10)}}, [10])


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A server this test may kill, stop and restart."""
    binary = find_binary()
    if binary is None:
        pytest.skip("no redis-server binary")
    server = RedisServer(binary)
    yield server
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGCONT)
    server.stop()


# ====================================================================== pickles
def _plant_pickle(store_kwargs: dict[str, Any], td_id: str, marker: Path) -> None:
    """Another client (writing pickles is its right) replaces an entry with a pickle."""
    other = TensorDictStore.from_store(td_id=td_id, **store_kwargs)
    other["evil"] = NonTensorData(_Marker(str(marker)), batch_size=[10])
    other.close()


def test_keys_and_repr_never_unpickle_another_clients_data(td, store_kwargs, tmp_path):
    store = TensorDictStore.from_tensordict(td, **store_kwargs)
    marker = tmp_path / "unpickled"
    _plant_pickle(store_kwargs, store._td_id, marker)
    assert set(store.keys(True, True, is_leaf=is_leaf_nontensor)) == {"obs", ("n", "x"), "evil"}
    assert "pickled, not read" in repr(store)
    assert not marker.exists()


@pytest.mark.parametrize(
    "read",
    [lambda s: s["evil"], lambda s: s[3], lambda s: s.to_tensordict(), lambda s: s[2:5]],
)
def test_reading_a_pickle_is_refused_unless_allowed(td, store_kwargs, tmp_path, read):
    store = TensorDictStore.from_tensordict(td, **store_kwargs)
    marker = tmp_path / "unpickled"
    _plant_pickle(store_kwargs, store._td_id, marker)
    with pytest.raises(PickleNotAllowedError, match=r"'evil'.*allow_pickle=True"):
        read(store)
    again = pickle.loads(
        pickle.dumps(TensorDictStore.from_store(td_id=store._td_id, **store_kwargs))
    )
    with pytest.raises(PickleNotAllowedError):
        read(again)
    assert not marker.exists()


def test_allow_pickle_true_reads_pickles_and_travels_with_the_store(td, store_kwargs, tmp_path):
    store = TensorDictStore.from_tensordict(td, **store_kwargs)
    marker = tmp_path / "unpickled"
    _plant_pickle(store_kwargs, store._td_id, marker)
    trusting = TensorDictStore.from_store(td_id=store._td_id, allow_pickle=True, **store_kwargs)
    pickle.loads(pickle.dumps(trusting))["evil"]  # a worker gets the same permission
    assert marker.exists()


# ====================================================================== stale metadata
def test_an_entry_replaced_by_another_client_is_read_with_its_new_dtype(td, store_kwargs):
    store = TensorDictStore.from_tensordict(td, **store_kwargs)
    assert store["obs"].dtype == torch.float32  # shape and dtype now cached
    other = TensorDictStore.from_store(td_id=store._td_id, **store_kwargs)
    new = torch.arange(30, dtype=torch.int32).view(10, 3)  # the same number of bytes
    other["obs"] = new
    assert torch.equal(store["obs"], new) and store["obs"].dtype == torch.int32
    assert torch.equal(store[2:4]["obs"], new[2:4])
    store[0] = TensorDict({"obs": torch.full((3,), 7), "n": {"x": torch.tensor(0)}}, [])
    assert torch.equal(other["obs"][0], torch.full((3,), 7, dtype=torch.int32))


# ====================================================================== data gone
def test_a_server_restarted_empty_raises_instead_of_returning_nothing(td, own_server):
    store = TensorDictStore.from_tensordict(td, port=own_server.port, timeout=5)
    assert torch.equal(store[5]["obs"], td["obs"][5])
    own_server.kill()
    restarted = RedisServer(find_binary(), port=own_server.port)  # same port, no data
    own_server.proc = restarted.proc
    for read in (
        lambda: list(store.keys()),
        lambda: "obs" in store.keys(),
        lambda: store[5],
        lambda: store["obs"],
        lambda: store.to_tensordict(),
    ):
        with pytest.raises(StoreDataError, match=r"gone from the redis server"):
            read()
    assert store.batch_size == (10,)  # what it said, but nothing is read as if it were data


def test_a_lazy_stack_store_whose_data_is_gone_raises(own_server):
    stack = TensorDict({"a": torch.ones(4, 2)}, [4]).to_lazystack(0)
    s = LazyStackedTensorDictStore.from_lazy_stack(stack, port=own_server.port, timeout=5)
    s.clear_redis()  # or a flush, an eviction: the keys are gone
    with pytest.raises(StoreDataError, match="gone"):
        s[1]["a"]
    with pytest.raises(StoreDataError):
        s.to_tensordict()


# ====================================================================== no answer
def test_a_socket_that_accepts_and_never_answers_times_out():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts connections; nobody ever reads or answers
        port = silent.getsockname()[1]
        with pytest.raises(StoreTimeoutError, match=r"did not answer within timeout=0\.5 s"):
            TensorDictStore(batch_size=[3], port=port, timeout=TIMEOUT)
        with pytest.raises(StoreConnectionError):  # what code catching connection errors gets
            TensorDictStore.from_store(td_id="x", port=port, timeout=TIMEOUT)
        with pytest.raises(TimeoutError):
            TensorDictStore.from_store(td_id="x", port=port, timeout=TIMEOUT)


def test_a_stopped_server_times_out_and_a_resumed_one_answers(td, own_server):
    store = TensorDictStore.from_tensordict(td, port=own_server.port, timeout=TIMEOUT)
    own_server.proc.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(StoreTimeoutError):
            store["obs"]
        with pytest.raises(StoreTimeoutError):
            store[1] = TensorDict({"obs": torch.zeros(3), "n": {"x": torch.tensor(0)}}, [])
        with pytest.raises(StoreTimeoutError):
            pickle.loads(pickle.dumps(store))["obs"]  # the timeout travels with the store
    finally:
        own_server.proc.send_signal(signal.SIGCONT)
    assert torch.equal(store["obs"][2:], td["obs"][2:])


def test_a_killed_server_raises_a_connection_error_at_once(td, own_server):
    store = TensorDictStore.from_tensordict(td, port=own_server.port, timeout=5)
    own_server.kill()
    with pytest.raises(StoreConnectionError, match="cannot be reached or went away"):
        store["obs"]


@pytest.mark.parametrize("bad", [0, -1, "5", True])
def test_timeout_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        TensorDictStore(batch_size=[3], timeout=bad)
