"""Hypothesis property tests: TensorDict operations equal the same torch operation on each leaf.

Every tensordict drawn here has two or three leaves with random feature shapes, one of them in a
nested tensordict, and a nested tensordict with an extra batch dimension. Feature dimensions must
never be touched by batch operations, so each leaf is compared with the torch operation written
out explicitly over its batch dimensions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import TensorDict

SETTINGS = settings(max_examples=50, deadline=None)

batch_shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
feature_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


@st.composite
def tensordicts(draw: st.DrawFn, batch_shape: tuple[int, ...] | None = None) -> TensorDict:
    bs = draw(batch_shapes) if batch_shape is None else batch_shape
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)

    def leaf(feature: tuple[int, ...]) -> torch.Tensor:
        # values in [1, 2): safe for division and pow
        return torch.rand((*bs, *feature), generator=gen) + 1

    extra = draw(st.integers(1, 3))
    return TensorDict(
        {
            "a": leaf(draw(feature_shapes)),
            "b": {"c": leaf(draw(feature_shapes))},
            "n": TensorDict({"x": leaf((extra, *draw(feature_shapes)))}, [*bs, extra]),
        },
        batch_size=bs,
    )


def leaves(td: TensorDict) -> dict[Any, torch.Tensor]:
    return dict(td.items(include_nested=True, leaves_only=True))


def feature_dims(td: TensorDict, key: Any) -> int:
    return td[key].ndim - td.batch_dims


# ---------------------------------------------------------------------- indices
@st.composite
def batch_indices(draw: st.DrawFn, batch_shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A tuple index over the batch dims: ints, slices, at most one tensor/mask, Nones, ``...``.

    Items index the first ``k`` batch dims; with ``...``, more items may index the last ``m``.
    """
    bd = len(batch_shape)
    state = {"advanced": False}

    def item(size: int) -> list[Any]:
        choices = ["int", "slice"] + ([] if state["advanced"] else ["long", "mask"])
        kind = draw(st.sampled_from(choices))
        out: list[Any]
        if kind == "int":
            out = [draw(st.integers(-size, size - 1))]
        elif kind == "slice":
            start = draw(st.none() | st.integers(-size, size))
            stop = draw(st.none() | st.integers(-size, size))
            out = [slice(start, stop, draw(st.none() | st.integers(1, 3)))]
        elif kind == "long":
            values = draw(st.lists(st.integers(-size, size - 1), min_size=0, max_size=4))
            out = [torch.tensor(values, dtype=torch.long)]
            state["advanced"] = True
        else:
            bits = draw(st.lists(st.booleans(), min_size=size, max_size=size))
            out = [torch.tensor(bits, dtype=torch.bool)]
            state["advanced"] = True
        return out + ([None] if draw(st.integers(0, 5)) == 0 else [])

    k = draw(st.integers(0, bd))
    leading = [i for size in batch_shape[:k] for i in item(size)]
    if not draw(st.booleans()):
        return tuple(leading)
    m = draw(st.integers(0, bd - k))
    trailing = [i for size in batch_shape[bd - m :] for i in item(size)]
    return (*leading, Ellipsis, *trailing)


def expand_for_leaf(index: tuple[Any, ...], batch_dims: int, n_features: int) -> tuple[Any, ...]:
    """The index a leaf receives: ``...`` spans the batch dims only; feature dims untouched."""
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    out: list[Any] = []
    for item in index:
        if item is Ellipsis:
            out.extend([slice(None)] * (batch_dims - used))
        else:
            out.append(item)
    if Ellipsis not in index:
        out.extend([slice(None)] * (batch_dims - used))
    return tuple(out) + (slice(None),) * n_features


@st.composite
def td_and_index(draw: st.DrawFn) -> tuple[TensorDict, tuple[Any, ...]]:
    td = draw(tensordicts())
    return td, draw(batch_indices(tuple(td.batch_size)))


