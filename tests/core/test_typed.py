"""TypedTensorDict: declared keys on a TensorDict."""

from __future__ import annotations

import pickle
import sys

import pytest
import torch
from torch import Tensor

from tensordict import LazyStackedTensorDict, TensorDict, TypedTensorDict
from tensordict.errors import LockedError, TypedFieldError

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pragma: no cover
    from typing_extensions import NotRequired


class Obs(TypedTensorDict):
    x: Tensor
    y: Tensor


class Step(Obs):
    reward: Tensor
    noise: NotRequired[Tensor]


class Frozen(TypedTensorDict["frozen"]):
    x: Tensor


def _obs(n: int = 4) -> Obs:
    return Obs(x=torch.zeros(n, 2), y=torch.ones(n), batch_size=[n])


def test_fields_are_attributes_and_keys() -> None:
    o = _obs()
    assert o.x.shape == (4, 2) and o["y"].shape == (4,) and set(o.keys()) == {"x", "y"}


def test_missing_required_field_is_refused() -> None:
    with pytest.raises(TypedFieldError, match=r"missing required field.*y"):
        Obs(x=torch.zeros(2), batch_size=[2])
    assert issubclass(TypedFieldError, TypeError)


def test_undeclared_field_is_refused() -> None:
    with pytest.raises(TypedFieldError, match=r"unexpected field.*z"):
        Obs(x=torch.zeros(2), y=torch.zeros(2), z=torch.zeros(2), batch_size=[2])


def test_subclass_accumulates_fields_and_optional_ones() -> None:
    assert Step.__expected_keys__ == {"x", "y", "reward", "noise"}
    assert Step.__required_keys__ == {"x", "y", "reward"}
    assert Step.__optional_keys__ == {"noise"}


def test_unset_optional_field_raises_attribute_error() -> None:
    s = Step(**_obs(), reward=torch.zeros(4), batch_size=[4])
    assert set(s.keys()) == {"x", "y", "reward"}
    with pytest.raises(AttributeError, match="declared but not set"):
        _ = s.noise


@pytest.mark.parametrize(
    "op",
    [
        lambda o: o.clone(),
        lambda o: o[1:3],
        lambda o: o[0],
        lambda o: o.reshape(2, 2),
        lambda o: o.apply(lambda t: t + 1),
        lambda o: o.select("x"),
        lambda o: torch.stack([o, o]),
        lambda o: o.unbind(0)[0],
    ],
)
def test_results_keep_the_class(op) -> None:  # type: ignore[no-untyped-def]
    assert type(op(_obs())) is Obs


def test_shadowing_a_tensordict_attribute_needs_shadow() -> None:
    with pytest.raises(AttributeError, match="shadows a TensorDictBase attribute"):

        class Bad(TypedTensorDict):
            clone: Tensor

    class Good(TypedTensorDict["shadow"]):
        clone: Tensor

    assert Good(clone=torch.ones(2), batch_size=[2]).clone.shape == (2,)


def test_frozen_instances_are_locked_and_subclasses_inherit_it() -> None:
    class Child(Frozen):
        y: Tensor

    c = Child(x=torch.zeros(2), y=torch.zeros(2), batch_size=[2])
    assert Child._frozen and c.is_locked
    with pytest.raises(LockedError):
        c["z"] = torch.zeros(2)


def test_unknown_option_is_refused() -> None:
    with pytest.raises(ValueError, match="Unknown TypedTensorDict option"):
        TypedTensorDict["bogus"]


def test_from_tensordict_shares_the_entries() -> None:
    td = TensorDict(x=torch.zeros(3, 2), y=torch.zeros(3), batch_size=[3])
    o = Obs.from_tensordict(td)
    assert o._source is td and o.x is td["x"]
    o.y = torch.ones(3)
    assert torch.equal(td["y"], torch.ones(3))


def test_from_tensordict_checks_required_fields_unless_told() -> None:
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    with pytest.raises(TypedFieldError, match="missing required field"):
        Obs.from_tensordict(td)
    assert Obs.from_tensordict(td, check=False).x.shape == (3,)


def test_from_tensordict_reads_a_lazy_stack() -> None:
    member = TensorDict(x=torch.zeros(2), y=torch.zeros(()))
    o = Obs.from_tensordict(LazyStackedTensorDict(member, member, stack_dim=0))
    assert type(o) is Obs and o.x.shape == (2, 2)


def _stack() -> LazyStackedTensorDict:
    return LazyStackedTensorDict(
        *(TensorDict(x=torch.zeros(2), y=torch.zeros(())) for _ in range(3)), stack_dim=0
    )


