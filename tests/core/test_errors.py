"""The errors module: one place, builtin base classes, messages that say what to do."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, errors


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (errors.TensorDictKeyError, KeyError),
        (errors.KeyTypeError, TypeError),
        (errors.BatchSizeError, ValueError),
        (errors.BatchSizeError, RuntimeError),
        (errors.ShapeMismatchError, ValueError),
        (errors.ShapeMismatchError, RuntimeError),
        (errors.IndexingError, IndexError),
        (errors.LockedError, RuntimeError),
        (errors.KeyMismatchError, KeyError),
        (errors.KeyMismatchError, errors.ShapeMismatchError),
        (errors.DimNamesError, RuntimeError),
    ],
)
def test_error_subclasses_matching_builtin(error: type, builtin: type) -> None:
    assert issubclass(error, builtin)


def test_every_public_error_is_an_exception_class() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), Exception), name


def test_key_error_message_is_not_repr_quoted() -> None:
    with pytest.raises(errors.TensorDictKeyError) as info:
        TensorDict({"a": torch.zeros(())})["b"]
    assert str(info.value).startswith("key 'b' not found")


def test_missing_key_message_says_what_to_do() -> None:
    with pytest.raises(errors.TensorDictKeyError, match=r"td\.get\(key, default\)"):
        TensorDict({"a": torch.zeros(())})["b"]


def test_batch_size_message_says_what_to_do() -> None:
    with pytest.raises(errors.BatchSizeError, match=r"reshape the value or change td\.batch_size"):
        TensorDict({"a": torch.zeros(3)}, [4])


def test_locked_message_says_how_to_unlock() -> None:
    with pytest.raises(errors.LockedError, match=r"td\.unlock_\(\)"):
        TensorDict({}, [], lock=True)["a"] = torch.zeros(())


def test_index_message_gives_valid_range() -> None:
    with pytest.raises(errors.IndexingError, match=r"\[-3, 2\]"):
        TensorDict({}, [3])[3]


def test_key_type_message_says_what_is_expected() -> None:
    with pytest.raises(errors.KeyTypeError, match="str or a tuple of str"):
        TensorDict({}, []).get(3.0)  # type: ignore[arg-type]


def test_worker_died_error_carries_context() -> None:
    err = errors.WorkerDiedError("worker died", chunk=3, pid=42, exitcode=-9)
    assert (err.chunk, err.pid, err.exitcode) == (3, 42, -9) and str(err) == "worker died"
