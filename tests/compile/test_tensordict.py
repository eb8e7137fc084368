"""TensorDict operations compile whole (``fullgraph=True``) and give what eager code gives."""

from __future__ import annotations

import warnings

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, UnbatchedTensor, assert_close
from tensordict.core.behaviour.locking import warn_lock_in_compile
from tests.compile.helpers import compiled


def make() -> TensorDict:
    return TensorDict({"a": torch.arange(4.0), "n": {"b": torch.ones(4, 2)}}, [4])


def test_shape_results_leave_a_compiled_function_after_clear_refs() -> None:
    def fn(td: TensorDict) -> TensorDict:
        return td.view(2, 2).transpose(0, 1).clear_refs_for_compile_()

    out = compiled(fn)(make())
    assert_close(out, fn(make()))
    assert out._last_op is None and out["n"]._last_op is None


def test_locking_in_a_compiled_function_warns_while_compiling_only() -> None:
    def fn(td: TensorDict) -> TensorDict:
        return (td + 1).clear_refs_for_compile_()

    fn_c = compiled(fn)
    td = make().lock_()
    with pytest.warns(UserWarning, match="Using lock_"):
        out = fn_c(td)
    assert out.is_locked and torch.equal(out["a"], td["a"] + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        fn_c(td)  # the compiled code does not warn again


def test_the_lock_warning_is_marked_as_torch_marks_constant_results() -> None:
    # warn_lock_in_compile carries the mark by hand (torch.compiler.assume_constant_result would
    # import torch._dynamo and sympy with tensordict; test_in_place_writes_do_not_import_sympy
    # pins that they are not): it must stay the mark that function sets
    marked = torch.compiler.assume_constant_result(lambda: True)
    marks = {k for k in vars(marked) if k.startswith("_dynamo")}
    assert marks and all(getattr(warn_lock_in_compile, k) == vars(marked)[k] for k in marks)


def test_in_place_arithmetic_on_a_locked_tensordict_compiles() -> None:
    def fn(td: TensorDict) -> TensorDict:
        td += 1
        td += td
        return td

    td = TensorDict({"f": torch.randn(2, 3), "i": torch.ones(2, 3, dtype=torch.int64)}, [2])
    expected = fn(td.clone().lock_())
    out = compiled(fn)(td.lock_())
    assert out is td and (out == expected).all()


def test_indexing_with_a_tensor_compiles_and_matches_eager() -> None:
    def fn(td: TensorDict) -> TensorDict:
        return td[torch.tensor([3, 0])] + 1

    assert_close(compiled(fn)(make()), fn(make()))


def test_new_unsafe_takes_keyword_entries_in_a_compiled_function() -> None:
    def fn(a: torch.Tensor) -> TensorDict:
        return TensorDict._new_unsafe(a=a + 1, batch_size=torch.Size([3]))

    out = compiled(fn)(torch.zeros(3))
    assert type(out) is TensorDict and torch.equal(out["a"], torch.ones(3))


def test_unbatched_entries_keep_their_own_shape_through_compiled_index_and_clone() -> None:
    def fn(td: TensorDict) -> TensorDict:
        return td[1:3].clone()

    table = torch.randn(5)
    td = TensorDict({"a": torch.randn(4, 3), "t": UnbatchedTensor(table)}, [4])
    out = compiled(fn)(td)
    entry = out.get("t")
    assert isinstance(entry, UnbatchedTensor) and entry.batch_size == torch.Size([2])
    assert torch.equal(entry, table) and entry.data_ptr() != table.data_ptr()


def test_lazy_stacks_and_stack_dim_names_compile() -> None:
    def fn(td0: TensorDict, td1: TensorDict) -> TensorDict:
        out = torch.stack([td0, td1], 0)
        out.refine_names("time")
        return out

    out = compiled(fn)(make()[0], make()[1])
    assert out.names == ["time"] and out["n"].names == ["time"]
    lazy = compiled(lambda a, b: LazyStackedTensorDict(a, b, stack_dim=0)["a"] * 2)
    assert torch.equal(lazy(make(), make()), torch.stack([make()["a"]] * 2) * 2)


def test_a_nested_compile_region_takes_and_returns_tensordicts() -> None:
    linear = torch.nn.Linear(2, 2)

    @torch.compiler.nested_compile_region
    def step(td: TensorDict) -> tuple[TensorDict, torch.Tensor]:
        out = td.clone()
        out["b"] = linear(td["b"])
        return out, out["b"].sum()

    def fn(td: TensorDict) -> torch.Tensor:
        total = torch.zeros(())
        for _ in range(2):
            td, s = step(td)
            total = total + s
        return total

    td = make()["n"]
    torch.testing.assert_close(torch.compile(fn, backend="eager")(td), fn(td))


def test_consolidate_compiles_and_keeps_the_entries() -> None:
    def fn(td: TensorDict) -> TensorDict:
        return td.consolidate()

    td = TensorDict(
        {"a": torch.randn(4, 3), "big": torch.randn(4, 8192), "n": {"i": torch.ones(4)}}, [4]
    )
    out = compiled(fn)(td)
    assert out.is_consolidated() and (out == td).all()


def test_clamp_and_maximum_with_numbers_compile_and_keep_eager_dtypes() -> None:
    def fn(td: TensorDict) -> tuple[TensorDict, TensorDict]:
        return td.sqrt().clamp_min(1e-4), td.maximum(2)  # (TorchRL's VecNorm under compile)

    td = TensorDict(
        a=torch.rand(3),
        c=torch.rand(3, dtype=torch.float64),
        i=torch.arange(3),
        b=torch.tensor([True, False, True]),
        batch_size=[3],
    )
    for got, want in zip(compiled(fn)(td), fn(td)):
        assert {k: v.dtype for k, v in got.items()} == {k: v.dtype for k, v in want.items()}
        assert_close(got, want)
