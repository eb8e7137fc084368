"""The compact repr (upstream 0.15's default), checked against the layout upstream prints."""

import torch

from tensordict import LazyStackedTensorDict, TensorDict, set_printoptions
from tensordict.core.serial.compact_repr import dtype_code


def test_one_line_when_it_fits() -> None:
    td = TensorDict(a=torch.zeros(3, 4), b=torch.zeros(3, dtype=torch.int64), batch_size=[3])
    td["n"] = TensorDict(x=torch.zeros(3, 5, 2, dtype=torch.float64), batch_size=[3, 5])
    td["s"] = "text"
    expected = "TensorDict(batch_size=[3], fields={a: f32[4], b: i64[], s: str})"
    assert repr(td.exclude("n")) == expected
    assert repr(td) == (
        "TensorDict(batch_size=[3], fields={\n"
        "    a: f32[4],\n"
        "    b: i64[],\n"
        "    n: [5]{x: f64[2]},\n"
        "    s: str})"
    )


def test_entries_sort_as_rendered_lines() -> None:
    td = TensorDict({"key1": torch.zeros(1), "key10": torch.zeros(1), "c": torch.zeros(1)})
    assert repr(td) == "TensorDict(batch_size=[], fields={c: f32[1], key10: f32[1], key1: f32[1]})"


def test_device_and_lazy_stack_header() -> None:
    assert repr(TensorDict(device="cpu", batch_size=[2])) == (
        "TensorDict(batch_size=[2], device=cpu, fields={})"
    )
    stack = LazyStackedTensorDict.lazy_stack(
        [TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3), b=torch.zeros(1))]
    )
    assert repr(stack) == (  # (the fields wrap: with the exclusive ones they pass 80 columns)
        "LazyStackedTensorDict(batch_size=[2], stack_dim=0, fields={\n"
        "    a: f32[-1]}, exclusive_fields={1: {b: f32[1]}})"
    )


def test_dtype_codes() -> None:
    codes = [dtype_code(d) for d in (torch.bfloat16, torch.uint8, torch.complex64, torch.bool)]
    assert codes == ["bf16", "u8", "c64", "bool"]


def test_compact_false_gives_the_detailed_form() -> None:
    with set_printoptions(compact=False):
        assert "Tensor(shape=torch.Size([2])" in repr(TensorDict(a=torch.zeros(2)))