@SETTINGS
@given(td_and_index())
def test_indexing_equals_indexing_each_leaf(case: tuple[TensorDict, tuple[Any, ...]]) -> None:
    td, index = case
    out = td[index]
    for key, value in leaves(td).items():
        n_feat = value.ndim - td.batch_dims
        expected = value[expand_for_leaf(index, td.batch_dims, n_feat)]
        assert torch.equal(out[key], expected), (key, index)
    a = td["a"]
    expected_bs = a[expand_for_leaf(index, td.batch_dims, a.ndim - td.batch_dims)].shape
    assert out.batch_size == expected_bs[: len(expected_bs) - (a.ndim - td.batch_dims)]
    assert out["n"].batch_size == out.batch_size + td["n"].batch_size[-1:]


@SETTINGS
@given(td_and_index(), st.floats(-5, 5, allow_nan=False))
def test_setitem_equals_setitem_on_each_leaf(
    case: tuple[TensorDict, tuple[Any, ...]], fill: float
) -> None:
    td, index = case
    expected = {k: v.clone() for k, v in leaves(td).items()}
    for value in expected.values():
        value[expand_for_leaf(index, td.batch_dims, value.ndim - td.batch_dims)] = fill
    td[index] = fill
    for key, value in leaves(td).items():
        assert torch.equal(value, expected[key]), (key, index)


@SETTINGS
@given(td_and_index())
def test_setitem_with_indexed_tensordict_writes_values_back(
    case: tuple[TensorDict, tuple[Any, ...]],
) -> None:
    td, index = case
    source = td.clone()
    value = (td[index] * 0 - 1).clone()
    td[index] = value
    for key, leaf in leaves(td).items():
        expected = source[key].clone()
        expected[expand_for_leaf(index, td.batch_dims, leaf.ndim - td.batch_dims)] = -1
        assert torch.equal(leaf, expected), (key, index)


# ---------------------------------------------------------------------- shape operations
ShapeCase = tuple[str, Callable[[TensorDict], TensorDict], Callable[[torch.Tensor, int], Any]]


@st.composite
def shape_ops(draw: st.DrawFn, bs: tuple[int, ...]) -> ShapeCase:
    """(name, td -> td, (leaf, n_batch_dims) -> leaf) for a random shape operation."""
    bd = len(bs)
    kind = draw(
        st.sampled_from(
            ["permute", "transpose", "unsqueeze", "squeeze", "flatten", "unflatten", "reshape"]
            + ["view", "expand"]
        )
    )
    if kind == "permute":
        perm = draw(st.permutations(range(bd)))
        neg = [p - bd if draw(st.booleans()) else p for p in perm]
        return (
            kind,
            lambda td: td.permute(*neg),
            lambda t, b: t.permute(*perm, *range(b, t.ndim)),
        )
    if kind == "transpose":
        d0, d1 = draw(st.integers(-bd, bd - 1)), draw(st.integers(-bd, bd - 1))
        return kind, lambda td: td.transpose(d0, d1), lambda t, b: t.transpose(d0 % bd, d1 % bd)
    if kind == "unsqueeze":
        d = draw(st.integers(-bd - 1, bd))
        return kind, lambda td: td.unsqueeze(d), lambda t, b: t.unsqueeze(d % (bd + 1))
    if kind == "squeeze":
        d = draw(st.integers(-bd, bd - 1))
        return (
            kind,
            lambda td: td.squeeze(d),
            lambda t, b: t.squeeze(d % bd) if bs[d % bd] == 1 else t,
        )
    if kind == "flatten":
        s = draw(st.integers(0, bd - 1))
        e = draw(st.integers(s, bd - 1))
        return kind, lambda td: td.flatten(s, e - bd), lambda t, b: t.flatten(s, e)
    if kind == "unflatten":
        d = draw(st.integers(-bd, bd - 1))
        size = bs[d]
        sizes = draw(st.sampled_from([(size, 1), (1, size), (1, size, 1), (-1, 1)]))
        return (
            kind,
            lambda td: td.unflatten(d, sizes),
            lambda t, b: t.unflatten(d % bd, sizes),
        )
    if kind in ("reshape", "view"):
        return (
            kind,
            lambda td: getattr(td, kind)(-1),
            lambda t, b: t.reshape(-1, *t.shape[b:]),
        )
    k = draw(st.integers(1, 3))
    return kind, lambda td: td.expand(k, *bs), lambda t, b: t.expand(k, *t.shape)


