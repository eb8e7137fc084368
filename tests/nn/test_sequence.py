"""TensorDictSequential: keys, where outputs go, selection, sub-sequences, editing."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from torch import nn

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential


def step(src: str, dst: str, fn=lambda x: x + 1) -> TensorDictModule:
    return TensorDictModule(fn, in_keys=[src], out_keys=[dst])


def chain() -> TensorDictSequential:
    return TensorDictSequential(step("x", "h"), step("h", "y"), step("x", "z"))


def test_keys_are_the_first_reads_and_every_write():
    seq = TensorDictSequential(
        TensorDictModule(lambda a, b: a + b, in_keys=["k1", "k2"], out_keys=["f"]),
        TensorDictModule(lambda a, b: a + b, in_keys=["k1", "k3"], out_keys=["k1"]),
        TensorDictModule(lambda a, b: a + b, in_keys=["f", "k3"], out_keys=["k2"]),
    )
    assert set(seq.in_keys) == {"k1", "k2", "k3"}
    assert set(seq.out_keys) == {"f", "k1", "k2"}


def test_runs_in_order_on_the_input():
    td = TensorDict(x=torch.zeros(()))
    out = chain()(td)
    assert out is td
    assert out["y"] == 2 and out["z"] == 1


def test_plain_functions_become_modules():
    seq = TensorDictSequential(step("x", "y"), lambda td: td.set("w", td["y"] * 10))
    assert seq(TensorDict(x=torch.zeros(())))["w"] == 10


def test_selected_out_keys_hide_intermediate_results():
    seq = TensorDictSequential(step("x", "h"), step("h", "y"), selected_out_keys=["y"])
    td = TensorDict(x=torch.zeros(()))
    out = seq(td)
    assert out is td
    assert sorted(out.keys()) == ["x", "y"]
    seq.reset_out_keys()
    assert sorted(seq(TensorDict(x=torch.zeros(()))).keys()) == ["h", "x", "y"]


def test_selecting_unknown_outputs_raises():
    with pytest.raises(ValueError, match="must be in out_keys"):
        chain().select_out_keys("nope")


@pytest.mark.parametrize("inplace", [False, "empty"])
def test_non_inplace_sequences_write_into_a_new_tensordict(inplace):
    seq = TensorDictSequential(step("x", "y"), inplace=inplace)
    td = TensorDict(x=torch.zeros(2), batch_size=[2])
    out = seq(td)
    assert out is not td
    assert "y" in set(out.keys()) and "x" not in set(out.keys())
    assert "y" not in set(td.keys())


def test_tensordict_out_receives_the_outputs_only():
    out = TensorDict()
    result = chain()(TensorDict(x=torch.zeros(())), tensordict_out=out)
    assert result is out
    assert sorted(out.keys()) == ["h", "y", "z"]


def test_ordered_dict_names_the_modules():
    first = step("x", "y")
    seq = TensorDictSequential(OrderedDict(first=first, second=step("y", "z")))
    assert seq["first"] is first
    assert isinstance(seq.module, nn.ModuleDict)
    assert seq(TensorDict(x=torch.zeros(())))["z"] == 2


def test_select_subsequence_keeps_what_the_outputs_need():
    sub = chain().select_subsequence(out_keys=["y"])
    assert len(sub) == 2
    assert sub.out_keys == ["h", "y"]
    sub = chain().select_subsequence(in_keys=["h"])
    assert len(sub) == 1 and sub.in_keys == ["h"]
    with pytest.raises(ValueError, match="No modules left"):
        chain().select_subsequence(in_keys=["nothing"], out_keys=["nope"])


def test_editing_modules_refreshes_the_keys():
    seq = chain()
    seq[2] = step("y", "w")
    assert "w" in seq.out_keys and "z" not in seq.out_keys
    del seq[2]
    assert len(seq) == 2 and "w" not in seq.out_keys


def test_editing_cannot_lose_selected_outputs():
    seq = TensorDictSequential(step("x", "h"), step("h", "y"), selected_out_keys=["y"])
    with pytest.raises(ValueError, match="would remove the selected out_keys"):
        del seq[1]


def test_slicing_gives_a_sequence():
    sub = chain()[:2]
    assert isinstance(sub, TensorDictSequential) and len(sub) == 2


def test_partial_tolerant_skips_modules_without_inputs():
    seq = TensorDictSequential(step("x", "y"), step("missing", "z"), partial_tolerant=True)
    out = seq(TensorDict(x=torch.zeros(())))
    assert "y" in set(out.keys()) and "z" not in set(out.keys())


def test_partial_tolerant_runs_on_lazy_stack_members_that_have_the_inputs():
    seq = TensorDictSequential(step("a", "b"), partial_tolerant=True)
    td = LazyStackedTensorDict.lazy_stack(
        [TensorDict(a=torch.zeros(1)), TensorDict(c=torch.zeros(1))]
    )
    seq(td)
    assert "b" in set(td.tensordicts[0].keys()) and "b" not in set(td.tensordicts[1].keys())


def test_errors_name_the_failing_module():
    seq = TensorDictSequential(step("x", "y"), step("y", "z", fn=lambda y: 1 / "x"))
    with pytest.raises(TypeError) as info:
        seq(TensorDict(x=torch.zeros(())))
    assert any("module '1'" in note for note in getattr(info.value, "__notes__", []))


def test_tensors_in_tensors_out():
    h, y, z = chain()(torch.zeros(()))
    assert (h, y, z) == (1, 2, 1)