def test_a_typed_lazy_stack_writes_into_the_members() -> None:
    stack = _stack()
    o = Obs.from_tensordict(stack)
    o.x = torch.ones(3, 2)
    o["z"] = torch.arange(3)
    o[1] = TensorDict(x=torch.full((2,), 5.0), y=torch.tensor(7.0), z=torch.tensor(9))
    assert (stack.tensordicts[0]["x"] == 1).all() and stack.tensordicts[2]["z"] == 2
    assert (stack.tensordicts[1]["x"] == 5).all() and stack.tensordicts[1]["y"] == 7
    o.zero_()
    assert all((m["x"] == 0).all() for m in stack.tensordicts)


def test_a_typed_lazy_stack_reads_what_the_members_hold_now() -> None:
    stack = _stack()
    o = Obs.from_tensordict(stack)
    stack.tensordicts[2]["y"] += 4
    assert o.y.tolist() == [0.0, 0.0, 4.0]
    del stack.tensordicts[0]["x"], stack.tensordicts[1]["x"], stack.tensordicts[2]["x"]
    assert set(o.keys()) == {"y"}


def test_results_of_a_typed_lazy_stack_stay_typed_over_their_kind() -> None:
    o = Obs.from_tensordict(_stack())
    clone, row = o.clone(), o[0]
    assert type(clone) is Obs and isinstance(clone._source, LazyStackedTensorDict)
    assert type(row) is Obs and type(row._source) is TensorDict
    assert type(o + 1) is Obs and type(o.to_tensordict()) is TensorDict


def test_a_typed_tensordict_is_a_tensordictbase_not_a_tensordict() -> None:
    # as upstream: it wraps its source
    from tensordict import TensorDictBase

    o = _obs()
    assert isinstance(o, TensorDictBase) and not isinstance(o, TensorDict)
    assert type(o._source) is TensorDict


def test_memmap_in_place_maps_the_source_and_returns_the_instance(tmp_path) -> None:  # type: ignore[no-untyped-def]
    o = _obs()
    assert o.memmap_(tmp_path) is o
    assert o.is_memmap() and o.is_locked and o._source.is_memmap()
    assert type(o.memmap(tmp_path / "copy")) is Obs


def test_a_typed_hdf5_file_is_read_and_written_in_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("h5py")
    from tensordict import PersistentTensorDict

    h5 = PersistentTensorDict.from_dict(
        TensorDict(x=torch.zeros(3, 2), y=torch.zeros(3), batch_size=[3]),
        filename=str(tmp_path / "f.h5"),
    )
    o = Obs.from_tensordict(h5)
    with pytest.warns(UserWarning, match="inefficient"):  # the file's array is replaced
        o.x = torch.ones(3, 2)
    o[0] = TensorDict(x=torch.full((2,), 3.0), y=torch.tensor(1.0))
    assert h5["x"].tolist() == [[3.0, 3.0], [1.0, 1.0], [1.0, 1.0]] and h5["y"][0] == 1
    o.fill_("y", 2.0)
    assert (h5["y"] == 2).all()


def test_pickle_round_trip_keeps_the_class() -> None:
    back = pickle.loads(pickle.dumps(_obs()))
    assert type(back) is Obs and torch.equal(back.y, torch.ones(4))


def test_memmap_writes_a_plain_tensordict_layout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _obs().memmap_(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path)
    assert type(loaded) is TensorDict and torch.equal(loaded["y"], torch.ones(4))
    assert "tensordict._td.TensorDict" in (tmp_path / "meta.json").read_text()


def test_setting_source_points_the_instance_at_the_new_tensordict() -> None:
    # upstream's tests write ``typed._source = typed._source.float()``
    class State(TypedTensorDict):
        obs: torch.Tensor

    typed = State(obs=torch.arange(3), batch_size=[3])
    typed._source = typed._source.float()
    assert typed.obs.dtype == torch.float32 and typed.batch_size == (3,)
    plain = TensorDict(obs=torch.ones(2, 4), batch_size=[2])
    typed._source = plain
    assert typed._source is plain and typed.batch_size == (2,)
    plain["obs"] += 1  # shared entries, as from_tensordict
    assert (typed.obs == 2).all()


def test_unlocking_a_memory_mapped_typed_tensordict_drops_the_flag(tmp_path) -> None:  # type: ignore[no-untyped-def]
    o = _obs().memmap_(tmp_path)
    assert o.is_memmap()
    o.unlock_()
    assert not o.is_memmap() and not o._source.is_memmap()


def test_casting_in_place_casts_the_source() -> None:
    o = _obs()
    source = o._source
    assert o.to(torch.float64, inplace=True) is o
    assert o.x.dtype == torch.float64 and o._source is source and source["y"].dtype == torch.float64
