"""Tensorclasses compile whole: built inside the compiled function (with defaults,
``__post_init__`` and non-tensor fields), and their forwarded methods."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from tensordict import TensorClass, assert_close, tensorclass
from tests.compile.helpers import compiled


class Labelled(TensorClass):
    x: torch.Tensor
    label: str


@tensorclass
class Doubled:
    x: torch.Tensor

    def __post_init__(self) -> None:
        self.x = self.x * 2


@tensorclass
class WithDefaults:
    x: torch.Tensor
    cache: torch.Tensor = dataclasses.field(default_factory=lambda: torch.zeros(3))
    y: Any = None


@tensorclass
class Tree:
    a: Any = None
    b: Any = None


def test_an_instance_built_inside_a_compiled_function_keeps_its_non_tensor_field() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, str]:
        tc = Labelled(x=x, label="hi", batch_size=[3], device="cpu")
        return tc.x + 1, tc.label

    x, label = compiled(fn)(torch.zeros(3))
    assert label == "hi" and torch.equal(x, torch.ones(3))


def test_post_init_and_defaults_run_in_a_compiled_constructor() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Any]:
        made = WithDefaults(x=x)
        return Doubled(x=x).x, made.cache, made.y

    doubled, cache, y = compiled(fn)(torch.ones(3))
    assert torch.equal(doubled, torch.full((3,), 2.0))
    assert torch.equal(cache, torch.zeros(3)) and y is None


def test_forwarded_arithmetic_and_apply_wrap_their_results() -> None:
    def fn(tc: Tree) -> Tree:
        return (tc + tc).apply(lambda t: t - 1)

    data = Tree(a=Tree(b=torch.ones(4), batch_size=[4]), batch_size=[4])
    out = compiled(fn)(data)
    assert isinstance(out, Tree) and isinstance(out.a, Tree)
    assert_close(out, fn(data))


def test_indexing_with_a_tensor_keeps_the_class() -> None:
    def fn(tc: Tree) -> Tree:
        return tc[torch.tensor([0, 2])]

    data = Tree(a=Tree(b=torch.arange(3), batch_size=[3]), batch_size=[3])
    out = compiled(fn)(data)
    assert isinstance(out.a, Tree) and torch.equal(out.a.b, torch.tensor([0, 2]))
