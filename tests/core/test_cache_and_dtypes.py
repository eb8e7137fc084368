"""Small helpers clients import: cache keys, dtype table, pass-through test, pickling reduction."""

from __future__ import annotations

import numpy as np
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict._reductions import _reduce_td
from tensordict.utils import NUMPY_TO_TORCH_DTYPE_DICT, _make_cache_key, _pass_through


def test_cache_key_uses_tensor_identity_and_sorted_kwargs() -> None:
    q, v = torch.rand(3), torch.zeros(2)
    key = _make_cache_key((1, (2, q)), {"b": "c", "a": v})
    assert key == ((1, (2, id(q))), (("a", id(v)), ("b", "c")))
    assert hash(key) == hash(_make_cache_key((1, (2, q)), {"a": v, "b": "c"}))


def test_numpy_to_torch_dtypes_agree_with_torch_from_numpy() -> None:
    for np_dtype, torch_dtype in NUMPY_TO_TORCH_DTYPE_DICT.items():
        assert torch.from_numpy(np.zeros(1, dtype=np_dtype)).dtype == torch_dtype
    assert NUMPY_TO_TORCH_DTYPE_DICT[np.dtype("float32")] is torch.float32


def test_pass_through_reads_the_class_flag() -> None:
    class Kept:
        _pass_through = True

    assert _pass_through(Kept()) and not _pass_through(torch.zeros(1))


def test_reduce_td_rebuilds_a_copy() -> None:
    td = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3])
    make, args = _reduce_td(td)
    out = make(*args)
    assert out is not td and (out == td).all()
    lazy = LazyStackedTensorDict(td, td)
    make, args = _reduce_td(lazy)
    assert (make(*args) == lazy).all()
