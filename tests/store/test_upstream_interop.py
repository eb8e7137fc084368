"""A store written here is read by upstream tensordict 0.15.3 (same server, same keys), and the
other way round."""

from __future__ import annotations

import torch

from tensordict import TensorDict
from tensordict.store import TensorDictStore

from ..upstream import run_upstream, upstream_python

UPSTREAM = """
import json, torch
from tensordict import TensorDict
from tensordict.store import TensorDictStore
ours = TensorDictStore.from_store(td_id={td_id!r}, port={port}, db=2)
theirs = TensorDictStore.from_tensordict(
    TensorDict({{"x": torch.arange(6.0).view(3, 2), "s": "up"}}, [3]), port={port}, db=2)
print(json.dumps({{"bs": list(ours.batch_size), "obs": ours["obs"].tolist(),
                  "row": ours[1]["n", "y"].tolist(), "label": ours[2]["label"],
                  "id": theirs._td_id}}))
"""


def test_store_both_ways(redis_server, tmp_path):
    python = upstream_python("redis")
    td = TensorDict(
        {"obs": torch.arange(6.0).view(3, 2), "n": {"y": torch.arange(3)}, "label": "here"}, [3]
    )
    ours = TensorDictStore.from_tensordict(td, port=redis_server.port, db=2)
    ours[2] = TensorDict({"obs": torch.zeros(2), "n": {"y": torch.tensor(9)}, "label": "two"}, [])
    out = run_upstream(python, UPSTREAM.format(td_id=ours._td_id, port=redis_server.port), tmp_path)
    assert out["bs"] == [3] and out["obs"][:2] == td["obs"][:2].tolist()
    assert out["row"] == 1 and out["label"] == "two"
    theirs = TensorDictStore.from_store(td_id=out["id"], port=redis_server.port, db=2)
    assert theirs.batch_size == (3,) and theirs["s"] == "up"
    assert torch.equal(theirs[1:]["x"], torch.arange(6.0).view(3, 2)[1:])
    ours.clear_redis()
    theirs.clear_redis()
