"""consolidate / is_consolidated / from_consolidated and TensorDictFuture."""

import json
import multiprocessing as mp
import pickle
import socket

import pytest
import torch

import tensordict._reductions
from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorDict,
    from_consolidated,
    lazy_stack,
    tensorclass,
)
from tensordict.parallel.channel import OUT_OF_BAND_BYTES, Channel
from tensordict.utils import TensorDictFuture
from tests.core.behaviour.consolidate_workers import describe_consolidated


@tensorclass
class _Point:
    x: torch.Tensor
    label: str


def _td() -> TensorDict:
    return TensorDict(
        a=torch.arange(3),
        b={"c": torch.ones(3, 2, dtype=torch.float16)},
        s="text",
        batch_size=[3],
    )


def test_consolidated_leaves_share_one_storage() -> None:
    tdc = _td().consolidate()
    ptrs = {t.untyped_storage().data_ptr() for t in tdc.values(True, True) if torch.is_tensor(t)}
    assert len(ptrs) == 1
    assert (tdc == _td()).all() and tdc["s"] == "text"
    tdc._consolidated["storage"].zero_()
    assert (tdc["a"] == 0).all()


def test_consolidate_copies_non_contiguous_and_grad_tensors() -> None:
    base = torch.arange(24.0, requires_grad=True)
    strided = torch.arange(16).reshape(4, 4)[:, ::2]
    td = TensorDict(t=base.reshape(2, 3, 4).transpose(0, 1), s=strided)
    tdc = td.consolidate(num_threads=2)
    assert torch.equal(tdc["t"], td["t"]) and not tdc["t"].requires_grad
    assert torch.equal(tdc["s"], td["s"])


def test_consolidated_is_locked_and_unlocking_forgets_the_storage() -> None:
    tdc = _td().consolidate()
    assert tdc.is_locked and tdc.is_consolidated()
    with pytest.raises(RuntimeError):
        tdc["new"] = torch.zeros(3)
    with tdc.unlock_():
        assert not tdc.is_consolidated()
    assert tdc.is_locked and not tdc.is_consolidated()


def test_to_device_keeps_consolidation() -> None:
    moved = _td().consolidate().to("cpu")
    assert moved.is_consolidated() and moved.is_locked and moved.device == torch.device("cpu")
    assert (moved == _td()).all()


def test_file_round_trip_in_upstreams_layout(tmp_path) -> None:
    path = tmp_path / "td.bin"
    tdc = _td().consolidate(filename=path)
    assert tdc.device == torch.device("cpu")
    raw = path.read_bytes()
    size = int.from_bytes(raw[-8:], "little")
    meta = json.loads(raw[-8 - size : -8])
    assert meta["b"]["leaves"]["c"] == ["torch.float16", [3, 2], 24, 40, 4]
    loaded = from_consolidated(path)
    assert (loaded.exclude("s") == _td().exclude("s")).all() and loaded["s"] == "text"
    assert loaded["b"].batch_size == (3,)


def test_return_early_gives_a_future() -> None:
    future = _td().consolidate(return_early=True, num_threads=2)
    assert isinstance(future, TensorDictFuture)
    assert future.result().is_consolidated()
    with pytest.raises(NotImplementedError, match="non_blocking"):
        _td().consolidate(return_early=True, non_blocking=True)


def test_padding_is_deterministic() -> None:
    td = TensorDict(x=torch.ones(3, dtype=torch.uint8), y=torch.ones(1))
    one = td.consolidate()._consolidated["storage"]
    two = td.consolidate(num_threads=3)._consolidated["storage"]
    assert torch.equal(one, two) and one.numel() == 16


def test_consolidated_pickles() -> None:
    tdc = _td().consolidate()
    again = pickle.loads(pickle.dumps(tdc))
    assert (again.exclude("s") == tdc.exclude("s")).all()


def _njt(lengths: bool = True) -> torch.Tensor:
    return torch.nested.nested_tensor_from_jagged(
        torch.arange(10.0),
        offsets=torch.tensor([0, 2, 5, 8, 10]),
        lengths=torch.tensor([2, 3, 3, 2]) if lengths else None,
    )


