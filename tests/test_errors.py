"""The errors module: one place, builtin base classes, messages that say what to do."""

from __future__ import annotations

from typing import Any

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
        (errors.ZeroDimIterationError, TypeError),
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
    # upstream's wording, which client code (TorchRL's tests) matches on
    assert str(info.value).startswith("key \"b\" not found in TensorDict with keys ['a']")


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
    with pytest.raises(errors.KeyTypeError, match="a key must be a string or a non-empty"):
        TensorDict({}, []).get(3.0)  # type: ignore[arg-type]


def test_worker_died_error_carries_context() -> None:
    err = errors.WorkerDiedError("worker died", chunk=3, pid=42, exitcode=-9)
    assert (err.chunk, err.pid, err.exitcode) == (3, 42, -9) and str(err) == "worker died"


@pytest.mark.parametrize(
    ("action", "error", "upstream_words", "advice"),
    [
        (
            lambda td: bool(td),
            RuntimeError,
            "Converting a tensordict to boolean value is not permitted",
            "td.all()",
        ),
        (lambda td: td.set_("a", torch.zeros(5)), ValueError, "Failed to update 'a'", "broadcasts"),
        (
            lambda td: td.rename_key_("a", "b", safe=True),
            KeyError,
            "already present in TensorDict",
            "safe=False",
        ),
        (
            lambda td: td.transpose(0, 3),
            RuntimeError,
            "dim0 and dim1 must be within the range",
            "batch dimensions",
        ),
        (
            lambda td: setattr(td, "names", ["x", "y"]),
            RuntimeError,
            "the length of the dimension names must equate",
            "per batch",
        ),
        (
            lambda td: setattr(td, "batch_size", [3, 5]),
            RuntimeError,
            "which is incompatible with the batch-size",
            "prefixes",
        ),
        (
            lambda td: td.flatten_keys(","),
            KeyError,
            "Flattening keys in tensordict causes keys",
            "separator",
        ),
        (
            lambda td: td.__setitem__(slice(0, 1), td[:2].clone()),
            RuntimeError,
            "Cannot broadcast the tensordict",
            "Give a value",
        ),
        (lambda td: td["a", "x"], KeyError, "", ""),
    ],
)
def test_errors_start_with_upstreams_words_then_say_what_to_do(
    action: Any, error: type, upstream_words: str, advice: str
) -> None:
    td = TensorDict({"a": torch.zeros(3, 2), "b": torch.zeros(3), "n": {"c": torch.zeros(3)}}, [3])
    td["n,c"] = torch.zeros(3)  # collides with ("n", "c") once flattened with ","
    with pytest.raises(error) as info:
        action(td)
    assert upstream_words in str(info.value) and advice in str(info.value)


def test_unlocking_a_tensordict_held_by_a_locked_one_uses_upstreams_words() -> None:
    td = TensorDict({"n": {"a": torch.zeros(())}}).lock_()
    with pytest.raises(RuntimeError, match="Cannot unlock a tensordict that is part of a locked"):
        td["n"].unlock_()
