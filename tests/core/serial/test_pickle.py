"""Pickling: round trips, lock state, and views pickling only their own elements."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict


def make() -> TensorDict:
    return TensorDict(
        {
            "a": torch.randn(4, 3),
            "b": {"c": torch.arange(4), "d": {"e": torch.ones(4, 2, dtype=torch.bool)}},
            "s": "label",
        },
        [4],
        names=["rows"],
    )


def roundtrip(obj: object, protocol: int = pickle.HIGHEST_PROTOCOL) -> object:
    return pickle.loads(pickle.dumps(obj, protocol=protocol))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_round_trip_keeps_values_structure_and_batch_size(protocol: int) -> None:
    td = make()
    out = roundtrip(td, protocol)
    assert isinstance(out, TensorDict)
    assert list(out.keys(True)) == list(td.keys(True))
    assert out.batch_size == td.batch_size and out["b", "d"].batch_size == td.batch_size
    assert (out == td).all()


def test_round_trip_keeps_non_tensor_data() -> None:
    out = roundtrip(make())
    assert out["s"] == "label" and isinstance(out.get("s"), NonTensorData)  # type: ignore[index]


def test_round_trip_keeps_names_and_device() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2], device="cpu", names=["x"])
    out = roundtrip(td)
    assert out.names == ["x"] and out.device == torch.device("cpu")  # type: ignore[attr-defined]


def test_round_trip_keeps_dtypes() -> None:
    dtypes = [torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.bool]
    td = TensorDict({str(d): torch.ones(3, dtype=d) for d in dtypes}, [3])
    out = roundtrip(td)
    assert all(out[str(d)].dtype == d for d in dtypes)  # type: ignore[index]


def test_round_trip_keeps_locked_state_recursively() -> None:
    out = roundtrip(make().lock_())
    assert out.is_locked and out["b"].is_locked and out["b", "d"].is_locked  # type: ignore[attr-defined,index]


def test_round_trip_of_unlocked_td_is_unlocked() -> None:
    assert not roundtrip(make()).is_locked  # type: ignore[attr-defined]


def test_unpickled_tensors_are_writable_and_independent() -> None:
    td = make()
    out = roundtrip(td[1:3])
    out["a"].zero_()  # type: ignore[index]
    assert td["a"][1:3].abs().sum() > 0


def test_round_trip_of_non_contiguous_leaf() -> None:
    td = TensorDict({"a": torch.arange(12).reshape(3, 4).t()}, [4])
    assert torch.equal(roundtrip(td)["a"], td["a"])  # type: ignore[index]


def test_round_trip_of_empty_leaf() -> None:
    td = TensorDict({"a": torch.zeros(0, 3)}, [0])
    assert roundtrip(td)["a"].shape == torch.Size([0, 3])  # type: ignore[index]


def test_round_trip_of_leaf_requiring_grad() -> None:
    td = TensorDict({"a": torch.zeros(3, requires_grad=True)}, [3])
    assert roundtrip(td)["a"].requires_grad  # type: ignore[index]


def test_round_trip_of_non_tensor_stack() -> None:
    td = TensorDict({"s": "a"}, [3])
    td[1] = {"s": "b"}
    assert roundtrip(td)["s"] == ["a", "b", "a"]  # type: ignore[index]


def test_round_trip_of_lazy_stack() -> None:
    ls = LazyStackedTensorDict.lazy_stack(
        [
            TensorDict({"x": torch.zeros(2)}, [2]),
            TensorDict({"x": torch.ones(2), "y": torch.ones(2)}, [2]),
        ]
    )
    out = roundtrip(ls)
    assert isinstance(out, LazyStackedTensorDict)
    assert torch.equal(out[1]["y"], torch.ones(2)) and out.batch_size == torch.Size([2, 2])


def test_slice_pickles_only_its_own_rows() -> None:
    big = TensorDict({"a": torch.zeros(100_000, 16)}, [100_000])
    size = len(pickle.dumps(big[10:20]))
    assert size < 10 * 16 * 4 + 2_000


def test_row_pickles_only_its_own_elements() -> None:
    big = TensorDict({"a": torch.zeros(100_000, 16)}, [100_000])
    assert len(pickle.dumps(big[5])) < 16 * 4 + 2_000


def test_view_of_view_survives_pickling() -> None:
    td = TensorDict({"x": torch.arange(100)}, [100])
    out = roundtrip(td[10:][5:25])
    assert out["x"].tolist() == list(range(15, 35))  # type: ignore[index]


def test_column_view_pickles_its_elements() -> None:
    td = TensorDict({"x": torch.arange(40).reshape(10, 4)}, [10, 4])
    out = roundtrip(td[:, 1])
    assert torch.equal(out["x"], td["x"][:, 1])  # type: ignore[index]


def test_deepcopy_copies_tensors() -> None:
    td = make()
    out = copy.deepcopy(td)
    assert out["a"] is not td["a"] and (out == td).all()


# ---------------------------------------------------------------------- pack_small (map_iter)
def test_pack_small_round_trips_flat_small_tensordicts() -> None:
    from tensordict.core.serial.pickling import pack_small, unpack_small

    td = TensorDict(
        {
            "f": torch.arange(6.0).reshape(3, 2),
            "b": torch.tensor([True, False, True]),
            "i": torch.arange(3, dtype=torch.int16),
            "empty": torch.zeros(3, 0),
            "strided": torch.arange(12).reshape(3, 4)[:, ::2],
        },
        [3],
        device="cpu",
    )
    td.lock_()
    back = unpack_small(pickle.loads(pickle.dumps(pack_small(td))))
    assert back.is_locked and back.device == torch.device("cpu") and back.batch_size == (3,)
    assert list(back.keys()) == list(td.keys())
    for key in list(td.keys()):  # (iterating a tensordict walks its first batch dim)
        assert back[key].dtype == td[key].dtype and torch.equal(back[key], td[key])
    back.unlock_()
    back["f"] += 1  # writable, and independent of the source and of the other entries
    assert td["f"][0, 0] == 0 and back["b"].tolist() == [True, False, True]
    scalar = unpack_small(pack_small(TensorDict({"s": torch.tensor(2.5)}, [])))
    assert scalar["s"].shape == () and scalar["s"] == 2.5 and scalar.device is None


def test_pack_small_declines_what_it_cannot_carry_exactly(tmp_path) -> None:
    from tensordict.core.serial.pickling import SMALL_BYTES, pack_small

    plain = {"x": torch.zeros(2)}
    assert pack_small(TensorDict(plain, [2], names=["n"])) is None
    assert pack_small(TensorDict({"n": plain}, [2])) is None  # nested
    assert pack_small(TensorDict({"s": "text"}, [])) is None  # non-tensor
    assert pack_small(TensorDict({"x": torch.zeros(SMALL_BYTES // 4 + 1)}, [])) is None
    assert pack_small(TensorDict({"x": torch.zeros(2, requires_grad=True)}, [2])) is None
    assert pack_small(TensorDict({"x": torch.zeros(2, dtype=torch.bfloat16)}, [2])) is None
    assert pack_small(TensorDict(plain, [2]).memmap_(tmp_path)) is None
    assert pack_small(torch.zeros(2)) is None


def test_pack_small_keeps_the_device_index_and_aligns_every_entry() -> None:
    from tensordict.core.serial.pickling import pack_small, unpack_small

    td = TensorDict(
        {"flag": torch.tensor([True, False]), "x": torch.tensor([1.0, 2.0], dtype=torch.float64)},
        [2],
        device="cpu:0",
    )
    back = unpack_small(pack_small(td))
    assert back.device == td.device
    assert back["x"].data_ptr() % 16 == back["flag"].data_ptr() % 16
    assert torch.equal(back["x"], td["x"]) and torch.equal(back["flag"], td["flag"])


def test_a_tensordict_sent_to_a_spawned_process_shares_its_memory() -> None:
    # multiprocessing pickles it with its leaves as tensors: torch moves them to shared memory,
    # so the child's writes reach the parent (as upstream; TorchRL's shared buffers rely on it)
    import multiprocessing as mp

    from tests.parallel import helpers

    td = TensorDict({"x": torch.zeros(4)}, [4])
    child = mp.get_context("spawn").Process(target=helpers.write_ones_into, args=(td,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0 and td["x"].tolist() == [1.0] * 4


def test_plain_pickle_still_carries_only_the_elements_of_a_view() -> None:
    big = TensorDict({"x": torch.zeros(100_000)}, [100_000])
    assert len(pickle.dumps(big[:10])) < 2_000 and not big["x"].is_shared()


def _saved_kinds() -> dict[str, object]:
    from tensordict import MetaData, NonTensorStack, UnbatchedTensor

    base = TensorDict(a=torch.arange(3), b={"c": torch.ones(3)}, batch_size=[3])
    return {
        "dense": base,
        "lazy": LazyStackedTensorDict(TensorDict(x=torch.zeros(2)), TensorDict(y=torch.ones(1))),
        "consolidated": base.consolidate(),
        "view": base._get_sub_tensordict(slice(0, 2)),
        "non-tensor": NonTensorData("x"),
        "non-tensor stack": NonTensorStack("a", "b"),
        "metadata": MetaData(object.__name__),
        "typed metadata": MetaData[int](3),
        "unbatched": TensorDict(u=UnbatchedTensor(torch.zeros(5)), batch_size=[3]),
    }


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("kind", list(_saved_kinds()))
def test_saved_pickles_name_only_public_module_paths(kind: str, protocol: int) -> None:
    """A pickle or ``torch.save`` file names classes and functions by paths that stay (upstream's),
    never by the package's internal layout, which may move."""
    import io

    obj = _saved_kinds()[kind]
    data = pickle.dumps(obj, protocol=protocol)
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    assert b"tensordict.core" not in data
    assert b"tensordict.core" not in buffer.getvalue()
    again = pickle.loads(data)
    assert type(again).__name__ in {type(obj).__name__, "TensorDict"}  # a view loads dense


def test_a_lazy_stack_keeps_its_stack_dim_name_through_pickle() -> None:
    # TorchRL's multi-process collectors send stacks named [..., "time"] through queues
    a, b = TensorDict({"x": torch.zeros(3, 2)}, [3]), TensorDict({"x": torch.zeros(3, 4)}, [3])
    stack = LazyStackedTensorDict(a, b, stack_dim=1)
    stack.names = [None, "time"]
    assert pickle.loads(pickle.dumps(stack)).names == [None, "time"]