def _assert_same_njt(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.is_nested and got._ragged_idx == want._ragged_idx
    assert torch.equal(got.values(), want.values()) and torch.equal(got.offsets(), want.offsets())
    want_lengths = want.lengths()
    assert (got.lengths() is None) == (want_lengths is None)
    if want_lengths is not None:
        assert torch.equal(got.lengths(), want_lengths)


def _one_storage(td) -> bool:
    ptrs = set()
    for t in td.values(True, True):
        if isinstance(t, torch.Tensor):
            parts = [t.values(), t.offsets()] if t.is_nested else [t]
            ptrs.update(p.untyped_storage().data_ptr() for p in parts)
    return len(ptrs) == 1


def test_jagged_tensors_are_consolidated_in_upstreams_layout() -> None:
    td = TensorDict(a=_njt(), b={"c": _njt(lengths=False)}, x=torch.ones(4), batch_size=[4])
    tdc = td.consolidate(num_threads=2)
    assert _one_storage(tdc)
    _assert_same_njt(tdc["a"], td["a"])
    _assert_same_njt(tdc["b", "c"], td["b", "c"])
    leaves = tdc._consolidated["metadata"]["leaves"]
    assert list(leaves) == ["<NJT_VALUES>a", "<NJT_LENGTHS>a", "<NJT_OFFSETS>a", "x"]
    assert leaves["<NJT_OFFSETS>a"][5] == 1  # the ragged dimension
    tdc._consolidated["storage"].zero_()
    assert (tdc["a"].values() == 0).all() and (tdc["b", "c"].offsets() == 0).all()


def test_jagged_tensors_round_trip_through_files_and_pickles(tmp_path) -> None:
    ragged = torch.nested.nested_tensor_from_jagged(
        torch.arange(15.0).view(5, 3), offsets=torch.tensor([0, 2, 5])
    ).transpose(1, 2)  # ragged along dim 2 (cheap: as_nested_tensor of such costs ~1 s)
    td = TensorDict(a=_njt(), r=torch.zeros(4), batch_size=[4])
    loaded = from_consolidated(_write(td, tmp_path))
    _assert_same_njt(loaded["a"], td["a"])
    for protocol in (4, 5):
        again = pickle.loads(pickle.dumps(td.consolidate(), protocol=protocol))
        assert again.is_consolidated() and _one_storage(again)
        _assert_same_njt(again["a"], td["a"])
    tdr = TensorDict(ragged=ragged, batch_size=[2]).consolidate()
    again = pickle.loads(pickle.dumps(tdr))["ragged"]
    assert again._ragged_idx == 2
    assert all(torch.equal(x, y) for x, y in zip(again.unbind(), ragged.unbind()))


def _write(td: TensorDict, tmp_path) -> str:
    path = str(tmp_path / "td.bin")
    td.consolidate(filename=path)
    return path


def test_strided_nested_tensors_are_refused_with_a_hint() -> None:
    strided = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    with pytest.raises(NotImplementedError, match=r"layout=torch\.jagged"):
        TensorDict(a=strided).consolidate()


def test_storage_offsets_follow_each_leaf_whatever_the_key_order() -> None:
    # a leaf after a nested tensordict used to be copied to the wrong offset
    td = TensorDict(a=torch.arange(3), b={"c": torch.ones(2, dtype=torch.uint8)}, d=torch.ones(5))
    tdc = td.consolidate()
    assert (tdc == td).all()
    assert torch.equal(pickle.loads(pickle.dumps(tdc))["d"], torch.ones(5))


def test_lazy_stacks_stay_lazy_and_pickle_consolidated() -> None:
    members = [TensorDict(x=torch.full((2,), float(i)), s=f"m{i}") for i in range(3)]
    tdc = lazy_stack(members, 0).consolidate()
    assert isinstance(tdc, LazyStackedTensorDict) and tdc.is_consolidated()
    assert _one_storage(tdc) and tdc["s"] == ["m0", "m1", "m2"]
    again = pickle.loads(pickle.dumps(tdc))
    assert isinstance(again, LazyStackedTensorDict) and again.is_consolidated()
    assert torch.equal(again["x"], tdc["x"]) and again["s"] == ["m0", "m1", "m2"]


def test_nested_tensorclasses_and_non_tensor_stacks_survive_pickling() -> None:
    td = TensorDict(p=_Point(x=torch.ones(3), label="p", batch_size=[3]), batch_size=[3])
    td["s"] = NonTensorStack("a", "b", "c")
    again = pickle.loads(pickle.dumps(td.consolidate()))
    assert isinstance(again["p"], _Point) and again["p"].label == "p"
    assert torch.equal(again["p"].x, torch.ones(3)) and again["s"] == ["a", "b", "c"]


def test_a_consolidated_tensordict_pickles_as_one_storage() -> None:
    tdc = TensorDict({f"k{i}": torch.full((4,), i) for i in range(20)}, [4]).consolidate()
    # torch.save's protocol 2: the storage as a tensor; protocols 3+: its bytes as one numpy
    # array (one copy, loadable by either package through torch.from_numpy)
    for protocol in (2, 4, 5):
        rebuild, (metadata, storage) = tdc.__reduce_ex__(protocol)
        assert rebuild is tensordict._reductions._rebuild_tensordict_files_consolidated
        assert isinstance(metadata, dict)
        carried = storage if protocol == 2 else storage.tensor
        assert carried is tdc._consolidated["storage"]
        again = pickle.loads(pickle.dumps(tdc, protocol=protocol))
        assert again.is_consolidated() and (again == tdc).all()


def test_unpickled_lock_state_follows_the_source_as_upstream() -> None:
    td = TensorDict(a=torch.zeros(2))
    again = pickle.loads(pickle.dumps(td.consolidate()))
    assert again.is_consolidated() and not again.is_locked
    again["new"] = torch.ones(1)  # (upstream code adds keys to what it receives)
    assert pickle.loads(pickle.dumps(td.lock_().consolidate())).is_locked


def test_consolidated_results_cross_the_map_iter_channel_as_one_buffer() -> None:
    a, b = socket.socketpair()
    ca, cb = Channel(a), Channel(b)
    try:
        small = TensorDict(a=torch.arange(3), b={"c": torch.ones(2)}).consolidate()
        large = TensorDict(a=torch.randn(OUT_OF_BAND_BYTES), b=torch.arange(3)).consolidate()
        for td in (small, large):
            ca.send(("ok", 0, td))
            got = cb.recv()[2]
            assert got.is_consolidated() and _one_storage(got) and (got == td).all()
        assert cb.last_oob_bytes >= large._consolidated["storage"].numel()
    finally:
        ca.close()
        cb.close()


def test_multiprocessing_receives_one_shared_storage() -> None:
    # (the queue's ForkingPickler is the same under spawn: fork keeps the test fast)
    ctx = mp.get_context("fork")
    plain = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3])
    q_in, q_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=describe_consolidated, args=(q_in, q_out))
    proc.start()
    try:
        q_in.put(plain)
        assert q_out.get(timeout=60) == (False, True, 2, [1.0, 1.0, 1.0])
        q_in.put(plain.consolidate())
        assert q_out.get(timeout=60) == (True, True, 1, [1.0, 1.0, 1.0])
    finally:
        q_in.put(None)
        proc.join(timeout=60)


