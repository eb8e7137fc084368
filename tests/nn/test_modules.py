"""TensorDictModule and friends: keys, call styles, outputs, selection, pickling."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.errors import OutKeyNotFoundError
from tensordict.nn import (
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictModuleWrapper,
    WrapModule,
    as_tensordict_module,
    dispatch,
    set_skip_existing,
    skip_existing,
)
from tensordict.nn.utils import _set_dispatch_td_nn_modules


def add_sub() -> TensorDictModule:
    return TensorDictModule(lambda x, y: (x + y, x - y), in_keys=["x", "y"], out_keys=["s", "d"])


def xy() -> TensorDict:
    return TensorDict(x=torch.tensor(3.0), y=torch.tensor(1.0))


def test_reads_in_keys_and_writes_out_keys_into_the_input():
    td = xy()
    out = add_sub()(td)
    assert out is td
    assert out["s"] == 4 and out["d"] == 2


def test_nested_keys_are_unravelled():
    module = TensorDictModule(lambda a: a, in_keys=[("a", ("b",))], out_keys=[("c",)])
    assert module.in_keys == [("a", "b")]
    assert module.out_keys == ["c"]


def test_dict_in_keys_pass_keyword_arguments():
    module = TensorDictModule(lambda *, u, v: u - v, in_keys={"u": "x", "v": "y"}, out_keys=["z"])
    assert module(xy())["z"] == 2
    flipped = TensorDictModule(
        lambda *, u, v: u - v, in_keys={"x": "u", "y": "v"}, out_keys=["z"], out_to_in_map=False
    )
    assert flipped(xy())["z"] == 2


def test_out_to_in_map_without_dict_warns():
    with pytest.warns(UserWarning, match="only used when in_key is a dictionary"):
        TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y"], out_to_in_map=True)


def test_missing_input_is_none_unless_strict():
    lenient = TensorDictModule(
        lambda x, m: torch.tensor(m is None), in_keys=["x", "m"], out_keys=["y"]
    )
    assert lenient(xy())["y"]
    strict = TensorDictModule(lambda x, m: x, in_keys=["x", "m"], out_keys=["y"], strict=True)
    with pytest.raises(KeyError, match="'m'"):
        strict(xy())


@pytest.mark.parametrize(
    ("inplace", "same", "batch"), [(True, True, (2,)), (False, False, ()), ("empty", False, (2,))]
)
def test_inplace_decides_where_outputs_go(inplace, same, batch):
    module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"], inplace=inplace)
    td = TensorDict(x=torch.zeros(2), batch_size=[2])
    out = module(td)
    assert (out is td) is same
    assert out.batch_size == torch.Size(batch)
    assert (out["y"] == 1).all()


def test_bad_inplace_value_raises():
    with pytest.raises(ValueError, match="inplace"):
        TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y"], inplace="yes")


def test_not_callable_module_raises():
    with pytest.raises(ValueError, match="not callable"):
        TensorDictModule(3, in_keys=["x"], out_keys=["y"])  # type: ignore[arg-type]


def test_underscore_out_key_drops_an_output():
    module = TensorDictModule(lambda x: (x, x + 1), in_keys=["x"], out_keys=["_", "y"])
    out = module(xy())
    assert "_" not in set(out.keys()) and out["y"] == 4


def test_dict_output_is_matched_by_key():
    module = TensorDictModule(lambda x: {"b": x + 1, "a": x}, in_keys=["x"], out_keys=["a", "b"])
    out = module(xy())
    assert out["a"] == 3 and out["b"] == 4


def test_output_count_mismatch_raises():
    module = TensorDictModule(lambda x: (x, x), in_keys=["x"], out_keys=["y"])
    with pytest.raises(RuntimeError, match="more tensors"):
        module(xy())


def test_method_and_method_kwargs():
    class Net(nn.Module):
        def shift(self, x, *, by):
            return x + by

    module = TensorDictModule(
        Net(), in_keys=["x"], out_keys=["y"], method="shift", method_kwargs={"by": 10}
    )
    assert module(xy())["y"] == 13


def test_tensors_in_tensors_out():
    s, d = add_sub()(torch.tensor(3.0), torch.tensor(1.0))
    assert s == 4 and d == 2
    s, d = add_sub()(x=torch.tensor(3.0), y=torch.tensor(1.0))
    assert s == 4 and d == 2


def test_dispatch_can_be_switched_off():
    module = add_sub()
    with _set_dispatch_td_nn_modules(False), pytest.raises(TypeError):
        module(x=torch.tensor(3.0), y=torch.tensor(1.0))


def test_dispatch_nested_keys_use_the_separator():
    class Net(nn.Module):
        in_keys = [("a", "b")]
        out_keys = ["c"]

        @dispatch(separator="__")
        def forward(self, tensordict):
            return tensordict.set("c", tensordict["a", "b"] * 2)

    assert Net()(a__b=torch.tensor(2.0)) == 4
    with pytest.raises(RuntimeError, match="Duplicated"):
        Net()(torch.tensor(1.0), a__b=torch.tensor(2.0))


def test_dispatch_requires_a_tensordict_argument_name():
    with pytest.raises(RuntimeError, match="named 'tensordict'"):

        @dispatch
        def forward(self, data):
            return data


def test_select_out_keys_drops_the_other_outputs():
    module = add_sub().select_out_keys("d")
    assert module.out_keys == ["d"]
    assert sorted(module(xy()).keys()) == ["d", "x", "y"]
    assert module(torch.tensor(3.0), torch.tensor(1.0)) == 2
    module.reset_out_keys()
    assert sorted(module(xy()).keys()) == ["d", "s", "x", "y"]


def test_select_out_keys_rejects_unknown_and_listed_keys():
    with pytest.raises(OutKeyNotFoundError, match="non existent"):
        add_sub().select_out_keys("nope")
    with pytest.raises(ValueError, match="key should be a"):
        add_sub().select_out_keys(["d"])


def test_class_level_keys_become_instance_lists():
    class Module(TensorDictModuleBase):
        in_keys = [("a",)]
        out_keys = ["b"]

        def forward(self, tensordict):
            return tensordict.set("b", tensordict["a"])

    first, second = Module(), Module()
    assert first.in_keys == ["a"]
    first.in_keys = ["z"]
    assert second.in_keys == ["a"]


def test_repr_lists_the_payload_and_keys():
    text = repr(TensorDictModule(nn.Linear(3, 4), in_keys=["a"], out_keys=["b"]))
    assert text.count("module=Linear") == 1
    assert "in_keys=['a']" in text and "out_keys=['b']" in text


def test_attributes_come_from_the_wrapped_module():
    module = TensorDictModule(nn.Linear(3, 4), in_keys=["a"], out_keys=["b"])
    assert module.in_features == 3
    with pytest.raises(AttributeError):
        _ = module._no_such_private


@pytest.mark.parametrize("payload", [nn.Linear(2, 2), lambda x: x + 1])
def test_pickle_round_trip_including_lambdas(payload):
    module = TensorDictModule(payload, in_keys=["x"], out_keys=["y"])
    clone = pickle.loads(pickle.dumps(module))
    x = torch.randn(2)
    torch.testing.assert_close(clone(x=x), module(x=x))
    assert isinstance(copy.deepcopy(module), TensorDictModule)


def test_wrapper_forwards_calls_and_attributes():
    inner = add_sub()
    wrapper = TensorDictModuleWrapper(inner)
    assert wrapper.in_keys == ["x", "y"]
    assert wrapper(xy())["s"] == 4
    wrapper.select_out_keys("s")
    assert wrapper(torch.tensor(3.0), torch.tensor(1.0)) == 4


def test_wrap_module_and_decorator():
    module = WrapModule(lambda td: TensorDict(z=td["x"] * 2), inplace=True)
    td = xy()
    assert module(td) is td and td["z"] == 6

    @as_tensordict_module(in_keys="x", out_keys="y")
    def double(x):
        return 2 * x

    assert double(xy())["y"] == 6


def test_skip_existing_skips_modules_whose_outputs_exist():
    module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    td = TensorDict(x=torch.zeros(()), y=torch.zeros(()))
    assert skip_existing() is False
    with set_skip_existing(True):
        assert module(td)["y"] == 0
    assert module(td)["y"] == 1
    with set_skip_existing(["other"]):
        assert module(td)["y"] == 1


def test_skip_existing_none_is_for_decorators_only():
    with pytest.raises(RuntimeError, match="It seems"), set_skip_existing(None):
        pass
