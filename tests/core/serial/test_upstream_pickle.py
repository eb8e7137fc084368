"""Pickles and ``torch.save`` files interchange with upstream tensordict 0.15.3.

Both packages reference upstream's paths (``tensordict._reductions._make_td``,
``tensordict._td.TensorDict``...) with upstream's state layout; the checks against upstream
itself skip without its venv (see ``tests/upstream.py``), the others pin the format here.
"""

from __future__ import annotations

import copyreg
import io
import json
import pickle
from pathlib import Path

import pytest
import torch

import tensordict
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict

from ...upstream import run_upstream, upstream_python
from .pickle_interop_objects import Point, build, describe, dump_all, load_all, safe_loadable

ROOT = Path(__file__).resolve().parents[3]
PROTOCOLS = (2, 4, 5)


def _unlocked(summary):
    """A summary without the lock flags: a consolidated tensordict is locked, its unpickled
    copy is not (as upstream)."""
    if isinstance(summary, dict):
        return {k: _unlocked(v) for k, v in summary.items() if k != "locked"}
    return summary


def _same(name, got, want):
    if name.startswith("consolidated"):
        got, want = _unlocked(got), _unlocked(want)
    assert got == want, name


def _globals(data: bytes) -> set[str]:
    """The ``module name`` pairs a pickle imports."""
    found, strings = set(), []
    import pickletools

    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "GLOBAL":
            found.add(arg)
        elif op.name == "STACK_GLOBAL":
            found.add(f"{strings[-2]} {strings[-1]}")
        elif op.name in ("BINGET", "LONG_BINGET", "GET", "MEMOIZE", "BINPUT", "LONG_BINPUT"):
            pass
    return found


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_tensordict_pickles_by_upstreams_paths(protocol):
    td = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3], names=["n"])
    names = _globals(pickle.dumps(td, protocol=protocol))
    assert "tensordict._reductions _make_td" in names
    assert "tensordict._td TensorDict" in names
    assert not any(n.startswith("tensordict.core") for n in names), names


def test_classes_are_named_by_upstreams_modules():
    assert repr(TensorDict) == "<class 'tensordict._td.TensorDict'>"
    assert repr(LazyStackedTensorDict) == "<class 'tensordict._lazy.LazyStackedTensorDict'>"
    assert NonTensorData.__module__ == NonTensorStack.__module__ == "tensordict.tensorclass"
    assert tensordict._reductions._make_td.__module__ == "tensordict._reductions"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_object_round_trips_here(tmp_path, protocol):
    originals = build(str(tmp_path / "mm"))
    for name, obj in originals.items():
        again = pickle.loads(pickle.dumps(obj, protocol=protocol))
        assert type(again) is type(obj), name
        _same(name, describe(again), describe(obj))


def test_torch_save_round_trips_here(tmp_path):
    files = dump_all(str(tmp_path))
    loaded = load_all(str(tmp_path), files)
    expected = {n: describe(o) for n, o in build(str(tmp_path / "mm2")).items()}
    for fname, summary in loaded.items():
        _same(fname, summary, expected[fname.split(".")[0]])


