"""map_iter / map on tensorclasses: chunks are tensorclass instances, results may be too."""

from __future__ import annotations

import torch

from tensordict import TensorDict
from tests.parallel import helpers
from tests.tensorclass.classes import Sample


def make(n: int = 12) -> Sample:
    return Sample(
        obs=torch.arange(float(n * 3)).reshape(n, 3),
        reward=torch.zeros(n),
        label="a",
        batch_size=[n],
    )


def test_map_iter_hands_fn_tensorclass_chunks_and_yields_tensorclasses():
    out = list(
        make().map_iter(
            helpers.scale_sample, num_workers=2, chunksize=5, generator=torch.Generator()
        )
    )
    assert all(type(o) is Sample for o in out)
    assert [o.batch_size[0] for o in out] == [5, 5, 2]
    assert torch.equal(torch.cat([o.obs for o in out]), make().obs * 2)
    assert all(o.label == "a" for o in out)


def test_tensorclass_from_a_memmap_directory_through_map_and_back(tmp_path):
    make().memmap_(tmp_path / "src")
    loaded = TensorDict.load_memmap(tmp_path / "src")
    assert type(loaded) is Sample and loaded.is_memmap()
    out = make().memmap_like(tmp_path / "out")
    result = loaded.map(
        helpers.scale_sample, num_workers=2, chunksize=4, out=out, generator=torch.Generator()
    )
    assert result is out
    back = TensorDict.load_memmap(tmp_path / "out")
    assert type(back) is Sample
    assert torch.equal(back.obs, make().obs * 2) and torch.equal(back.reward, torch.ones(12))


def test_map_of_tensorclass_concatenates_into_the_class():
    res = make().map(helpers.scale_sample, num_workers=2, num_chunks=3, generator=torch.Generator())
    assert type(res) is Sample and torch.equal(res.obs, make().obs * 2)