@st.composite
def td_and_shape_op(draw: st.DrawFn) -> tuple[TensorDict, ShapeCase]:
    td = draw(tensordicts())
    return td, draw(shape_ops(tuple(td.batch_size)))


@SETTINGS
@given(td_and_shape_op())
def test_shape_op_equals_shape_op_on_each_leaf(case: tuple[TensorDict, ShapeCase]) -> None:
    td, (name, td_fn, leaf_fn) = case
    out = td_fn(td)
    for key, value in leaves(td).items():
        expected = leaf_fn(value, td.batch_dims)
        assert torch.equal(out[key], expected), (name, key)
    expected_a = leaf_fn(td["a"], td.batch_dims)
    n_feat = td["a"].ndim - td.batch_dims
    assert out.batch_size == expected_a.shape[: expected_a.ndim - n_feat]
    assert out["n"].batch_size == out.batch_size + td["n"].batch_size[-1:]


@SETTINGS
@given(tensordicts(), st.data())
def test_split_then_cat_gives_back_the_tensordict(td: TensorDict, data: st.DataObject) -> None:
    dim = data.draw(st.integers(-td.batch_dims, td.batch_dims - 1))
    size = data.draw(st.integers(1, 4))
    parts = td.split(size, dim)
    assert all(p.batch_size[dim] <= size for p in parts)
    assert (torch.cat(parts, dim) == td).all()


@SETTINGS
@given(tensordicts(), st.data())
def test_unbind_then_stack_gives_back_the_tensordict(td: TensorDict, data: st.DataObject) -> None:
    dim = data.draw(st.integers(-td.batch_dims, td.batch_dims - 1))
    rows = td.unbind(dim)
    assert len(rows) == td.batch_size[dim]
    assert (torch.stack(rows, dim) == td).all()


@SETTINGS
@given(tensordicts(), st.data())
def test_chunk_equals_chunk_on_each_leaf(td: TensorDict, data: st.DataObject) -> None:
    dim = data.draw(st.integers(0, td.batch_dims - 1))
    n = data.draw(st.integers(1, 4))
    parts = td.chunk(n, dim)
    for key, value in leaves(td).items():
        expected = value.chunk(n, dim)
        assert len(parts) == len(expected)
        assert all(torch.equal(p[key], e) for p, e in zip(parts, expected))


# ---------------------------------------------------------------------- stack / cat
@st.composite
def same_structure(draw: st.DrawFn) -> list[TensorDict]:
    first = draw(tensordicts())
    count = draw(st.integers(1, 3))
    others = [first.apply(lambda t, i=i: t + i) for i in range(1, count)]
    return [first, *others]


@SETTINGS
@given(same_structure(), st.data())
def test_stack_equals_stack_of_each_leaf(tds: list[TensorDict], data: st.DataObject) -> None:
    bd = tds[0].batch_dims
    dim = data.draw(st.integers(-bd - 1, bd))
    out = torch.stack(tds, dim)
    assert type(out) is TensorDict
    for key in leaves(tds[0]):
        expected = torch.stack([td[key] for td in tds], dim % (bd + 1))
        assert torch.equal(out[key], expected), key
    assert out["n"].batch_size == out.batch_size + tds[0]["n"].batch_size[-1:]


@st.composite
def catable(draw: st.DrawFn) -> tuple[list[TensorDict], int]:
    bs = list(draw(batch_shapes))
    dim = draw(st.integers(-len(bs), len(bs) - 1))
    lengths = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    tds = []
    features = draw(st.tuples(feature_shapes, feature_shapes))
    for i, n in enumerate(lengths):
        shape = list(bs)
        shape[dim] = n
        gen = torch.Generator().manual_seed(i)
        tds.append(
            TensorDict(
                {
                    "a": torch.rand((*shape, *features[0]), generator=gen),
                    "b": {"c": torch.rand((*shape, *features[1]), generator=gen)},
                },
                shape,
            )
        )
    return tds, dim


