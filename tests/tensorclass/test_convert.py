"""Conversions to and from tensordicts and dicts, copies, and the repr."""

from __future__ import annotations

import copy

import pytest
import torch

from tensordict import TensorDict, set_printoptions
from tensordict.errors import UndeclaredFieldError
from tests.tensorclass.classes import Pair, Sample


def sample(n: int = 3) -> Sample:
    return Sample(obs=torch.arange(float(n)), label="cat", batch_size=[n])


def test_to_tensordict_gives_a_plain_tensordict_copy() -> None:
    s = sample()
    td = s.to_tensordict()
    assert type(td) is TensorDict and td["obs"] is not s.obs and torch.equal(td["obs"], s.obs)


def test_to_tensordict_turns_nested_tensorclasses_into_tensordicts() -> None:
    td = Pair(left=sample(), right=torch.zeros(3), batch_size=[3]).to_tensordict()
    assert type(td.get("left")) is TensorDict


def test_a_tensordict_holding_tensorclasses_converts_them_too() -> None:
    # as upstream: to_tensordict gives tensordicts all the way down; with retain_none=True a
    # field that holds None becomes a NonTensorData of None (left out otherwise)
    td = TensorDict(pair=Pair(left=sample(), right=torch.zeros(3), batch_size=[3]), batch_size=[3])
    for retain_none in (None, False, True):
        out = td.to_tensordict(retain_none=retain_none)
        assert type(out.get("pair")) is TensorDict and type(out.get(("pair", "left"))) is TensorDict
        reward = out.get(("pair", "left", "reward"), None)
        assert (reward is not None and reward.data is None) if retain_none else reward is None
    assert type(td.get("pair")) is Pair  # the source keeps its class


def test_from_tensordict_shares_the_tensordict() -> None:
    td = TensorDict({"obs": torch.zeros(2)}, [2])
    assert Sample.from_tensordict(td)._tensordict is td


def test_from_tensordict_leaves_missing_fields_unset() -> None:
    s = Sample.from_tensordict(TensorDict({"obs": torch.zeros(2)}, [2]))
    assert s.reward is None and s.label is None


def test_from_tensordict_builds_nested_tensorclasses_from_annotations() -> None:
    td = TensorDict({"left": {"obs": torch.zeros(2)}, "right": torch.zeros(2)}, [2])
    assert type(Pair.from_tensordict(td).left) is Sample


def test_from_tensordict_refuses_entries_that_are_not_fields() -> None:
    with pytest.raises(UndeclaredFieldError, match=r"entries \['extra'\]"):
        Sample.from_tensordict(TensorDict({"obs": torch.zeros(2), "extra": torch.zeros(2)}, [2]))


def test_to_tensordict_and_back_round_trips() -> None:
    p = Pair(left=sample(), right=torch.ones(3), batch_size=[3])
    back = Pair.from_tensordict(p.to_tensordict())
    assert type(back.left) is Sample and (back == p).all()


def test_to_dict_includes_unset_fields() -> None:
    d = sample().to_dict()
    assert d["label"] == "cat" and d["reward"] is None and torch.equal(d["obs"], sample().obs)


def test_to_dict_without_none_drops_unset_fields() -> None:
    assert "reward" not in sample().to_dict(retain_none=False)


def test_from_dict_round_trips_a_nested_instance() -> None:
    p = Pair(left=sample(), right=torch.ones(3), batch_size=[3])
    back = Pair.from_dict(p.to_dict(), batch_size=[3])
    assert type(back.left) is Sample and back.left.label == "cat"
    assert torch.equal(back.left.obs, p.left.obs)


def test_from_dict_infers_the_batch_size_when_asked() -> None:
    s = Sample.from_dict({"obs": torch.zeros(4, 2), "reward": torch.zeros(4)}, auto_batch_size=True)
    assert s.batch_size == torch.Size([4])


def test_copy_shares_tensors_but_not_the_structure() -> None:
    s = sample()
    c = copy.copy(s)
    c.obs = torch.ones(3)
    assert torch.equal(s.obs, torch.arange(3.0)) and c._tensordict is not s._tensordict


def test_deepcopy_copies_the_tensors() -> None:
    s = sample()
    assert copy.deepcopy(s).obs is not s.obs


# ---------------------------------------------------------------------- repr


@pytest.fixture
def detailed_repr():
    with set_printoptions(compact=False):
        yield


def test_repr_is_compact_by_default() -> None:
    s = Sample(obs=torch.zeros(3, 4, 1), label="test", batch_size=[3, 4])
    assert repr(s) == "Sample(batch_size=[3,4], fields={label: str, obs: f32[1], reward: None})"
    s = Sample(obs=torch.zeros(3), batch_size=[3], device="cpu")
    assert repr(s).startswith("Sample(batch_size=[3], device=cpu, fields={")


def test_repr_compact_hides_what_the_options_hide() -> None:
    s = Sample(obs=torch.zeros(3), batch_size=[3], device="cpu")
    with set_printoptions(show_batch_size=False, show_device=False):
        assert repr(s) == "Sample(fields={label: str, obs: f32[], reward: None})"


def test_repr_matches_the_upstream_layout(detailed_repr: None) -> None:
    s = Sample(obs=torch.zeros(3, 4, 1), label="test", batch_size=[3, 4])
    assert repr(s) == (
        "Sample(\n"
        "    label=NonTensorData(data=test, batch_size=torch.Size([3, 4]), device=None),\n"
        "    obs=Tensor(shape=torch.Size([3, 4, 1]), device=cpu, dtype=torch.float32, "
        "is_shared=False),\n"
        "    reward=None,\n"
        "    batch_size=torch.Size([3, 4]),\n"
        "    device=None,\n"
        "    is_shared=False)"
    )


def test_repr_detailed_hides_the_header_lines_the_options_hide() -> None:
    s = Sample(obs=torch.zeros(3), batch_size=[3])
    with set_printoptions(show_device=False, show_is_shared=False, show_field_device=False):
        text = repr(s)
    assert text.endswith("    reward=None,\n    batch_size=torch.Size([3]))")
    assert "\n    device=" not in text and "\n    is_shared=" not in text


def test_repr_without_tensordict_fields_has_no_leading_newline(detailed_repr: None) -> None:
    s = Sample.from_tensordict(TensorDict())
    assert repr(s).startswith("Sample(    obs=None,\n")


def test_repr_indents_a_nested_tensorclass(detailed_repr: None) -> None:
    text = repr(Pair(left=sample(), right=torch.zeros(3), batch_size=[3]))
    assert "    left=Sample(\n        label=NonTensorData" in text
    assert "\n        reward=None,\n        batch_size=torch.Size([3])," in text
