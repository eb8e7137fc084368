"""repr in upstream tensordict's layout."""

from __future__ import annotations

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    set_printoptions,
)


@pytest.fixture(autouse=True)
def _detailed_repr():
    """These tests pin the detailed form (the compact one is tested in test_compact_repr)."""
    with set_printoptions(compact=False):
        yield


def test_repr_of_nested_tensordict_matches_upstream_layout() -> None:
    td = TensorDict(
        {"a": torch.zeros(4, 3, 2, 1, 5), "nested": {"b": torch.zeros(4, 3)}}, batch_size=[4, 3]
    )
    expected = (
        "TensorDict(\n"
        "    fields={\n"
        "        a: Tensor(shape=torch.Size([4, 3, 2, 1, 5]), device=cpu, dtype=torch.float32, "
        "is_shared=False),\n"
        "        nested: TensorDict(\n"
        "            fields={\n"
        "                b: Tensor(shape=torch.Size([4, 3]), device=cpu, dtype=torch.float32, "
        "is_shared=False)},\n"
        "            batch_size=torch.Size([4, 3]),\n"
        "            device=None,\n"
        "            is_shared=False)},\n"
        "    batch_size=torch.Size([4, 3]),\n"
        "    device=None,\n"
        "    is_shared=False)"
    )
    assert repr(td) == expected


def test_repr_of_empty_tensordict() -> None:
    expected = (
        "TensorDict(\n    fields={\n    },\n    batch_size=torch.Size([]),\n    device=None,\n"
        "    is_shared=False)"
    )
    assert repr(TensorDict()) == expected


def test_repr_sorts_whole_field_lines() -> None:
    td = TensorDict({"a": torch.zeros(()), "a0": torch.zeros(())})
    text = repr(td)
    assert text.index("a0:") < text.index("a:")


def test_repr_shows_device_and_dtype() -> None:
    td = TensorDict({"i": torch.zeros(2, dtype=torch.int64)}, [2], device="cpu")
    text = repr(td)
    assert "dtype=torch.int64" in text and "    device=cpu,\n" in text


def test_repr_shows_shared_memory() -> None:
    text = repr(TensorDict({"a": torch.zeros(2)}, [2]).share_memory_())
    assert "is_shared=True)}" in text and text.endswith("is_shared=True)")


def test_repr_of_non_tensor_data() -> None:
    expected = "NonTensorData(data=hello, batch_size=torch.Size([3]), device=None)"
    assert repr(NonTensorData("hello", batch_size=[3])) == expected


def test_repr_of_long_non_tensor_data_is_shortened() -> None:
    text = repr(NonTensorData("x" * 300))
    assert "x" * 20 + "  ...  " + "x" * 20 in text and len(text) < 150


def test_non_tensor_field_prints_on_one_line() -> None:
    td = TensorDict({"s": "hi"}, [2])
    assert "        s: NonTensorData(data=hi, batch_size=torch.Size([2]), device=None)}" in repr(td)


def test_repr_of_non_tensor_stack() -> None:
    expected = "NonTensorStack(\n    ['a', 'b'],\n    batch_size=torch.Size([2]),\n    device=None)"
    assert repr(NonTensorStack.from_list(["a", "b"])) == expected


def test_repr_of_lazy_stack_matches_upstream_layout() -> None:
    a = TensorDict({"a": torch.zeros(4, 3, 1, 5), "c": torch.zeros(4, 3, 1, 5)}, [4, 3, 1])
    b = TensorDict({"a": torch.zeros(4, 3, 1, 5), "b": torch.zeros(4, 3, 1, 10)}, [4, 3, 1])
    ls = LazyStackedTensorDict.lazy_stack([a, b], 2)
    expected = (
        "LazyStackedTensorDict(\n"
        "    fields={\n"
        "        a: Tensor(shape=torch.Size([4, 3, 2, 1, 5]), device=cpu, dtype=torch.float32, "
        "is_shared=False)},\n"
        "    exclusive_fields={\n"
        "        0 ->\n"
        "            c: Tensor(shape=torch.Size([4, 3, 1, 5]), device=cpu, dtype=torch.float32, "
        "is_shared=False),\n"
        "        1 ->\n"
        "            b: Tensor(shape=torch.Size([4, 3, 1, 10]), device=cpu, dtype=torch.float32, "
        "is_shared=False)},\n"
        "    batch_size=torch.Size([4, 3, 2, 1]),\n"
        "    device=None,\n"
        "    is_shared=False,\n"
        "    stack_dim=2)"
    )
    assert repr(ls) == expected


def test_repr_of_lazy_stack_marks_differing_dims() -> None:
    a = TensorDict({"y": torch.zeros(3, 4)}, [3])
    b = TensorDict({"y": torch.zeros(3, 5)}, [3])
    text = repr(LazyStackedTensorDict.lazy_stack([a, b]))
    assert "y: Tensor(shape=torch.Size([2, 3, -1])" in text
    assert "    exclusive_fields={\n    },\n" in text


def test_print_options_hide_and_show_details() -> None:
    from tensordict import set_printoptions

    td = TensorDict({"b": torch.ones(4, 2)[::2], "a": torch.zeros(3, requires_grad=True)})
    with set_printoptions(show_device=False, show_is_shared=False, show_dtype=False):
        text = repr(td)
    assert "\n    device=" not in text and "\n    is_shared=" not in text
    assert "dtype=" not in text and "batch_size=" in text
    with set_printoptions(show_grad=True, show_is_view=True, show_storage_size=True):
        text = repr(td)
    assert "requires_grad=True" in text and "is_view=True" in text and "storage_size=32" in text
    with set_printoptions(plain=True):
        assert "mean=1, std=0" in repr(td)
    with set_printoptions(sort_keys="insertion"):
        lines = [line.strip()[0] for line in repr(td).splitlines() if "Tensor(" in line]
    assert lines == ["b", "a"]


def test_print_options_set_for_good_is_undone_by_exit() -> None:
    from tensordict import get_printoptions, set_printoptions

    before = get_printoptions()
    options = set_printoptions(show_is_shared=False)
    options.set()
    try:
        assert "\n    is_shared=" not in repr(TensorDict({"a": torch.zeros(1)}))
    finally:
        options.__exit__(None, None, None)
    assert get_printoptions() == before