def _address(data: bytes) -> int:
    import numpy as np

    return np.frombuffer(data, dtype=np.uint8).ctypes.data


@pytest.mark.parametrize("protocol", [3, 4])
def test_a_large_consolidated_storage_is_pickled_from_the_bytes_it_lives_in(protocol) -> None:
    td = TensorDict(a=torch.arange(40_000, dtype=torch.float32), b={"c": torch.ones(3)})
    tdc = td.consolidate()
    storage = tdc._consolidated["storage"]
    _, (_, carried) = tdc.__reduce_ex__(protocol)
    data = carried.args[0].data  # torch.from_numpy(<uint8 array of these bytes>)
    assert isinstance(data, bytes) and _address(data) == storage.data_ptr()  # no copy made
    tdc["a"][:2] = -1  # in-place writes go to those bytes, and travel
    again = pickle.loads(pickle.dumps(tdc, protocol=protocol))
    assert again.is_consolidated() and torch.equal(again["a"][:3], torch.tensor([-1.0, -1, 2]))
    assert torch.equal(again["b", "c"], torch.ones(3))


def test_a_consolidated_storage_moved_to_shared_memory_is_pickled_from_there() -> None:
    tdc = TensorDict(a=torch.arange(40_000, dtype=torch.float32)).consolidate()
    tdc._consolidated["storage"].share_memory_()  # (what a multiprocessing queue does)
    tdc["a"][0] = 7
    again = pickle.loads(pickle.dumps(tdc, protocol=4))
    assert again["a"][0] == 7 and torch.equal(again["a"][1:], tdc["a"][1:])


def test_a_bytes_backed_consolidation_warns_nothing() -> None:
    import warnings

    td = TensorDict(a=torch.arange(40_000, dtype=torch.float32))
    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # (torch would say "the given buffer is not writable" each time)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(2):
                tdc = td.consolidate()
                assert tdc._consolidated["bytes"][0]() is not None
    finally:
        torch.set_warn_always(before)


