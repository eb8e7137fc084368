"""MemoryMappedTensor's upstream-compatible constructor forms, handlers, storages and nesting."""

from __future__ import annotations

import os
import pickle
import warnings

import pytest
import torch

from tensordict import MemoryMappedTensor
from tensordict.errors import (
    AlreadyMemmappedError,
    MemmapDeviceError,
    MemmapExistsError,
    MemmapSymlinkError,
)

SIZES = torch.tensor([[2, 3], [1, 3]])


@pytest.mark.parametrize("make", ["empty", "zeros", "ones", "full"])
@pytest.mark.parametrize("form", ["varargs", "tuple", "keyword"])
def test_shape_forms_agree(make, form, tmp_path):
    kw = {"fill_value": 5} if make == "full" else {}
    args, shape_kw = {"varargs": ((2, 3), {}), "tuple": (((2, 3),), {}), "keyword": ((), {})}[form]
    if form == "keyword":
        shape_kw = {"shape": (2, 3)}
    fn = getattr(MemoryMappedTensor, make)
    t = fn(*args, **shape_kw, **kw, dtype=torch.int16, device="cpu", filename=tmp_path / "f")
    assert t.shape == (2, 3) and t.dtype == torch.int16
    assert t.filename == str(tmp_path / "f")
    expected = {"empty": None, "zeros": 0, "ones": 1, "full": 5}[make]
    if expected is not None:
        assert (t == expected).all()


def test_missing_shape_is_a_type_error():
    with pytest.raises(TypeError, match="needs a shape"):
        MemoryMappedTensor.zeros(dtype=torch.float32)


def test_non_cpu_device_is_refused():
    with pytest.raises(MemmapDeviceError, match="host memory"):
        MemoryMappedTensor.empty(2, device="meta")
    assert issubclass(MemmapDeviceError, RuntimeError)


def test_existing_file_error_is_a_runtime_error(tmp_path):
    MemoryMappedTensor.from_tensor(torch.zeros(2), filename=tmp_path / "x")
    with pytest.raises(RuntimeError, match="already exists") as info:
        MemoryMappedTensor.from_tensor(torch.zeros(2), filename=tmp_path / "x")
    assert isinstance(info.value, MemmapExistsError)


def test_symlinked_file_is_never_written_through(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(MemmapSymlinkError, match="through symlink"):
        MemoryMappedTensor.from_tensor(torch.zeros(2), filename=tmp_path / "link", existsok=True)
    assert target.read_bytes() == b"keep"


def test_from_tensor_returns_a_memmap_that_needs_no_copy(tmp_path):
    anon = MemoryMappedTensor.from_tensor(torch.zeros(3))
    assert MemoryMappedTensor.from_tensor(anon) is anon
    on_disk = MemoryMappedTensor.from_tensor(torch.zeros(3), filename=tmp_path / "a")
    with pytest.raises(AlreadyMemmappedError, match="copy_existing"):
        MemoryMappedTensor.from_tensor(on_disk, filename=tmp_path / "b")
    copy = MemoryMappedTensor.from_tensor(on_disk, filename=tmp_path / "b", copy_existing=True)
    assert copy.filename == str(tmp_path / "b")


def test_views_share_the_handler_and_from_handler_maps_it_again():
    t = MemoryMappedTensor.from_tensor(torch.arange(6.0))
    view = t[1:][:2]
    assert view._handler is t._handler
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        again = MemoryMappedTensor.from_handler(t._handler, torch.float32, (2, 3))
        assert view.parent_shape == torch.Size([6])
    again[1, 0] = -1.0
    assert t[3] == -1.0


def test_from_storage_views_the_same_memory(tmp_path):
    a = MemoryMappedTensor.from_tensor(torch.arange(6.0), filename=tmp_path / "a")
    b = MemoryMappedTensor.from_storage(
        a.untyped_storage(), shape=(3, 2), dtype=a.dtype, filename=tmp_path / "a"
    )
    b[2, 1] = 42.0
    assert a[5] == 42.0 and b.filename == a.filename


@pytest.mark.parametrize("on_disk", [False, True])
def test_nested_shapes_make_nested_tensors(on_disk, tmp_path):
    filename = tmp_path / "n" if on_disk else None
    t = MemoryMappedTensor.ones(SIZES, dtype=torch.int32, filename=filename)
    assert type(t) is MemoryMappedTensor and t.is_nested
    assert (t._nested_tensor_size() == SIZES).all()
    assert t[1].shape == (1, 3) and (t[1] == 1).all()
    if on_disk:
        assert os.path.getsize(filename) == 9 * 4
        back = MemoryMappedTensor.from_filename(filename, dtype=torch.int32, shape=SIZES)
        assert (back[0] == 1).all() and back[0].shape == (2, 3)


def test_nested_from_tensor_and_pickle_round_trip(tmp_path):
    src = torch.nested.nested_tensor([torch.arange(6.0).view(2, 3), torch.arange(3.0).view(1, 3)])
    t = MemoryMappedTensor.from_tensor(src, filename=tmp_path / "n")
    back = pickle.loads(pickle.dumps(t))
    assert back.is_nested and back.filename == t.filename
    for a, b in zip(src.unbind(), back.unbind()):
        assert torch.equal(a, b.as_subclass(torch.Tensor))
