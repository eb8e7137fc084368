"""Global switches: context manager, decorator, ``.set()``, environment mirror, deprecations."""

from __future__ import annotations

import os
import warnings

import pytest

from tensordict.core import options
from tensordict.core.options import (
    capture_non_tensor_stack,
    get_defaults_to_none,
    get_printoptions,
    lazy_legacy,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_get_defaults_to_none,
    set_lazy_legacy,
    set_list_to_stack,
    set_printoptions,
    strtobool,
)


@pytest.fixture(autouse=True)
def _restore_switches():
    saved = [
        (s, s.value, os.environ.get(s.env))
        for s in (
            options._LAZY_LEGACY,
            options._LIST_TO_STACK,
            options._CAPTURE_NON_TENSOR_STACK,
            options.GET_DEFAULTS_TO_NONE,
        )
    ]
    printing = dict(options._PRINT_OPTIONS)
    yield
    for switch, value, env in saved:
        switch.value = value
        if env is None:
            os.environ.pop(switch.env, None)
        else:
            os.environ[switch.env] = env
    options._PRINT_OPTIONS.clear()
    options._PRINT_OPTIONS.update(printing)


def test_defaults_and_allow_none_while_never_set() -> None:
    assert options._LAZY_LEGACY.value is None or "LAZY_LEGACY_OP" in os.environ
    assert lazy_legacy() is False
    assert list_to_stack() is True
    assert capture_non_tensor_stack() is False
    options._LIST_TO_STACK.value = None
    assert list_to_stack(allow_none=True) is None


def test_context_manager_sets_then_restores_value_and_environment() -> None:
    options._LIST_TO_STACK.write(None)
    with set_list_to_stack(True):
        assert list_to_stack() is True
        assert os.environ["LIST_TO_STACK"] == "True"
    assert list_to_stack(allow_none=True) is None
    assert "LIST_TO_STACK" not in os.environ


def test_nested_blocks_restore_in_order() -> None:
    with set_capture_non_tensor_stack(False):
        with pytest.warns(DeprecationWarning), set_capture_non_tensor_stack(True):
            assert capture_non_tensor_stack() is True
        assert capture_non_tensor_stack() is False


def test_decorator_applies_for_each_call_without_warning_again() -> None:
    with pytest.warns(DeprecationWarning, match="legacy lazy mode"):
        decorator = set_lazy_legacy(True)

    @decorator
    def inside() -> bool | None:
        return lazy_legacy()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert inside() is True
        assert inside() is True
    assert lazy_legacy() is False


def test_set_applies_for_good_and_mirrors_the_environment() -> None:
    set_list_to_stack(True).set()
    assert list_to_stack() is True
    assert os.environ["LIST_TO_STACK"] == "True"


