"""from_any on lists, from_dict_instance, from_pytree with non-string dict keys, ragged nested
lists as non-tensor stacks, and batch slicing of jagged (nested) tensors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tensordict import NonTensorStack, TensorDict, tensorclass
from tensordict.errors import BatchSizeError


def test_from_any_list_is_a_tensor_when_torch_can_make_one() -> None:
    rows = torch.arange(24.0).view(2, 3, 4).tolist()
    assert torch.equal(TensorDict.from_any(rows), torch.arange(24.0).view(2, 3, 4))
    rows[1][2].extend([0.0, 1.0])  # ragged at the last level
    stack = TensorDict.from_any(rows)
    assert isinstance(stack, NonTensorStack) and stack.batch_size == (2, 3)
    assert stack[1, 2].data == [20.0, 21.0, 22.0, 23.0, 0.0, 1.0]
    assert isinstance(TensorDict.from_any(["a", "b"]), NonTensorStack)


def test_ragged_nested_lists_keep_every_item() -> None:
    stack = NonTensorStack.from_list([[1, 2], [3]])
    assert stack.batch_size == (2,) and stack.tolist() == [[1, 2], [3]]
    assert NonTensorStack.from_list([["a", "b"], ["c", "d"]]).batch_size == (2, 2)


@tensorclass(autocast=True)
class Node:
    x: torch.Tensor = None  # type: ignore[assignment]
    y: int = None  # type: ignore[assignment]
    child: Node = None  # type: ignore[assignment]


def test_from_dict_instance_rebuilds_the_tensorclasses_it_holds() -> None:
    td = TensorDict(a=torch.zeros(()), node=Node(x=torch.ones(()), y=1, child=Node(y=2)))
    back = td.from_dict_instance(td.to_dict(), auto_batch_size=True)
    assert isinstance(back["node"], Node) and isinstance(back["node"].child, Node)
    assert back["node"].y == 1 and isinstance(back["node"].child.y, int)
    assert isinstance(back["a"], torch.Tensor) and back["node"].x.item() == 1.0
    nested = TensorDict(n=TensorDict(b=torch.zeros(3, 2)), batch_size=[])
    out = nested.from_dict_instance({"n": {"b": torch.ones(3, 2)}, "c": torch.ones(3)})
    assert out.batch_size == () and torch.equal(out["n", "b"], torch.ones(3, 2))


class Opaque:
    pass


def test_from_pytree_keeps_non_string_dict_keys() -> None:
    key = Opaque()
    tree = {"s": torch.zeros(2), key: torch.ones(2), 5: [torch.ones(1)]}
    back = TensorDict.from_pytree(tree).to_pytree()
    assert set(back) == {"s", key, 5}
    assert torch.equal(back[key], torch.ones(2)) and torch.equal(back[5][0], torch.ones(1))


def _jagged() -> TensorDict:
    rows = [torch.arange(3), torch.arange(4), torch.arange(1)]
    nested = torch.nested.as_nested_tensor(rows, layout=torch.jagged)
    return TensorDict({"x": nested, "y": torch.arange(3)}, batch_size=[3])


def test_jagged_entries_split_chunk_and_slice_along_the_batch() -> None:
    td = _jagged()
    first, second = td.chunk(2)
    assert [r.shape[0] for r in first["x"].unbind()] == [3, 4]
    assert second["y"].tolist() == [2] and second["x"].unbind()[0].shape == (1,)
    assert [p.batch_size[0] for p in td.split([1, 2])] == [1, 2]
    picked = td[torch.tensor([True, False, True])]
    assert [r.shape[0] for r in picked["x"].unbind()] == [3, 1]
    assert [r.shape[0] for r in td[[2, 0]]["x"].unbind()] == [1, 3]


def test_a_ragged_batch_dim_of_nested_tensors_pads_to_its_longest_component() -> None:
    nested = torch.nested.nested_tensor([torch.ones(2, 3, 4), torch.ones(2, 5, 4)])
    td = TensorDict({"n": nested}, batch_size=[2, 2, -1])
    assert td.batch_size == (2, 2, -1)
    out = td.to_padded_tensor(padding=0.0, mask_key="mask")
    assert out.batch_size == (2, 2, 5) and out["n"].shape == (2, 2, 5, 4)
    assert out["mask"].sum().item() == 2 * 3 + 2 * 5
    assert (out["n"][out["mask"]] == 1).all() and (out["n"][~out["mask"]] == 0).all()
    with pytest.raises(BatchSizeError, match="does not start with the batch size"):
        TensorDict({"n": nested, "plain": torch.zeros(2, 2, 3)}, batch_size=[2, 2, -1])
    with pytest.raises(BatchSizeError, match="non-negative ints"):
        TensorDict(batch_size=[2, -2])


def test_from_any_reads_an_h5py_file_nested_in_a_container(tmp_path: Any) -> None:
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["a"] = np.arange(3)
        f.create_group("g")["b"] = np.ones((3, 2))
    with h5py.File(tmp_path / "f.h5", "r") as f:
        td = TensorDict.from_any({"x": torch.zeros(3), "h": f})
        assert set(td.keys(True, True)) == {"x", ("h", "a"), ("h", "g", "b")}
        assert torch.equal(torch.as_tensor(td["h", "a"][:]), torch.arange(3))
