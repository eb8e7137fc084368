"""NestedKey as a type, the unravel helpers, and leaf tests called with the entry's class."""

from __future__ import annotations

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NestedKey,
    NonTensorData,
    TensorDict,
    is_tensor_collection,
    lazy_stack,
    tensorclass,
    unravel_key_to_tuple,
)
from tensordict._C import _unravel_key_to_tuple, unravel_key_list
from tensordict.base import (
    _NESTED_TENSORS_AS_LISTS,
    _default_is_leaf,
    _is_leaf_nontensor,
)
from tensordict.errors import KeyTypeError
from tensordict.utils import _is_non_tensor, _is_tensorclass, is_seq_of_nested_key, unravel_keys


@tensorclass
class Point:
    x: torch.Tensor


@pytest.mark.parametrize(
    ("key", "is_key"),
    [
        ("a", True),
        (("a", "b"), True),
        (("a", ("b",)), True),
        (("a", 1), False),
        ((), False),
        (1, False),
        (["a"], False),
        (None, False),
    ],
)
def test_isinstance_nested_key(key: object, is_key: bool) -> None:
    assert isinstance(key, NestedKey) is is_key


def test_nested_key_is_not_instantiable() -> None:
    with pytest.raises(TypeError, match="annotations"):
        NestedKey("a")


@pytest.mark.parametrize(
    ("key", "expected"),
    [("a", ("a",)), (("a", ("b", "c")), ("a", "b", "c")), (("a", 1), ()), (1, ()), ((), ())],
)
def test_unravel_key_to_tuple_never_raises(key: object, expected: tuple) -> None:
    assert unravel_key_to_tuple(key) == expected
    assert _unravel_key_to_tuple(key) == expected


def test_unravel_key_list_and_keys() -> None:
    assert unravel_key_list(["a", ("b",), ("c", ("d",))]) == ["a", "b", ("c", "d")]
    assert unravel_key_list(("a", "b")) == ["a", "b"]
    with pytest.raises(KeyTypeError, match="list or a tuple"):
        unravel_key_list("a")
    assert unravel_keys("a", ("b", ("c",))) == ("a", ("b", "c"))


def test_is_seq_of_nested_key() -> None:
    assert is_seq_of_nested_key(["a", ("b", "c")])
    assert is_seq_of_nested_key([])
    assert not is_seq_of_nested_key([1])


def make() -> TensorDict:
    return TensorDict(
        a=torch.zeros(2),
        b=TensorDict(c=torch.zeros(2, 3), d="x", batch_size=[2]),
        s="str",
        p=Point(x=torch.zeros(2, 1), batch_size=[2]),
        batch_size=[2],
    )


def test_is_leaf_is_called_with_the_entry_class() -> None:
    seen: list = []
    list(make().keys(True, True, is_leaf=lambda cls: seen.append(cls) or _default_is_leaf(cls)))
    assert seen and all(isinstance(c, type) for c in seen)
    assert torch.Tensor in seen and TensorDict in seen


def test_default_is_leaf_skips_non_tensor_data_when_passed() -> None:
    keys = set(make().keys(True, True, is_leaf=_default_is_leaf))
    assert keys == {"a", ("b", "c"), ("p", "x")}


def test_is_leaf_nontensor_lists_non_tensor_data_as_leaves() -> None:
    keys = set(make().keys(True, True, is_leaf=_is_leaf_nontensor))
    assert keys == {"a", ("b", "c"), ("b", "d"), "s", ("p", "x")}
    assert ("b", "d") in make().keys(True, True, is_leaf=_is_leaf_nontensor)
    # membership asks whether the key exists, whatever is_leaf lists (as upstream)
    assert ("b", "d") not in list(make().keys(True, True, is_leaf=_default_is_leaf))
    assert ("b", "d") in make().keys(True, True, is_leaf=_default_is_leaf)


def test_leaf_tests_on_classes() -> None:
    assert _default_is_leaf(torch.Tensor) and not _default_is_leaf(TensorDict)
    assert not _default_is_leaf(NonTensorData) and not _default_is_leaf(Point)
    assert _is_leaf_nontensor(NonTensorData) and not _is_leaf_nontensor(TensorDict)
    assert not _is_leaf_nontensor(int)


def test_nested_tensors_as_lists_walks_lazy_stack_members() -> None:
    td = lazy_stack(
        [
            TensorDict(a=torch.zeros(2), b=TensorDict(c=torch.ones(3))),
            TensorDict(a=torch.zeros(3), b=TensorDict(c=torch.ones(3))),
        ]
    )
    assert isinstance(td, LazyStackedTensorDict)
    assert list(td.keys(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS)) == ["a", ("b", "c")]
    items = [(k, v.shape) for k, v in td.items(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS)]
    assert items == [
        (("0", "a"), torch.Size([2])),
        (("0", "b", "c"), torch.Size([3])),
        (("1", "a"), torch.Size([3])),
        (("1", "b", "c"), torch.Size([3])),
    ]
    assert not _NESTED_TENSORS_AS_LISTS  # falsy, as upstream: `is_leaf or default` keeps it


def test_nested_tensors_as_lists_on_dense_tensordict_is_the_default_leaf_test() -> None:
    td = make()
    assert list(td.keys(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS)) == list(
        td.keys(True, True, is_leaf=_default_is_leaf)
    )


def test_is_tensor_collection_answers_for_classes_and_instances() -> None:
    assert is_tensor_collection(TensorDict) and is_tensor_collection(TensorDict())
    assert is_tensor_collection(Point) and is_tensor_collection(NonTensorData)
    assert not is_tensor_collection(torch.Tensor) and not is_tensor_collection(3)


def test_class_level_type_tests() -> None:
    assert _is_non_tensor(NonTensorData) and not _is_non_tensor(TensorDict)
    assert _is_tensorclass(Point) and not _is_tensorclass(TensorDict)