class _UpstreamLayout:
    """Pickles as upstream 0.15 writes a TensorDict (its reduce callable and state dict)."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (tensordict._reductions._make_td, (TensorDict, self.state))


def test_upstreams_state_layout_loads_with_names_lock_and_device():
    inner = _UpstreamLayout(
        {
            "_tensordict": {"z": torch.zeros(2)},
            "_device": None,
            "_batch_size": torch.Size([2]),
            "_td_dim_names": [None],
        }
    )
    state = {
        "_device": torch.device("cpu"),
        "_tensordict": {"a": torch.arange(2), "inner": inner},
        "_batch_size": torch.Size([2]),
        "_td_dim_names": ["n"],
        "_is_locked": True,
        "_locked_schema": tensordict.utils._LockedSchema(("a", "inner")),
    }
    td = pickle.loads(pickle.dumps(_UpstreamLayout(state), protocol=2))
    assert type(td) is TensorDict and td.is_locked and td.device == torch.device("cpu")
    assert td.names == ["n"] and td.batch_size == torch.Size([2])
    assert torch.equal(td["a"], torch.arange(2)) and torch.equal(td["inner", "z"], torch.zeros(2))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_view_pickles_only_its_own_elements(protocol):
    big = torch.arange(100_000)
    td = TensorDict(a=big[5:15], b=big[::10_000], batch_size=[10])
    data = pickle.dumps(td, protocol=protocol)
    assert len(data) < 10_000
    again = pickle.loads(data)
    assert torch.equal(again["a"], big[5:15]) and torch.equal(again["b"], big[::10_000])


def test_leaves_are_tensors_under_protocol_2_and_numpy_arrays_above():
    td = TensorDict(a=torch.arange(3), batch_size=[3])
    assert "torch._utils _rebuild_tensor_v2" in _globals(pickle.dumps(td, protocol=2))
    names = _globals(pickle.dumps(td, protocol=4))
    assert "torch._utils _rebuild_tensor_v2" not in names
    assert any(n.startswith("numpy") for n in names), names
    back = pickle.loads(pickle.dumps(td, protocol=4))
    back["a"] += 1  # a writable tensor of its own
    assert torch.equal(back["a"], torch.arange(1, 4)) and torch.equal(td["a"], torch.arange(3))


def test_non_tensor_entries_keep_names_and_device():
    data = NonTensorData("x", batch_size=[2], device="cpu", names=["n"])
    again = pickle.loads(pickle.dumps(data))
    assert again.data == "x" and again.names == ["n"] and again.device == torch.device("cpu")
    stack = NonTensorStack(NonTensorStack("a", "b"), NonTensorStack("c", "d"))
    back = pickle.loads(pickle.dumps(stack))
    assert back.batch_size == torch.Size([2, 2]) and back.tolist() == [["a", "b"], ["c", "d"]]


def test_a_tensorclass_pickles_as_newobj_and_state():
    point = Point(x=torch.ones(2), label="q", batch_size=[2])
    reduced = point.__reduce_ex__(2)
    assert reduced[0] is copyreg.__newobj__ and set(reduced[2]) == {"tensordict", "non_tensordict"}
    again = pickle.loads(pickle.dumps(point))
    assert again.label == "q" and torch.equal(again.x, torch.ones(2))


def test_multiprocessing_pickler_keeps_sharing_the_leaves():
    from multiprocessing.reduction import ForkingPickler

    td = TensorDict(a=torch.arange(4), batch_size=[4])
    buf = io.BytesIO()
    ForkingPickler(buf, 2).dump(td)
    assert td["a"].is_shared()  # torch's reduction moved the leaf to shared memory


# ---------------------------------------------------------------- against upstream itself
_UPSTREAM = """
import json, sys
sys.path.insert(0, {root!r})
from tests.core.serial.pickle_interop_objects import (
    build, describe, dump_all, load_all, safe_loadable,
)
names = json.loads({names!r})
expected = {{n: describe(o) for n, o in build({ours!r} + "/ref").items()}}
loaded = load_all({ours!r}, names)
written = dump_all({theirs!r})
safe = safe_loadable(names)
print(json.dumps({{"loaded": loaded, "expected": expected, "written": written, "safe": safe}}))
"""


@pytest.fixture(scope="module")
def exchange(tmp_path_factory):
    """One upstream run: it loads the files written here and writes its own."""
    python = upstream_python()
    ours, theirs = tmp_path_factory.mktemp("ours"), tmp_path_factory.mktemp("theirs")
    names = json.dumps(dump_all(str(ours)))
    code = _UPSTREAM.format(root=str(ROOT), ours=str(ours), theirs=str(theirs), names=names)
    return run_upstream(python, code, ours), theirs


def _check(loaded, expected):
    assert loaded, "nothing was loaded"
    for fname, summary in loaded.items():
        _same(fname, summary, expected[fname.split(".")[0]])


def test_our_pickles_and_torch_save_files_load_in_upstream(exchange):
    out, _ = exchange
    _check(out["loaded"], out["expected"])


#: what ``torch.load(weights_only=True)`` reads: tensordicts, not user classes nor memmaps
#: (as upstream)
SAFE = sorted(
    f"{n}.pt"
    for n in ("td", "locked", "lazy", "non_tensor", "stack", "consolidated", "consolidated_large")
)


def test_torch_load_weights_only_reads_saved_tensordicts(tmp_path):
    assert safe_loadable(dump_all(str(tmp_path))) == SAFE


def test_weights_only_loading_agrees_with_upstream_both_ways(exchange):
    out, _ = exchange
    assert out["safe"] == SAFE  # upstream reads ours
    assert safe_loadable(out["written"]) == SAFE  # we read upstream's


def test_upstreams_pickles_and_torch_save_files_load_here(exchange):
    out, theirs = exchange
    expected = {n: describe(o) for n, o in build(str(theirs / "ref")).items()}
    _check(load_all(str(theirs), out["written"]), expected)


class _Reduced:
    """Pickles as the given ``(callable, args)``."""

    def __init__(self, reduced):
        self.reduced = reduced

    def __reduce__(self):
        return self.reduced


def test_pickles_of_the_earlier_layout_still_load():
    from tensordict.core.lazy.stack import _rebuild_lazy
    from tensordict.core.serial.pickling import pack_tensor, rebuild_tensordict

    packed = {"a": pack_tensor(torch.arange(3), 2)}
    old = (rebuild_tensordict, (TensorDict, packed, (3,), None, ["n"], True, False, None))
    td = pickle.loads(pickle.dumps(_Reduced(old)))
    assert td.names == ["n"] and td.is_locked and torch.equal(td["a"], torch.arange(3))
    members = [TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2))]
    lazy = pickle.loads(pickle.dumps(_Reduced((_rebuild_lazy, (members, 0, False)))))
    assert type(lazy) is LazyStackedTensorDict and torch.equal(lazy["a"][1], torch.ones(2))


def test_classes_pickle_by_reference_with_cloudpickle_in_a_fresh_interpreter() -> None:
    # cloudpickle (Ray's serialiser) pickles a class by value when the module its __module__
    # names is not imported yet: the receiving process then gets a different class
    import subprocess
    import sys

    code = (
        "import cloudpickle, tensordict\n"
        "from tensordict import TensorDict, LazyStackedTensorDict, NonTensorData\n"
        "from tensordict.memmap import MemoryMappedTensor\n"
        "for cls in (TensorDict, LazyStackedTensorDict, NonTensorData, MemoryMappedTensor):\n"
        "    assert cloudpickle.loads(cloudpickle.dumps(cls)) is cls, cls\n"
        "    assert len(cloudpickle.dumps(cls)) < 200, (cls, len(cloudpickle.dumps(cls)))\n"
    )
    pytest.importorskip("cloudpickle")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_small_leaves_travel_as_one_buffer_and_load_as_independent_tensors(protocol):
    leaves = {
        "f": torch.arange(6, dtype=torch.float32).reshape(3, 2),
        "b": torch.tensor([True, False, True]),  # 3 bytes: the next leaf starts aligned anyway
        "d": torch.arange(3, dtype=torch.float64),
        "e": torch.zeros(3, 0),
        "i": torch.arange(9)[::3],  # a strided view: only its own elements travel
    }
    td = TensorDict(leaves, batch_size=[3])
    data = pickle.dumps(td, protocol=protocol)
    assert b"bytearray" in data and b"ndarray" in data
    assert b"_reconstruct" not in data  # no pickled numpy array per leaf
    again = pickle.loads(data)
    assert list(again.keys()) == list(leaves)
    for key, value in leaves.items():
        got = again[key]
        assert got.dtype == value.dtype and got.shape == value.shape and torch.equal(got, value)
        assert got.data_ptr() % got.element_size() == 0
    again["f"] += 100  # writable, and no leaf overlaps another
    assert torch.equal(again["d"], leaves["d"]) and torch.equal(again["b"], leaves["b"])
    assert torch.equal(again["f"], leaves["f"] + 100) and torch.equal(td["f"], leaves["f"])


def test_leaves_of_64_kib_or_more_travel_one_by_one():
    td = TensorDict(a=torch.zeros(16 * 1024), b=torch.ones(2), batch_size=[])
    data = pickle.dumps(td, protocol=5)
    assert b"bytearray" not in data and b"from_numpy" in data
    again = pickle.loads(pickle.dumps(td, protocol=5))
    assert torch.equal(again["a"], td["a"]) and torch.equal(again["b"], td["b"])


def test_small_leaves_numpy_cannot_view_still_round_trip():
    refused = {
        "grad": torch.ones(2, requires_grad=True),
        "conj": torch.tensor([1 + 2j, 3 - 1j]).conj(),  # (a conjugate bit numpy refuses)
        "bf16": torch.ones(2, dtype=torch.bfloat16),
    }
    for key, value in refused.items():
        td = TensorDict({key: value, "plain": torch.arange(2)}, batch_size=[2])
        again = pickle.loads(pickle.dumps(td, protocol=4))[key]
        assert again.dtype == value.dtype and torch.equal(again.detach(), value.detach()), key
        assert again.requires_grad == value.requires_grad, key


def _samples_with_out_of_band_buffers():
    big = torch.arange(32 * 1024, dtype=torch.float32)
    return {
        "leaf by leaf": TensorDict(a=big.clone(), n={"b": torch.ones(3)}, batch_size=[]),
        "nested small": TensorDict(a=torch.ones(3, 2), n={"b": torch.ones(3)}, batch_size=[3]),
        "consolidated": TensorDict(
            a=big.clone(), n={"b": torch.ones(3)}, batch_size=[]
        ).consolidate(),
    }


@pytest.mark.parametrize("name", ["leaf by leaf", "nested small", "consolidated"])
def test_out_of_band_read_only_buffers_are_copied_not_aliased(name):
    # Ray's object store (or any zero-copy transport) hands protocol-5 buffers back read-only:
    # a loaded leaf that aliased one wrote into the stored object (or crashed on a read-only
    # mapping) on an in-place op
    td = _samples_with_out_of_band_buffers()[name]
    buffers = []
    data = pickle.dumps(td, protocol=5, buffer_callback=buffers.append)
    assert buffers, "the sample must present out-of-band buffers"
    stored = [bytearray(b.raw()) for b in buffers]
    snapshot = [bytes(s) for s in stored]
    again = pickle.loads(data, buffers=[memoryview(s).toreadonly() for s in stored])
    again.apply_(lambda x: x.add_(1))
    assert [bytes(s) for s in stored] == snapshot
    assert (again == td + 1).all()


def test_out_of_band_writable_buffers_are_used_in_place():
    # a writable buffer (the map_iter channel's shared memory, a bytearray) is not copied
    td = TensorDict(a=torch.arange(32 * 1024, dtype=torch.float32), batch_size=[])
    buffers = []
    data = pickle.dumps(td, protocol=5, buffer_callback=buffers.append)
    stored = [bytearray(b.raw()) for b in buffers]
    again = pickle.loads(data, buffers=stored)
    again["a"].add_(1)
    assert torch.frombuffer(stored[0], dtype=torch.float32)[1].item() == 2.0
