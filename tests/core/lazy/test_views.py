"""Lazy views (_CustomOpTensorDict & co, _SubTensorDict): reads map, writes reach the source."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import TensorDict
from tensordict.core.lazy.views import (
    _CustomOpTensorDict,
    _PermutedTensorDict,
    _str_to_index,
    _SubTensorDict,
    _ViewedTensorDict,
    lazy_shape_view,
)

VIEWS: dict[str, tuple[str, dict[str, Any]]] = {
    "permute": ("permute", {"dims": [2, 0, 1]}),
    "transpose": ("transpose", {"dim0": 0, "dim1": 2}),
    "unsqueeze": ("unsqueeze", {"dim": 1}),
    "squeeze": ("squeeze", {"dim": 3}),
    "view": ("view", {"size": torch.Size([6, 4, 1])}),
}


def source() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(24.0).view(2, 3, 4, 1), ("n", "b"): torch.zeros(2, 3, 4, 1, 5)},
        [2, 3, 4, 1],
    )


def dense_op(td: TensorDict, op: str, kwargs: dict[str, Any]) -> TensorDict:
    if op == "view":
        return td.view(kwargs["size"])
    if op == "permute":
        return td.permute(kwargs["dims"] + [3])
    return getattr(td, op)(*kwargs.values())


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_reads_like_the_dense_op(name: str) -> None:
    op, kwargs = VIEWS[name]
    td = source()
    view = lazy_shape_view(td, op, **kwargs)
    expected = dense_op(td, op, kwargs)
    assert isinstance(view, _CustomOpTensorDict) and view._source is td
    assert view.batch_size == expected.batch_size
    assert (view["a"] == expected["a"]).all()
    assert isinstance(view["n"], type(view)) and view["n", "b"].shape == expected["n", "b"].shape


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_writes_reach_the_source(name: str) -> None:
    op, kwargs = VIEWS[name]
    td = source()
    view = lazy_shape_view(td, op, **kwargs)
    view.set_("a", torch.zeros_like(view["a"]))
    assert (td["a"] == 0).all()
    view.apply_(lambda x: x.add_(1))
    assert (td["a"] == 1).all() and (td["n", "b"] == 1).all()
    view["new"] = torch.ones(view.batch_size)
    assert td["new"].shape == td.batch_size
    view.del_("new")
    assert "new" not in td.keys()  # noqa: SIM118


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_setitem_writes_the_source(name: str) -> None:
    op, kwargs = VIEWS[name]
    td = source()
    view = lazy_shape_view(td, op, **kwargs)
    view[0] = 5.0
    assert (dense_op(td, op, kwargs)[0]["a"] == 5).all()
    assert float(td["a"].sum()) == 5 * view[0].numel() + float(
        dense_op(source(), op, kwargs)[1:]["a"].sum()
    )


def test_setitem_on_a_view_creates_new_keys_in_the_source() -> None:
    td = TensorDict(batch_size=[4, 4])
    view = lazy_shape_view(td, "view", size=torch.Size([16]))
    for i in range(16):
        view[i] = TensorDict({"a": torch.full((10,), float(i))}, [])
    assert td["a"].shape == torch.Size([4, 4, 10])
    assert td["a"][1, 2, 0] == 6


def test_inplace_operator_on_a_view_returns_the_view() -> None:
    td = source()
    view = lazy_shape_view(td, "permute", dims=[2, 0, 1])
    out = view.__iadd__(1)
    assert out is view and float(td["a"].sum()) == float(source()["a"].sum()) + 24


def test_the_inverse_op_gives_back_the_source() -> None:
    td = source()
    assert (
        lazy_shape_view(lazy_shape_view(td, "permute", dims=[2, 0, 1]), "permute", dims=[1, 2, 0])
        is td
    )
    assert lazy_shape_view(lazy_shape_view(td, "unsqueeze", dim=0), "squeeze", dim=0) is td
    viewed = lazy_shape_view(td, "view", size=torch.Size([24]))
    assert isinstance(viewed, _ViewedTensorDict)
    assert lazy_shape_view(viewed, "view", size=torch.Size([2, 3, 4, 1])) is td


def test_locking_a_view_locks_its_source() -> None:
    td = source()
    view = lazy_shape_view(td, "permute", dims=[2, 0, 1])
    view.lock_()
    assert td.is_locked and view.is_locked
    view.unlock_()
    assert not td.is_locked


def test_view_operations_give_dense_tensordicts() -> None:
    view = lazy_shape_view(source(), "permute", dims=[2, 0, 1])
    assert isinstance(view, _PermutedTensorDict)
    for out in (view.clone(), view + 1, view.apply(lambda x: x), view.to_tensordict(), view[0]):
        assert type(out) is TensorDict


# ---------------------------------------------------------------- _SubTensorDict
def test_sub_tensordict_reads_views_of_the_source() -> None:
    td = source()
    sub = td._get_sub_tensordict((slice(None), 1))
    assert isinstance(sub, _SubTensorDict) and sub.batch_size == torch.Size([2, 4, 1])
    sub.apply_(lambda x: x.zero_())
    assert (td["a"][:, 1] == 0).all() and (td["a"][:, 0] != 0).any()


def test_sub_tensordict_new_key_is_zero_elsewhere_in_the_source() -> None:
    td = source()
    sub = td._get_sub_tensordict(1)
    sub["q"] = torch.ones(3, 4, 1, 2)
    assert td["q"].shape == torch.Size([2, 3, 4, 1, 2])
    assert (td["q"][1] == 1).all() and (td["q"][0] == 0).all()


def test_sub_tensordict_with_an_index_tensor_writes_back() -> None:
    td = source()
    sub = td._get_sub_tensordict((slice(None), torch.tensor([0, 2])))
    sub["a"] = torch.full((2, 2, 4, 1), -7.0)
    a = td["a"]
    assert (a[:, 0] == -7).all() and (a[:, 2] == -7).all() and (a[:, 1] >= 0).all()
    sub[0] = -9.0
    a = td["a"]
    assert (a[0, 0] == -9).all() and (a[0, 2] == -9).all() and (a[1, 0] == -7).all()


def test_sub_tensordict_update_inplace_writes_the_source() -> None:
    td = source()
    sub = td._get_sub_tensordict((slice(None), 1))
    sub.update({"a": torch.full((2, 4, 1), -1.0)}, inplace=True)
    assert (td["a"][:, 1] == -1).all()


def test_str_to_index_decodes_tagged_and_legacy_indices() -> None:
    tagged = ["tuple", [["slice", {"start": 0, "stop": 2, "step": None}], ["tensor", [1, 0]]]]
    index = _str_to_index(tagged)
    assert index[0] == slice(0, 2) and index[1].tolist() == [1, 0]
    legacy = [["slice", {"start": None, "stop": None, "step": None}], ["ellipsis"]]
    assert _str_to_index(legacy) == (slice(None), Ellipsis)


# ---------------------------------------------------------------- upstream's legacy lazy mode
def test_legacy_mode_shape_ops_give_views_and_stack_gives_lazy() -> None:
    from tensordict import LazyStackedTensorDict
    from tensordict.utils import set_lazy_legacy

    td = source()
    with set_lazy_legacy(True):
        assert isinstance(td.permute(3, 2, 1, 0), _PermutedTensorDict)
        assert isinstance(td.view(-1), _ViewedTensorDict)
        assert td.view(-1).view(td.shape) is td
        assert td.unsqueeze(0).squeeze(0) is td
        assert isinstance(torch.stack([td, td]), LazyStackedTensorDict)
        lazy = LazyStackedTensorDict(*td.unbind(0))
        assert isinstance(lazy.permute(1, 0, 2, 3), _PermutedTensorDict)
    assert type(td.permute(3, 2, 1, 0)) is TensorDict


def test_legacy_squeeze_of_every_unit_dim_is_a_view() -> None:
    from tensordict.utils import set_lazy_legacy

    td = TensorDict(a=torch.zeros(2, 1, 3, 1), batch_size=[2, 1, 3, 1])
    with set_lazy_legacy(True):
        squeezed = td.squeeze()
    assert squeezed.batch_size == torch.Size([2, 3]) and squeezed._source is td
    squeezed.set_("a", torch.ones(2, 3))
    assert (td["a"] == 1).all()


@pytest.mark.parametrize("op", ["permute", "unsqueeze", "transpose", "view"])
def test_views_refuse_shape_ops_outside_legacy_mode(op: str) -> None:
    from tensordict.errors import LazyViewError

    view = lazy_shape_view(source(), "permute", dims=[2, 0, 1])
    args = {"permute": (1, 0, 2, 3), "unsqueeze": (0,), "transpose": (0, 1), "view": (-1,)}[op]
    with pytest.raises(LazyViewError, match=r"Make it dense|Call `reshape`"):
        getattr(view, op)(*args)
    assert type(view.reshape(-1)) is TensorDict  # a dense copy is always possible


def test_views_refuse_inplace_select_and_exclude() -> None:
    from tensordict.errors import LazyViewError

    view = lazy_shape_view(source(), "permute", dims=[2, 0, 1])
    with pytest.raises(LazyViewError, match="Cannot call select"):
        view.select("a", inplace=True)
    with pytest.raises(LazyViewError, match="Cannot call exclude"):
        view.exclude("a", inplace=True)
    assert list(view.select("a").keys()) == ["a"]


def test_sub_tensordict_refuses_lock_and_memmap() -> None:
    from tensordict.errors import LazyViewError, LockedError

    sub = source()._get_sub_tensordict(0)
    with pytest.raises(LockedError, match="the parent tensordict instead"):
        sub.lock_()
    with pytest.raises(LazyViewError, match="memmap cannot be done"):
        sub.memmap_()
    assert sub.unlock_() is sub  # nothing to unlock


def test_sub_tensordict_new_nested_entry_keeps_its_extra_batch_dims() -> None:
    td = source()
    sub = td._get_sub_tensordict((slice(None), 1))
    sub.set("n2", TensorDict({"x": torch.ones(2, 4, 1, 3, 5)}, [2, 4, 1, 3]))
    assert td["n2"].batch_size == torch.Size([2, 3, 4, 1, 3])
    assert (td["n2", "x"][:, 1] == 1).all() and (td["n2", "x"][:, 0] == 0).all()


def test_sub_tensordict_refuses_replacing_a_nested_tensordict_by_a_tensor() -> None:
    from tensordict.errors import ShapeMismatchError

    sub = source()._get_sub_tensordict(0)
    with pytest.raises(ValueError, match="Tried to replace a tensordict") as info:
        sub.update({"n": torch.zeros(3, 4, 1)})
    assert isinstance(info.value, ShapeMismatchError)


def test_sub_tensordict_set_of_an_existing_tensor_is_refused_but_setitem_writes() -> None:
    from tensordict.errors import LazyViewError

    td = source()
    sub = td._get_sub_tensordict((slice(None), torch.tensor([0, 2])))
    with pytest.raises(LazyViewError, match="prohibited for existing tensors"):
        sub.set("a", torch.zeros(2, 2, 4, 1))
    sub["a"] = torch.full((2, 2, 4, 1), -3.0)
    sub.set_at_("a", -5.0, (0, 1))
    assert (td["a"][:, 0] == -3).all() and (td["a"][0, 2] == -5).all()
    assert sub.get_parent_tensordict() is td


def test_split_keys_in_place_on_a_view_removes_the_keys_from_the_source() -> None:
    td = source()
    view = lazy_shape_view(td, "permute", dims=[2, 0, 1])
    part, rest = view.split_keys(["a"], inplace=True)
    assert rest is view and list(part.keys()) == ["a"] and "a" not in td._own_keys()


def test_memmap_of_a_view_maps_its_source(tmp_path: Any) -> None:
    td = source()
    view = lazy_shape_view(td, "permute", dims=[2, 0, 1])
    expected = view.to_tensordict()
    view.memmap_(tmp_path)
    assert view.is_memmap() and td.is_locked
    assert (view["a"] == expected["a"]).all()
    loaded = TensorDict.load_memmap(tmp_path)
    assert loaded.batch_size == view.batch_size and (loaded["a"] == expected["a"]).all()
