"""A tensordict can never be stored inside itself (every operation would recurse forever)."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.errors import CycleError


def make() -> TensorDict:
    return TensorDict({"x": torch.zeros(3), "a": {"b": torch.zeros(3)}}, [3])


WRITES = {
    "setitem": lambda td: td.__setitem__("c", td),
    "set": lambda td: td.set("c", td),
    "nested key": lambda td: td.set(("a", "b2"), td),
    "new nested key": lambda td: td.set(("n", "m"), td),
    "into a nested td": lambda td: td["a"].set("z", td),
    "update": lambda td: td.update({"q": td}),
    "update merging into itself": lambda td: td.update({"a": td}),
    "inside a wrapper": lambda td: td.set("w", TensorDict({"inner": td}, [3])),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_storing_a_tensordict_inside_itself_raises_a_value_error(write):
    td = make()
    before = set(td.keys(include_nested=True))
    with pytest.raises(ValueError, match="contains the tensordict it would be stored in"):
        write(td)
    assert set(td.keys(include_nested=True)) == before, "nothing was written"
    assert "x" in repr(td)  # still usable: no recursion


def test_cycle_error_is_a_value_error_as_upstream():
    assert issubclass(CycleError, ValueError)


def test_cycle_error_names_the_key():
    td = make()
    with pytest.raises(CycleError, match=r"\('a', 'b2'\)"):
        td["a", "b2"] = td


def test_a_lazy_stack_cannot_be_stored_in_itself():
    stack = LazyStackedTensorDict(*[TensorDict({"x": torch.zeros(3)}, [3]) for _ in range(2)])
    with pytest.raises(CycleError):
        stack["s"] = stack


def test_a_copy_of_the_tensordict_can_be_stored_in_it():
    td = make()
    td["copy"] = td.clone()
    assert torch.equal(td["copy", "a", "b"], td["a", "b"])


def test_the_same_sub_tensordict_can_be_stored_twice():
    td = make()
    td["again"] = td["a"]  # a DAG, not a cycle
    assert td["again"] is td["a"]
