"""Dimension names on lazy views and lazy stacks; ``rename`` on every class; ``_sync_all``."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack
from tensordict.core.lazy.views import (
    _PermutedTensorDict,
    _SqueezedTensorDict,
    _TransposedTensorDict,
    _UnsqueezedTensorDict,
    _ViewedTensorDict,
)
from tensordict.errors import LazyViewError


def _named() -> TensorDict:
    return TensorDict({"x": torch.zeros(3, 1, 4)}, [3, 1, 4], names=["a", "b", "c"])


@pytest.mark.parametrize(
    ("cls", "kwargs", "expected"),
    [
        (_UnsqueezedTensorDict, {"dim": 1}, ["a", None, "b", "c"]),
        (_SqueezedTensorDict, {"dim": 1}, ["a", "c"]),
        (_SqueezedTensorDict, {"dim": 0}, ["a", "b", "c"]),  # size 3: not squeezed
        (_PermutedTensorDict, {"dims": [2, 0, 1]}, ["c", "a", "b"]),
        (_TransposedTensorDict, {"dim0": 0, "dim1": 2}, ["c", "b", "a"]),
        (_ViewedTensorDict, {"size": torch.Size([12])}, [None]),
    ],
)
def test_shape_views_show_their_sources_names(cls, kwargs, expected):
    view = cls(_named(), kwargs)
    assert view.names == expected
    assert view.to_tensordict().names == expected
    assert (view + 1).names == expected


def test_sub_tensordict_shows_the_names_of_the_dims_it_keeps():
    sub = _named()._get_sub_tensordict((0, slice(None), [1]))
    assert sub.names == ["b", "c"]
    assert sub.to_tensordict().names == ["b", "c"]
    unnamed = TensorDict(batch_size=[3, 4])._get_sub_tensordict(0)
    assert unnamed.names == [None] and not unnamed._has_names()


@pytest.mark.parametrize("make", ["sub", "unsqueeze"])
def test_names_of_a_view_cannot_be_set(make):
    td = _named()
    view = td._get_sub_tensordict(0) if make == "sub" else _UnsqueezedTensorDict(td, {"dim": 0})
    match = "subtensordict" if make == "sub" else "lazy tensordict"
    with pytest.raises(RuntimeError, match=f"Names of a {match} cannot be modified"):
        view.names = ["p", "q", "r", "s"][: view.batch_dims]
    with pytest.raises(LazyViewError):
        view.rename_(*[None] * view.batch_dims)
    assert td.names == ["a", "b", "c"]


def test_rename_on_a_lazy_stack_keeps_the_original():
    s = lazy_stack([TensorDict({"x": torch.zeros(3)}, [3]) for _ in range(2)], 1)
    s.names = ["t", "n"]
    renamed = s.rename(n="m")
    assert renamed.names == ["t", "m"]
    assert s.names == ["t", "n"]
    assert s.rename_("p", "q") is s and s.names == ["p", "q"]
    assert s.tensordicts[0].names == ["p"]


def test_lazy_stack_names_survive_clone_and_densifying():
    s = lazy_stack([TensorDict({"x": torch.zeros(3)}, [3], names=["t"])] * 2)
    s.names = ["n", "t"]
    assert s.clone().names == ["n", "t"]
    assert s.clone(False).names == ["n", "t"]
    assert s.to_tensordict().names == ["n", "t"]
    assert s.contiguous().names == ["n", "t"]


def test_lazy_stack_name_reaches_nested_stacks_and_cannot_clash_with_them():
    inner = TensorDict({}, [3, 4], names=["c", "d"])
    td = TensorDict({"n": inner}, [3], names=["c"])
    stack = LazyStackedTensorDict.lazy_stack([td, td.clone()], -1)
    with pytest.raises(ValueError, match="unique"):
        stack.names = ["c", "d"]  # the nested tensordicts already call their last dim "d"
    assert stack.names == ["c", None]
    stack.names = ["c", "e"]
    assert stack["n"].names == ["c", "e", "d"]
    assert stack[0]["n"].names == stack["n"][0].names == ["e", "d"]


def test_sync_all_returns_without_an_accelerator():
    td = TensorDict({"a": torch.zeros(2)}, [2])
    assert td._sync_all() is None
    assert LazyStackedTensorDict(td, td)._sync_all() is None


def test_legacy_no_op_permute_and_transpose_return_the_tensordict_itself():
    from tensordict import set_lazy_legacy

    stack = lazy_stack([TensorDict({"x": torch.zeros(3, 2)}, [3, 2])] * 2, 1)
    with set_lazy_legacy(True):
        assert stack.transpose(0, 0) is stack
        assert stack.permute(0, 1, 2) is stack
        assert isinstance(stack.transpose(0, 1), _PermutedTensorDict | _TransposedTensorDict)


def test_legacy_transpose_out_of_range_uses_upstreams_legacy_wording():
    from tensordict import set_lazy_legacy

    td = TensorDict(batch_size=[3, 4])
    with set_lazy_legacy(True), pytest.raises(ValueError, match="dimensions are incompatible"):
        td.transpose(-5, -6)
    with pytest.raises(ValueError, match="dim0 and dim1 must be within"):
        td.transpose(-5, -6)


def test_lazy_stack_of_views_writes_through_them_in_place():
    source = TensorDict({"x": torch.zeros(3, 1)}, [3, 1])
    view = _SqueezedTensorDict(source, {"dim": 1})
    stack = LazyStackedTensorDict(view, view.clone(), stack_dim=0)
    stack.set_("x", torch.ones(2, 3))
    assert (source["x"] == 1).all()
    view._set_str("x", torch.full((3,), 2.0), validated=True, inplace=True)
    assert (source["x"] == 2).all()


def test_shape_ops_on_a_locked_view_give_a_locked_result():
    source = TensorDict({"x": torch.zeros(3, 4)}, [3, 4]).lock_()
    view = _PermutedTensorDict(source, {"dims": [1, 0]})
    assert view.reshape(-1).is_locked
    assert view.reshape(4, 3).is_locked


def test_memmap_of_a_view_of_a_saved_source_to_another_prefix_is_refused(tmp_path):
    from tensordict.errors import AlreadyMemmappedError

    source = TensorDict({"x": torch.zeros(3, 1)}, [3, 1]).memmap_(tmp_path / "a")
    view = _SqueezedTensorDict(source, {"dim": 1})
    with pytest.raises(AlreadyMemmappedError, match=r"^A filename was provided"):
        view.memmap_(tmp_path / "b")
    assert not (tmp_path / "b").exists()
    assert view.memmap_(tmp_path / "c", copy_existing=True).is_memmap()


def test_view_as_a_dtype_views_every_leaf_on_dense_tensordicts_and_views():
    td = TensorDict({"a": torch.zeros(3, 2, 4)}, [3, 2])
    assert td.view(torch.uint8)["a"].dtype == torch.uint8  # (returned td unchanged before)
    assert td.view(torch.uint8)["a"].shape == (3, 2, 16)
    view = _PermutedTensorDict(td, {"dims": [1, 0]})
    out = view.view(torch.uint8, batch_size=[])
    assert out.batch_size == torch.Size([]) and out["a"].shape == (2, 3, 16)
    assert out["a"].dtype == torch.uint8


@pytest.mark.parametrize("make", ["sub", "squeeze"])
def test_to_inplace_on_a_view_is_refused_with_a_type_error(make):
    from tensordict.errors import ViewArgumentError

    source = TensorDict({"x": torch.zeros(3, 1)}, [3, 1])
    if make == "sub":
        view = source._get_sub_tensordict(0)
    else:
        view = _SqueezedTensorDict(source, {"dim": 1})
    match = "_SubTensorDict instance" if make == "sub" else "Cannot use inplace=True"
    with pytest.raises(TypeError, match=match):
        view.to(torch.float64, inplace=True)
    assert issubclass(ViewArgumentError, LazyViewError)
    assert source["x"].dtype == torch.float32
    assert view.to(torch.float64)["x"].dtype == torch.float64


def test_to_with_a_batch_size_on_views():
    from tensordict.errors import ViewArgumentError

    source = TensorDict({"x": torch.zeros(3, 1)}, [3, 1])
    with pytest.raises(TypeError, match="Cannot pass batch-size to"):
        _SqueezedTensorDict(source, {"dim": 1}).to(torch.int32, batch_size=[])
    assert issubclass(ViewArgumentError, TypeError)
    out = source._get_sub_tensordict(0).to(torch.int32, batch_size=[])
    assert out.batch_size == torch.Size([]) and out["x"].dtype == torch.int32


def test_structure_copies_of_a_stack_keep_its_stack_dim_name() -> None:
    # TorchRL's MultiAsyncCollector excludes private keys from a batch named [..., "time"]
    members = [
        TensorDict({"x": torch.zeros(1, i + 1), "_p": torch.zeros(1)}, [1]) for i in range(3)
    ]
    stack = TensorDict.maybe_dense_stack(members, dim=-1)
    stack.refine_names(..., "time")
    for out in (
        stack.exclude("_p"),
        stack.select("x"),
        stack.apply(lambda x: x + 1),
        stack.empty(),
        stack.filter_non_tensor_data(),
        stack.copy(),
    ):
        assert out.names == [None, "time"]
    assert stack.apply(lambda x: x, names=None).names == [None, None]


def test_naming_a_stack_of_ragged_lazy_stacks() -> None:
    ragged = LazyStackedTensorDict(TensorDict(obs=torch.zeros(2)), TensorDict(obs=torch.zeros(3)))
    steps = LazyStackedTensorDict(ragged, ragged.clone(), stack_dim=1)
    steps.refine_names(..., "time")  # (TorchRL names a rollout's time dim)
    assert steps.names == [None, "time"]
