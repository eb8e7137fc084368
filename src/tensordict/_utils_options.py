"""``tensordict._utils_options``: upstream's module of the global switches and print options;
re-exports only, each from its home (``tensordict.utils`` serves the same objects)."""

from tensordict.core.options import _PRINT_OPTIONS as _REPR_OPTIONS
from tensordict.core.options import (
    capture_non_tensor_stack,
    get_printoptions,
    lazy_legacy,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_lazy_legacy,
    set_list_to_stack,
    set_printoptions,
)
from tensordict.core.options import mark_legacy_lazy as _legacy_lazy

__all__ = [
    "_REPR_OPTIONS",
    "_legacy_lazy",
    "capture_non_tensor_stack",
    "get_printoptions",
    "lazy_legacy",
    "list_to_stack",
    "set_capture_non_tensor_stack",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
]
