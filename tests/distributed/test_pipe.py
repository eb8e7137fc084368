"""The UCXX pipe's protocol (tensordict._ucxx) over an in-memory endpoint: no ucxx needed."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorDict
from tensordict._ucxx import (
    _NEW_SCHEMA_FLAG,
    _SAME_SCHEMA_FLAG,
    TensorDictPipe,
    _compute_total_bytes,
    _metadata_hash,
    recv_tensordict,
    send_tensordict,
)
from tensordict.errors import MissingDependencyError


class Loopback:
    """An endpoint whose receives read, in order, what its sends wrote."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.read = 0
        self.closed = False

    async def send(self, buffer: Any) -> None:
        data = buffer.cpu().numpy() if isinstance(buffer, torch.Tensor) else buffer
        self.sent.append(np.ascontiguousarray(data).tobytes())

    async def recv(self, buffer: Any) -> None:
        data = np.frombuffer(self.sent[self.read], dtype=np.uint8)
        self.read += 1
        target = buffer.numpy() if isinstance(buffer, torch.Tensor) else buffer
        target.view(np.uint8)[...] = data.reshape(target.view(np.uint8).shape)

    async def close(self) -> None:
        self.closed = True


def sample(fill: float = 1.0) -> TensorDict:
    return TensorDict(
        {"obs": torch.full((3, 4), fill), "info": {"r": torch.arange(3.0) + fill}}, [3]
    )


def test_first_message_carries_the_metadata_then_only_the_storage() -> None:
    endpoint = Loopback()
    pipe = TensorDictPipe(endpoint)
    pipe.send(sample())
    flag, length, meta, storage = endpoint.sent
    assert flag == _NEW_SCHEMA_FLAG
    assert struct.unpack("<Q", length)[0] == len(meta)
    assert json.loads(meta)["_total_bytes"] == len(storage)
    pipe.send(sample(2.0))
    assert endpoint.sent[4] == _SAME_SCHEMA_FLAG and len(endpoint.sent) == 6
    pipe.send(TensorDict(x=torch.zeros(2)))  # a new structure: the metadata again
    assert endpoint.sent[6] == _NEW_SCHEMA_FLAG and len(endpoint.sent) == 10


def test_receiver_writes_later_messages_into_the_first_tensordict() -> None:
    endpoint = Loopback()
    sender, receiver = TensorDictPipe(endpoint), TensorDictPipe(endpoint)
    sender.send(sample(1.0))
    sender.send(sample(5.0))
    first = receiver.recv()
    assert (first["info", "r"] == torch.arange(3.0) + 1).all()
    again = receiver.recv()
    assert again is first and (first["obs"] == 5).all()


def test_recv_into_a_consolidated_tensordict_of_the_same_layout() -> None:
    endpoint = Loopback()
    TensorDictPipe(endpoint).send(sample(3.0))
    target = sample(0.0).consolidate()
    assert TensorDictPipe(endpoint).recv(target) is target
    assert (target["obs"] == 3).all()


def test_send_and_recv_methods_take_a_pipe() -> None:
    endpoint = Loopback()
    sample(4.0).send(TensorDictPipe(endpoint))
    out = TensorDict().recv(TensorDictPipe(endpoint))
    assert (out["obs"] == 4).all()
    with pytest.raises(ValueError, match="group_dst"):
        sample().send(TensorDictPipe(endpoint), group_dst=0)


def test_unconsolidated_pipe_carries_non_tensor_values() -> None:
    endpoint = Loopback()
    td = sample(2.0)
    td["label"] = NonTensorData("cat", batch_size=[3])
    TensorDictPipe(endpoint, consolidated=False).send(td)
    out = TensorDictPipe(endpoint, consolidated=False).recv()
    assert out["label"] == "cat" and out.batch_size == (3,)
    assert (out["info", "r"] == td["info", "r"]).all()


def test_stateless_functions_round_trip() -> None:
    endpoint = Loopback()
    asyncio.run(send_tensordict(endpoint, sample(6.0)))
    out = asyncio.run(recv_tensordict(endpoint))
    assert out.is_consolidated() and (out["obs"] == 6).all()


def test_helpers_hash_and_size_metadata() -> None:
    meta = sample().consolidate()._consolidated["metadata"]
    assert _metadata_hash(meta) == _metadata_hash(dict(reversed(list(meta.items()))))
    assert _metadata_hash(meta) != _metadata_hash({**meta, "cls": "other"})
    assert _compute_total_bytes(meta) == sample().consolidate()._consolidated["storage"].numel()


def test_blocking_calls_refuse_a_running_loop() -> None:
    async def inside() -> None:
        TensorDictPipe(Loopback()).send(sample())

    with pytest.raises(RuntimeError, match=r"await pipe\.asend"):
        asyncio.run(inside())


def test_a_dropped_pipe_closes_its_endpoint() -> None:
    endpoint = Loopback()
    pipe = TensorDictPipe(endpoint)
    del pipe
    assert endpoint.closed
    with TensorDictPipe(other := Loopback()) as pipe:
        assert not pipe.closed
    assert pipe.closed and other.closed


def test_connect_without_ucxx_names_the_package() -> None:
    pytest.importorskip("numpy")
    if __import__("importlib").util.find_spec("ucxx") is not None:
        pytest.skip("ucxx is installed")
    with pytest.raises(MissingDependencyError, match="ucxx"):
        asyncio.run(TensorDictPipe.connect("127.0.0.1", 1))
