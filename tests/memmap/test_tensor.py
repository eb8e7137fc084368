"""MemoryMappedTensor: constructors, file contents, views vs copies, errors."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from tensordict import MemoryMappedTensor
from tensordict.errors import IncompleteMemmapError, MemmapFormatError

from .helpers import DTYPES, raw_bytes, sample


# ====================================================================== constructors
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_from_tensor_file_holds_the_raw_c_contiguous_bytes(tmp_path: Path, dtype: torch.dtype):
    src = sample(dtype)
    path = tmp_path / "x.memmap"
    mm = MemoryMappedTensor.from_tensor(src, filename=path)
    assert path.read_bytes() == raw_bytes(src)
    assert mm.dtype == dtype and mm.shape == src.shape
    assert torch.equal(mm.as_subclass(torch.Tensor), src)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_from_filename_reads_back_every_dtype(tmp_path: Path, dtype: torch.dtype) -> None:
    src = sample(dtype)
    path = tmp_path / "x.memmap"
    path.write_bytes(raw_bytes(src))
    mm = MemoryMappedTensor.from_filename(path, dtype, src.shape)
    assert isinstance(mm, MemoryMappedTensor)
    assert torch.equal(mm.as_subclass(torch.Tensor), src)


def test_from_tensor_of_a_non_contiguous_tensor_writes_it_in_c_order(tmp_path: Path) -> None:
    src = torch.arange(12, dtype=torch.int32).reshape(3, 4).t()
    mm = MemoryMappedTensor.from_tensor(src, filename=tmp_path / "x.memmap")
    assert (tmp_path / "x.memmap").read_bytes() == src.contiguous().numpy().tobytes()
    assert torch.equal(mm, src)


def test_from_tensor_filename_is_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    mm = MemoryMappedTensor.from_tensor(torch.ones(2), filename="rel.memmap")
    assert mm.filename == str(tmp_path / "rel.memmap")


def test_from_tensor_refuses_an_existing_file_unless_existsok(tmp_path: Path) -> None:
    path = tmp_path / "x.memmap"
    path.write_bytes(b"\0" * 8)
    with pytest.raises(FileExistsError, match="existsok"):
        MemoryMappedTensor.from_tensor(torch.ones(2), filename=path)
    mm = MemoryMappedTensor.from_tensor(torch.ones(2), filename=path, existsok=True)
    assert mm.tolist() == [1.0, 1.0]


def test_from_tensor_copy_data_false_gives_zeros_of_the_same_shape(tmp_path: Path) -> None:
    mm = MemoryMappedTensor.from_tensor(
        torch.full((2, 3), 5.0), filename=tmp_path / "x.memmap", copy_data=False
    )
    assert mm.shape == (2, 3) and not mm.any()


def test_from_tensor_without_filename_is_anonymous_shared_memory() -> None:
    mm = MemoryMappedTensor.from_tensor(torch.arange(4))
    assert mm.filename is None and mm.is_shared()
    assert mm.tolist() == [0, 1, 2, 3]


def test_from_tensor_copies_instead_of_aliasing_the_source(tmp_path: Path) -> None:
    src = torch.zeros(3)
    mm = MemoryMappedTensor.from_tensor(src, filename=tmp_path / "x.memmap")
    mm.fill_(2)
    assert src.tolist() == [0.0, 0.0, 0.0]


def test_from_tensor_of_its_own_whole_file_returns_it(tmp_path: Path) -> None:
    mm = MemoryMappedTensor.from_tensor(torch.arange(4.0), filename=tmp_path / "x.memmap")
    assert MemoryMappedTensor.from_tensor(mm, filename=mm.filename, existsok=True) is mm


def test_from_tensor_of_a_view_of_its_own_file_rewrites_the_file(tmp_path: Path) -> None:
    mm = MemoryMappedTensor.from_tensor(torch.arange(6.0), filename=tmp_path / "x.memmap")
    out = MemoryMappedTensor.from_tensor(mm[2:4], filename=mm.filename, existsok=True)
    assert out.tolist() == [2.0, 3.0]
    assert os.path.getsize(mm.filename) == 2 * 4
    assert MemoryMappedTensor.from_filename(mm.filename, torch.float32, [2]).tolist() == [2, 3]


def test_writes_reach_the_file(tmp_path: Path) -> None:
    mm = MemoryMappedTensor.zeros(4, dtype=torch.int64, filename=tmp_path / "x.memmap")
    mm[1:3] = 9
    assert np.fromfile(tmp_path / "x.memmap", dtype=np.int64).tolist() == [0, 9, 9, 0]


@pytest.mark.parametrize("shape_args", [((2, 3),), (2, 3), ([2, 3],), (torch.Size([2, 3]),)])
def test_empty_accepts_shape_as_varargs_or_sequence(tmp_path: Path, shape_args) -> None:
    mm = MemoryMappedTensor.empty(*shape_args, dtype=torch.int16, filename=tmp_path / "x.memmap")
    assert mm.shape == (2, 3) and mm.dtype == torch.int16
    assert os.path.getsize(tmp_path / "x.memmap") == 12


@pytest.mark.parametrize("filename", [True, False], ids=["file", "anonymous"])
def test_zeros_ones_full_fill_their_value(tmp_path: Path, filename: bool) -> None:
    def name(n: str):
        return tmp_path / n if filename else None

    z = MemoryMappedTensor.zeros(2, 2, dtype=torch.int32, filename=name("z"))
    o = MemoryMappedTensor.ones((2, 2), dtype=torch.float64, filename=name("o"))
    f = MemoryMappedTensor.full([2, 2], fill_value=3, dtype=torch.int8, filename=name("f"))
    assert z.dtype == torch.int32 and (z == 0).all()
    assert o.dtype == torch.float64 and (o == 1).all()
    assert f.dtype == torch.int8 and (f == 3).all()
    for t in (z, o, f):
        assert isinstance(t, MemoryMappedTensor)
        assert (t.filename is not None) == filename


def test_default_dtype_is_torch_default(tmp_path: Path) -> None:
    assert MemoryMappedTensor.zeros(2, filename=tmp_path / "x").dtype == torch.get_default_dtype()


def test_like_constructors_copy_shape_and_dtype_not_values(tmp_path: Path) -> None:
    src = torch.arange(6, dtype=torch.int16).reshape(2, 3)
    e = MemoryMappedTensor.empty_like(src, filename=tmp_path / "e")
    z = MemoryMappedTensor.zeros_like(src, filename=tmp_path / "z")
    o = MemoryMappedTensor.ones_like(src, filename=tmp_path / "o")
    f = MemoryMappedTensor.full_like(src, 4, filename=tmp_path / "f")
    for t in (e, z, o, f):
        assert t.shape == (2, 3) and t.dtype == torch.int16
    assert (z == 0).all() and (o == 1).all() and (f == 4).all()


def test_from_filename_with_index_returns_that_view(tmp_path: Path) -> None:
    mm = MemoryMappedTensor.from_tensor(torch.arange(12.0).reshape(4, 3), filename=tmp_path / "x")
    row = MemoryMappedTensor.from_filename(mm.filename, torch.float32, [4, 3], index=2)
    assert isinstance(row, MemoryMappedTensor) and row.tolist() == [6.0, 7.0, 8.0]


def test_from_filename_of_a_missing_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "missing.memmap"
    with pytest.raises(IncompleteMemmapError, match=r"missing\.memmap"):
        MemoryMappedTensor.from_filename(path, torch.float32, [3])


def test_from_filename_of_a_too_small_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "short.memmap"
    path.write_bytes(b"\0" * 8)
    with pytest.raises(MemmapFormatError, match=r"short\.memmap"):
        MemoryMappedTensor.from_filename(path, torch.float32, [3])


# ====================================================================== views and copies
@pytest.fixture
def mm(tmp_path: Path) -> MemoryMappedTensor:
    return MemoryMappedTensor.from_tensor(
        torch.arange(24.0).reshape(4, 6), filename=tmp_path / "x.memmap"
    )


VIEWS = {
    "int": lambda t: t[1],
    "slice": lambda t: t[1:3],
    "step_slice": lambda t: t[::2],
    "tuple_index": lambda t: t[1:3, 2:4],
    "ellipsis": lambda t: t[..., 0],
    "none": lambda t: t[None],
    "view_of_view": lambda t: t[1:][::2][0],
    "unbind": lambda t: t.unbind(0)[2],
    "unbind_dim1": lambda t: t.unbind(1)[3],
    "chunk": lambda t: t.chunk(3, 0)[1],
    "split": lambda t: t.split(3, 0)[1],
    "split_sizes": lambda t: t.split([1, 3], 0)[1],
    "split_dim1": lambda t: t.split(2, 1)[2],
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_views_stay_memory_mapped_on_the_same_file(mm: MemoryMappedTensor, name: str) -> None:
    view = VIEWS[name](mm)
    assert isinstance(view, MemoryMappedTensor)
    assert view.filename == mm.filename
    assert view.untyped_storage().data_ptr() == mm.untyped_storage().data_ptr()


@pytest.mark.parametrize("name", list(VIEWS))
def test_writes_through_a_view_reach_the_file(mm: MemoryMappedTensor, name: str) -> None:
    view = VIEWS[name](mm)
    view.fill_(-1)
    on_disk = torch.from_numpy(np.fromfile(mm.filename, dtype=np.float32)).reshape(4, 6)
    expected = torch.arange(24.0).reshape(4, 6)
    VIEWS[name](expected).fill_(-1)
    assert torch.equal(on_disk, expected)


COPIES = {
    "add": lambda t: t + 1,
    "mul": lambda t: t * 2,
    "sum": lambda t: t.sum(0),
    "clone": lambda t: t.clone(),
    "tensor_index": lambda t: t[torch.tensor([0, 2])],
    "list_index": lambda t: t[[0, 2]],
    "mask": lambda t: t[t > 3],
    "to_dtype": lambda t: t.to(torch.float64),
    "neg": lambda t: -t,
    "cat": lambda t: torch.cat([t, t]),
    "stack": lambda t: torch.stack([t, t]),
    "where": lambda t: torch.where(t > 2, t, 0.0),
}


@pytest.mark.parametrize("name", list(COPIES))
def test_other_ops_give_plain_tensors(mm: MemoryMappedTensor, name: str) -> None:
    out = COPIES[name](mm)
    assert type(out) is torch.Tensor
    assert out.untyped_storage().data_ptr() != mm.untyped_storage().data_ptr()


def test_repr_names_the_class(mm: MemoryMappedTensor) -> None:
    assert repr(mm[0, :2]) == "MemoryMappedTensor([0., 1.])"


def test_deepcopy_is_a_private_copy(mm: MemoryMappedTensor) -> None:
    out = copy.deepcopy(mm)
    out.fill_(0)
    assert type(out) is torch.Tensor
    assert mm[0, 1].item() == 1.0


def test_anonymous_tensor_views_stay_memory_mapped() -> None:
    mm = MemoryMappedTensor.zeros(4, 2)
    assert isinstance(mm[1:], MemoryMappedTensor) and mm[1:].filename is None
    assert isinstance(mm.unbind(0)[0], MemoryMappedTensor)


def test_mapping_a_file_twice_shares_memory(tmp_path: Path) -> None:
    a = MemoryMappedTensor.from_tensor(torch.zeros(4), filename=tmp_path / "x.memmap")
    b = MemoryMappedTensor.from_filename(a.filename, torch.float32, [4])
    b[0] = 5
    assert a[0].item() == 5