@SETTINGS
@given(catable())
def test_cat_equals_cat_of_each_leaf(case: tuple[list[TensorDict], int]) -> None:
    tds, dim = case
    bd = tds[0].batch_dims
    out = torch.cat(tds, dim)
    for key in leaves(tds[0]):
        expected = torch.cat([td[key] for td in tds], dim % bd)
        assert torch.equal(out[key], expected), key
    assert out.batch_size[dim] == sum(td.batch_size[dim] for td in tds)


# ---------------------------------------------------------------------- arithmetic
BINARY: list[Callable[[Any, Any], Any]] = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.pow,
]
COMPARE: list[Callable[[Any, Any], Any]] = [
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
]


@SETTINGS
@given(
    tensordicts(),
    st.sampled_from(BINARY + COMPARE),
    st.sampled_from(["scalar", "tensor", "td", "rscalar"]),
    st.floats(1, 2),
)
def test_binary_op_equals_op_on_each_leaf(
    td: TensorDict, op: Callable[[Any, Any], Any], kind: str, scalar: float
) -> None:
    other_td = td.apply(lambda t: t.flip(0))
    if kind == "scalar":
        out = op(td, scalar)
    elif kind == "rscalar":
        out = op(scalar, td)
    elif kind == "tensor":
        out = op(td, torch.tensor(scalar))
    else:
        out = op(td, other_td)
    for key, value in leaves(td).items():
        if kind == "scalar":
            expected = op(value, scalar)
        elif kind == "rscalar":
            expected = op(scalar, value)
        elif kind == "tensor":
            expected = op(value, torch.tensor(scalar))
        else:
            expected = op(value, other_td[key])
        assert torch.equal(out[key], expected), (op, kind, key)
    assert out.batch_size == td.batch_size


@SETTINGS
@given(tensordicts(), st.sampled_from(BINARY), st.floats(1, 2))
def test_inplace_op_equals_inplace_op_on_each_leaf(
    td: TensorDict, op: Callable[[Any, Any], Any], scalar: float
) -> None:
    expected = {k: op(v, scalar) for k, v in leaves(td).items()}
    ids = {k: id(v) for k, v in leaves(td).items()}
    inplace = {
        operator.add: operator.iadd,
        operator.sub: operator.isub,
        operator.mul: operator.imul,
        operator.truediv: operator.itruediv,
        operator.pow: operator.ipow,
    }[op]
    out = inplace(td, scalar)
    assert out is td
    for key, value in leaves(td).items():
        assert id(value) == ids[key] and torch.allclose(value, expected[key]), key


@SETTINGS
@given(tensordicts(), st.sampled_from(["sum", "mean", "amax", "amin"]), st.data())
def test_reduction_equals_reduction_on_each_leaf(
    td: TensorDict, name: str, data: st.DataObject
) -> None:
    dim = data.draw(st.integers(-td.batch_dims, td.batch_dims - 1))
    keepdim = data.draw(st.booleans())
    method = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min"}[name]
    kwargs = {"return_indices": False} if method in ("max", "min") else {}
    out = getattr(td, method)(dim=dim, keepdim=keepdim, **kwargs)
    for key, value in leaves(td).items():
        expected = getattr(torch, name)(value, dim=dim % td.batch_dims, keepdim=keepdim)
        assert torch.allclose(out[key], expected), key
    d, bs = dim % td.batch_dims, list(td.batch_size)
    reduced = bs[:d] + ([1] if keepdim else []) + bs[d + 1 :]
    assert list(out["n"].batch_size) == reduced + [td["n"].batch_size[-1]]  # its own dims stay


@SETTINGS
@given(tensordicts())
def test_apply_equals_fn_on_each_leaf(td: TensorDict) -> None:
    out = td.apply(lambda t: t * 2 - 1)
    for key, value in leaves(td).items():
        assert torch.equal(out[key], value * 2 - 1)
    assert list(out.keys(True)) == list(td.keys(True))