def test_consolidated_leaves_of_every_shape_and_dtype_are_exact_contiguous_views() -> None:
    leaves = {
        "empty": torch.zeros(3, 0),
        "scalar": torch.tensor(5.0),
        "flags": torch.tensor([True, False, True]),  # 3 bytes: the next leaf starts 8 bytes on
        "c128": torch.arange(3.0).to(torch.complex128),  # (not always 16-byte aligned)
        "strided": torch.arange(6).reshape(3, 2).t().contiguous().t(),
        "half": torch.ones(3, 2, dtype=torch.float16),
        "none": torch.zeros(0),
    }
    td = TensorDict(leaves, batch_size=[])
    for again in (td.consolidate(), pickle.loads(pickle.dumps(td.consolidate(), protocol=4))):
        storage = again._consolidated["storage"]
        for key, value in leaves.items():
            got = again[key]
            assert got.dtype == value.dtype and got.shape == value.shape, key
            assert torch.equal(got, value) and got.is_contiguous(), key
            assert got.stride() == torch.empty(value.shape).stride(), key
            if got.numel():
                assert got.untyped_storage().data_ptr() == storage.untyped_storage().data_ptr()


def test_metadata_whose_leaf_overflows_its_byte_range_is_refused() -> None:
    from tensordict._reductions import _rebuild_tensordict_files_consolidated as rebuild

    tdc = TensorDict(a=torch.arange(4), b=torch.arange(4)).consolidate()
    meta = json.loads(json.dumps(tdc._consolidated["metadata"]))
    meta["leaves"]["a"][1] = [5]  # 5 elements in the 4 elements' bytes [start, end)
    with pytest.raises(RuntimeError):
        rebuild(meta, tdc._consolidated["storage"])


def test_a_one_element_leaf_at_any_stride_consolidates_into_a_file(tmp_path) -> None:
    # a single element counts as contiguous whatever its stride (here 3, a slice of a stack's
    # leaf): the file writer viewed it as bytes, which needs stride 1
    odd = torch.arange(6)[::3][:1]
    assert odd.stride() == (3,) and odd.is_contiguous()
    td = TensorDict({"a": odd, "b": torch.ones(1)}, [1])
    out = td.consolidate(filename=tmp_path / "one.mmap")
    assert out.is_consolidated() and (out == td).all()


def test_every_kind_of_leaf_is_copied_exactly_whichever_way_it_is_copied(tmp_path) -> None:
    # small plain contiguous CPU leaves are copied in runs (one torch.cat each); the others one
    # by one: a conjugate or negative view must be resolved, a transposed one gathered
    from tensordict import MemoryMappedTensor
    from tensordict.core.behaviour.consolidate import Layout

    c = torch.arange(3.0).to(torch.complex64) * (1 + 2j)
    leaves = {
        "plain": torch.arange(5, dtype=torch.int16),  # 10 bytes: 6 of padding after it
        "param": torch.nn.Parameter(torch.arange(3.0)),
        "large": torch.arange(20_000.0),  # (over CAT_BYTES: copied on its own)
        "memmap": MemoryMappedTensor.from_tensor(torch.arange(3.0), filename=tmp_path / "m"),
        "conj": c.conj(),
        "neg": torch._neg_view(torch.arange(3.0)),
        "transposed": torch.arange(6.0).reshape(2, 3).t(),
        "flags": torch.tensor([True, False, True]),
        "grad": torch.ones(2, requires_grad=True),
        "scalar": torch.tensor(7, dtype=torch.int8),
        "one_at_stride_3": torch.arange(9).reshape(3, 3)[:1, 0],  # contiguous, stride 3
    }
    td = TensorDict(leaves, batch_size=[])
    expected = {k: v.detach().resolve_conj().resolve_neg().clone() for k, v in leaves.items()}
    layout = Layout(td)
    storage = torch.full((layout.size,), 255, dtype=torch.uint8)  # (garbage in the padding)
    for until in (1, 40, layout.size):  # in pieces, as a transfer fills it
        layout.fill(storage, until)
    pieces = layout.finish(storage)
    whole = td.consolidate()
    threaded = td.consolidate(num_threads=3)
    assert torch.equal(storage, whole._consolidated["storage"])
    assert torch.equal(storage, threaded._consolidated["storage"])
    for got in (pieces, whole, threaded):
        for key, value in expected.items():
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), key
    plain = leaves["plain"].numel() * 2
    assert storage[plain:8].eq(0).all(), "the padding bytes are zeros"
