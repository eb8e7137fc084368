"""``td.pack`` / ``PackLayout.unpack``: all leaves in one tensor of features, and back."""

from __future__ import annotations

import pytest
import torch

from tensordict import NonTensorData, PackLayout, TensorDict, tensorclass


@tensorclass
class Pose:
    pos: torch.Tensor


def sample() -> TensorDict:
    return TensorDict(
        {"v": torch.randn(4, 3), "p": torch.randn(4), "n": {"s": torch.randn(4, 2, 2)}}, [4]
    )


def test_columns_follow_the_sorted_keys() -> None:
    td = sample()
    flat, layout = td.pack()
    assert layout.keys == (("n", "s"), "p", "v")
    assert layout.offsets == (0, 4, 5) and layout.numel == 8
    assert torch.equal(flat[:, 4], td["p"])
    assert torch.equal(flat[:, 5:], td["v"])


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_unpack_inverts_pack_along_any_dim(dim: int) -> None:
    td = sample()
    flat, layout = td.pack(dim)
    assert flat.is_contiguous()
    assert (layout.unpack(flat) == td).all()


def test_unpacked_leaves_are_views_of_the_packed_tensor() -> None:
    flat, layout = sample().pack()
    out = layout.unpack(flat)
    out["p"].fill_(7.0)
    assert (flat[:, 4] == 7.0).all()


def test_unpack_takes_other_batch_dims() -> None:
    flat, layout = sample().pack()
    assert layout.unpack(flat[[0, 2]]).batch_size == (2,)


def test_packing_into_a_layout_uses_its_order_and_refuses_other_keys() -> None:
    td = sample()
    layout = PackLayout(
        keys=("v", "p", ("n", "s")), shapes=((3,), (), (2, 2)), nested=(("n", (), None),)
    )
    flat, out = td.pack(layout=layout)
    assert out == layout and torch.equal(flat[:, :3], td["v"])
    with pytest.raises(KeyError, match="differ"):
        td.exclude("p").pack(layout=layout)


def test_layouts_compare_by_value_and_hash() -> None:
    _, a = sample().pack()
    _, b = sample().pack()
    assert a == b and hash(a) == hash(b)


def test_a_tensorclass_comes_back_as_its_class() -> None:
    pose = Pose(pos=torch.ones(3, 2), batch_size=[3])
    flat, layout = pose.pack()
    assert layout.cls is Pose
    out = layout.unpack(flat)
    assert isinstance(out, Pose) and torch.equal(out.pos, pose.pos)


def test_mixed_dtypes_and_non_tensor_data_are_refused() -> None:
    with pytest.raises(TypeError, match="dtypes"):
        TensorDict({"a": torch.zeros(2), "b": torch.zeros(2, dtype=torch.int64)}, [2]).pack()
    with pytest.raises(TypeError, match="filter_non_tensor_data"):
        TensorDict({"a": torch.zeros(2), "s": NonTensorData("x", batch_size=[2])}, [2]).pack()


def test_unpack_refuses_a_tensor_of_another_width() -> None:
    flat, layout = sample().pack()
    with pytest.raises(ValueError, match="entries along dim"):
        layout.unpack(flat[:, :3])


def test_a_nested_tensorclass_comes_back_as_its_class() -> None:
    td = TensorDict({"pose": Pose(pos=torch.ones(3, 2), batch_size=[3]), "w": torch.zeros(3)}, [3])
    flat, layout = td.pack()
    assert layout.nested == (("pose", torch.Size([]), Pose),)
    out = layout.unpack(flat)
    assert isinstance(out["pose"], Pose) and torch.equal(out["pose"].pos, torch.ones(3, 2))
