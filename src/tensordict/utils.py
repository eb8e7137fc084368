"""``tensordict.utils``: upstream's import path of helpers; re-exports only, each from its home.

``json_dumps``, ``set_json_backend`` and ``get_json_backend`` warn as deprecated when read from
here (as upstream); ``tensordict._utils_key_json`` serves them without a warning.
"""

import warnings
from typing import Any

from pyvers import implement_for
from torch.nn import Buffer

from tensordict.core import options as _options
from tensordict.core.batch_shape import convert_ellipsis_to_idx, expand_as_right, expand_right
from tensordict.core.batch_shape import getitem_batch_size as _getitem_batch_size  # noqa: F401
from tensordict.core.batch_shape import leaf_shape as _shape  # noqa: F401
from tensordict.core.batch_shape import maybe_correct_neg_dim as _maybe_correct_neg_dim  # noqa: F401
from tensordict.core.behaviour.base import is_tensor_collection
from tensordict.core.behaviour.consolidate import TensorDictFuture
from tensordict.core.behaviour.entries import LOCK_ERROR as _LOCK_ERROR  # noqa: F401
from tensordict.core.checks import assert_close
from tensordict.core.checks import assert_close as assert_allclose_td
from tensordict.core.checks import check_recursive_properties as _check_recursive_properties  # noqa: F401
from tensordict.core.functional import (
    NUMPY_TO_TORCH_DTYPE_DICT,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    isin,
    remove_duplicates,
)
from tensordict.core.functional import make_cache_key as _make_cache_key  # noqa: F401
from tensordict.core.functional import zip_strict as _zip_strict  # noqa: F401
from tensordict.core.keys import (
    KEY_SEPARATOR,
    NestedKey,
    is_seq_of_nested_key,
    unravel_key_list,
    unravel_key_to_tuple,
    unravel_keys,
)
from tensordict.core.keys import is_non_tensor_class as _is_non_tensor  # noqa: F401
from tensordict.core.keys import is_tensorclass_class as _is_tensorclass  # noqa: F401
from tensordict.core.keys import pass_through as _pass_through  # noqa: F401
from tensordict.core.keys import public_unravel_key as unravel_key
from tensordict.core.keys import unravel_key_to_tuple as _unravel_key_to_tuple  # noqa: F401
from tensordict.core.nontensor.data import LinkedList, is_non_tensor
from tensordict.core.options import _PRINT_OPTIONS as _REPR_OPTIONS  # noqa: F401
from tensordict.core.options import (
    capture_non_tensor_stack,
    get_printoptions,
    lazy_legacy,
    list_to_stack,
    logger,
    set_capture_non_tensor_stack,
    set_lazy_legacy,
    set_list_to_stack,
    set_printoptions,
    strtobool,
)
from tensordict.core.options import json_dumps as _json_dumps  # noqa: F401
from tensordict.core.options import mark_legacy_lazy as _legacy_lazy  # noqa: F401
from tensordict.core.serial.parse_repr import parse_tensor_dict_string
from tensordict.core.serial.upstream_pickle import LockedSchema as _LockedSchema  # noqa: F401
from tensordict.errors import TensorDictPropertyError as _TensorDictPropertyError  # noqa: F401
from tensordict.memmap.executor import shared_executor as _get_shared_executor  # noqa: F401
from tensordict.memmap.format import robust_key_setting as _get_robust_key_setting  # noqa: F401
from tensordict.memmap.format import (
    robust_key_setting_for as _get_robust_key_setting_with_warning,  # noqa: F401
)
from tensordict.memmap.format import safe_legacy_name as _is_safe_legacy_key  # noqa: F401
from tensordict.memmap.tree import decode_key as _decode_key_from_filesystem  # noqa: F401
from tensordict.memmap.tree import encode_key_for_filesystem as _encode_key_for_filesystem  # noqa: F401
from tensordict.memmap.tree import print_directory_tree
from tensordict.nn.functional_modules import (
    BatchedUninitializedBuffer as _BatchedUninitializedBuffer,  # noqa: F401
)
from tensordict.nn.functional_modules import (
    BatchedUninitializedParameter as _BatchedUninitializedParameter,  # noqa: F401
)
from tensordict.tensorclass.builder import is_tensorclass

__all__ = [
    "KEY_SEPARATOR",
    "NUMPY_TO_TORCH_DTYPE_DICT",
    "Buffer",
    "LinkedList",
    "NestedKey",
    "TensorDictFuture",
    "assert_allclose_td",
    "assert_close",
    "capture_non_tensor_stack",
    "convert_ellipsis_to_idx",
    "expand_as_right",
    "expand_right",
    "get_printoptions",
    "implement_for",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "is_non_tensor",
    "is_seq_of_nested_key",
    "is_tensor_collection",
    "is_tensorclass",
    "isin",
    "lazy_legacy",
    "list_to_stack",
    "logger",
    "parse_tensor_dict_string",
    "print_directory_tree",
    "remove_duplicates",
    "set_capture_non_tensor_stack",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "strtobool",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
    "unravel_keys",
]

_DEPRECATED = {
    "json_dumps": " Use json.dumps or orjson.dumps instead.",
    "set_json_backend": "",
    "get_json_backend": "",
}


def __getattr__(name: str) -> Any:
    """Serve the deprecated JSON helpers with a ``DeprecationWarning`` (as upstream)."""
    if name in _DEPRECATED:
        warnings.warn(
            f"tensordict.utils.{name} is deprecated and will be removed in TensorDict 0.17."
            + _DEPRECATED[name],
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_options, name)
    raise AttributeError(f"module 'tensordict.utils' has no attribute {name!r}")
