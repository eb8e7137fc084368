"""``tensordict._C``: upstream's C extension names, here pure python; re-exports only."""

from tensordict.core.keys import unravel_key, unravel_key_list, unravel_keys
from tensordict.core.keys import unravel_key_to_tuple as _unravel_key_to_tuple  # noqa: F401

__all__ = ["unravel_key", "unravel_key_list", "unravel_keys"]
