"""``tensordict.testing``: checks for tests; re-exports only."""

from tensordict.core.checks import assert_close
from tensordict.core.checks import assert_close as assert_allclose_td

__all__ = ["assert_allclose_td", "assert_close"]