def test_deprecated_modes_warn_and_others_do_not() -> None:
    with pytest.warns(DeprecationWarning, match="set_non_tensor"):
        set_list_to_stack(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        set_lazy_legacy(False)
        set_list_to_stack(True)
        set_capture_non_tensor_stack(False)


def test_get_defaults_to_none_switch_changes_get_of_a_missing_key() -> None:
    from tensordict import TensorDict

    td = TensorDict(a=0)
    with pytest.warns(DeprecationWarning):
        set_get_defaults_to_none(False)
    with pytest.warns(DeprecationWarning):
        assert get_defaults_to_none() is False
    with pytest.raises(KeyError):
        td.get("missing")
    assert td.get("missing", None) is None  # an explicit default still wins
    with pytest.warns(DeprecationWarning):
        set_get_defaults_to_none(True)
    assert td.get("missing") is None


def test_no_default_makes_get_raise() -> None:
    from tensordict import TensorDict
    from tensordict.base import NO_DEFAULT

    td = TensorDict(a=0, b={"c": 1})
    with pytest.raises(KeyError):
        td.get("missing", NO_DEFAULT)
    with pytest.raises(KeyError):
        td.get(("b", "missing"), NO_DEFAULT)
    assert td.get(("b", "c"), NO_DEFAULT) == 1


@pytest.mark.parametrize(("text", "value"), [("Yes", True), ("on", True), ("0", False)])
def test_strtobool_reads_truth_values(text: str, value: bool) -> None:
    assert strtobool(text) is value


def test_strtobool_rejects_other_text() -> None:
    with pytest.raises(ValueError, match="invalid truth value 'maybe'"):
        strtobool("maybe")


def test_environment_sets_switch_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPTURE_NONTENSOR_STACK", "1")
    assert options._Switch("CAPTURE_NONTENSOR_STACK", False).get() is True


def test_printoptions_block_restores_and_detailed_option_turns_compact_off() -> None:
    before = get_printoptions()
    with set_printoptions(show_grad=True):
        inside = get_printoptions()
    assert inside["show_grad"] is True and inside["compact"] is False
    assert get_printoptions() == before


def test_printoptions_explicit_compact_wins_and_verbose_false_hides_details() -> None:
    with set_printoptions(show_grad=True, compact=True):
        assert get_printoptions()["compact"] is True
    with set_printoptions(verbose=False, show_dtype=True):
        opts = get_printoptions()
    assert opts["show_device"] is False and opts["show_dtype"] is True


def test_printoptions_unknown_option_raises_type_error() -> None:
    with pytest.raises(TypeError, match="Unknown printoptions"):
        set_printoptions(colour=True)


def test_printoptions_set_for_good() -> None:
    set_printoptions(sort_keys=None).set()
    assert get_printoptions()["sort_keys"] is None


# ------------------------------------------------------------------------------- JSON backend
@pytest.fixture
def _restore_json_backend():
    saved = options._JSON_BACKEND
    yield
    options._JSON_BACKEND = saved


@pytest.mark.usefixtures("_restore_json_backend")
def test_json_dumps_uses_the_standard_module_by_default() -> None:
    assert options.get_json_backend().__name__ == "json"
    assert options.json_dumps({"a": [1, 2]}, separators=(",", ":")) == '{"a":[1,2]}'


@pytest.mark.usefixtures("_restore_json_backend")
def test_an_unknown_json_backend_is_refused_and_the_backend_kept() -> None:
    with pytest.raises(ValueError, match="expected one of"):
        options.set_json_backend("yaml")
    assert options.get_json_backend().__name__ == "json"


@pytest.mark.usefixtures("_restore_json_backend")
def test_a_json_backend_that_is_not_installed_names_the_install(monkeypatch) -> None:
    import sys

    from tensordict.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "orjson", None)  # an import of it now fails
    with pytest.raises(MissingDependencyError, match="pip install orjson"):
        options.set_json_backend("orjson")
    assert options.get_json_backend().__name__ == "json"


@pytest.mark.usefixtures("_restore_json_backend")
def test_an_orjson_like_backend_returns_its_bytes_and_drops_separators(monkeypatch) -> None:
    import sys
    import types

    fake = types.ModuleType("orjson")
    calls = []

    def dumps(data, **kwargs):
        calls.append(kwargs)
        return b"fake"

    fake.dumps = dumps
    monkeypatch.setitem(sys.modules, "orjson", fake)
    options.set_json_backend("orjson")
    assert options.json_dumps({"a": 1}, separators=(",", ":")) == b"fake"
    assert calls == [{}]


@pytest.mark.parametrize("name", ["json_dumps", "set_json_backend", "get_json_backend"])
def test_json_helpers_read_from_utils_warn_as_deprecated(name: str) -> None:
    import tensordict.utils

    with pytest.warns(DeprecationWarning, match=f"tensordict.utils.{name} is deprecated"):
        served = getattr(tensordict.utils, name)
    assert served is getattr(options, name)


def test_utils_still_raises_attribute_error_for_unknown_names() -> None:
    import tensordict.utils

    with pytest.raises(AttributeError, match="no attribute 'not_a_helper'"):
        tensordict.utils.not_a_helper  # noqa: B018


# ------------------------------------------------------------------------------- legacy marker
def test_mark_legacy_lazy_flags_the_function_itself() -> None:
    def _legacy_view(td):
        return td

    assert options.mark_legacy_lazy(_legacy_view) is _legacy_view
    assert _legacy_view.LEGACY is True


def test_mark_legacy_lazy_refuses_a_function_not_named_legacy() -> None:
    def view(td):
        return td

    with pytest.raises(NameError, match="_legacy_view"):
        options.mark_legacy_lazy(view)


def test_upstream_print_options_dict_is_the_live_state() -> None:
    from tensordict import _utils_options
    from tensordict.utils import _REPR_OPTIONS

    assert _REPR_OPTIONS is _utils_options._REPR_OPTIONS
    with set_printoptions(show_device=False):
        assert _REPR_OPTIONS["show_device"] is False
    assert _REPR_OPTIONS["show_device"] is True
