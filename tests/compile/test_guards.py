"""What a compiled function is specialised on: calling it again with another tensordict of the
same structure does not compile it again (each test counts the compiled frames)."""

from __future__ import annotations

import torch

from tensordict import TensorClass, TensorDict
from tests.compile.helpers import frames_after_each_call


class State(TensorClass["nocast"]):
    x: torch.Tensor
    y: torch.Tensor
    z: torch.Tensor


def wide(n: int = 20) -> TensorDict:
    return TensorDict({f"k{i}": torch.randn(4) for i in range(n)}, [4])


def test_shallow_clone_of_a_wide_tensordict_compiles_once() -> None:
    def fn(td: TensorDict) -> torch.Tensor:
        return td.clone(recurse=False)["k0"] + 1

    assert frames_after_each_call(fn, (wide(),), (wide(),), (wide(),)) == [1, 1, 1]


def test_locked_tensordicts_share_the_compiled_code() -> None:
    def fn(td: TensorDict) -> torch.Tensor:
        c = td.clone(recurse=False)
        return c["k0"] + c["k1"]

    assert frames_after_each_call(fn, (wide().lock_(),), (wide().lock_(),)) == [1, 1]


def test_a_tensordict_built_by_compiled_code_is_guarded_like_an_eager_one() -> None:
    def make(seed: torch.Tensor) -> TensorDict:
        return TensorDict({"a": seed + 1, "b": seed + 2}, batch_size=seed.shape[:1])

    def use(td: TensorDict) -> torch.Tensor:
        return td["a"] + td["b"]

    seed = torch.randn(4)
    from_compile = torch.compile(make, backend="eager", fullgraph=True)(seed)
    assert frames_after_each_call(use, (make(seed),), (from_compile,)) == [1, 1]


def test_replace_and_field_reads_of_a_tensorclass_compile_once() -> None:
    def fn(s: State) -> State:
        s = s.replace(x=s.x + 1)
        return s.replace(y=s.x + s.y, z=s.z * 2)

    def make() -> State:
        return State(x=torch.randn(4), y=torch.randn(4), z=torch.randn(4), batch_size=[4])

    assert frames_after_each_call(fn, (make(),), (make(),)) == [1, 1]


def test_in_place_update_compiles_once() -> None:
    def fn(td: TensorDict, src: TensorDict) -> torch.Tensor:
        td.update_(src)
        return td["k0"] + 0

    assert frames_after_each_call(fn, (wide(4), wide(4)), (wide(4), wide(4))) == [1, 1]


def test_slicing_tensordicts_of_new_batch_sizes_compiles_twice_at_most() -> None:
    # the second compile makes the batch dim dynamic; the slice's length must stay symbolic
    def fn(td: TensorDict) -> TensorDict:
        return td[1:3].apply(lambda t: t + 1) + td[-2:]

    calls = [
        (TensorDict({"a": torch.randn(n, 3), "n": {"b": torch.randn(n)}}, [n]),)
        for n in (4, 8, 16, 32)
    ]
    assert frames_after_each_call(fn, *calls) == [1, 2, 2, 2]


def test_storing_a_tensordict_into_the_input_compiles_once() -> None:
    # the eager check that a tensordict is not stored inside itself compared ids: under compile
    # each id became a guard on that very input, and every call recompiled (TorchRL's compiled
    # env steps, which store the "next" tensordict into the one they receive)
    def fn(td: TensorDict) -> TensorDict:
        td.set("next", TensorDict({"obs": td["obs"] + 1}, td.batch_size))
        td.update({"nested": {"r": td["obs"] * 2}})
        return td

    def make() -> TensorDict:
        return TensorDict({"obs": torch.randn(3)}, [3])

    assert frames_after_each_call(fn, (make(),), (make(),), (make(),)) == [1, 1, 1]
