"""``tensordict._utils_key_json``: upstream's module of the file-name encoding of keys and of the
JSON backend; re-exports only, each from its home (``tensordict.utils`` serves the same objects;
there, ``json_dumps``, ``set_json_backend`` and ``get_json_backend`` warn as deprecated)."""

from tensordict.core.options import get_json_backend, json_dumps, set_json_backend
from tensordict.core.options import json_dumps as _json_dumps
from tensordict.memmap.format import robust_key_setting as _get_robust_key_setting
from tensordict.memmap.format import (
    robust_key_setting_for as _get_robust_key_setting_with_warning,
)
from tensordict.memmap.format import safe_legacy_name as _is_safe_legacy_key
from tensordict.memmap.tree import decode_key as _decode_key_from_filesystem
from tensordict.memmap.tree import encode_key_for_filesystem as _encode_key_for_filesystem

__all__ = [
    "_decode_key_from_filesystem",
    "_encode_key_for_filesystem",
    "_get_robust_key_setting",
    "_get_robust_key_setting_with_warning",
    "_is_safe_legacy_key",
    "_json_dumps",
    "get_json_backend",
    "json_dumps",
    "set_json_backend",
]
