"""``tensordict.testing``: checks for tests; re-exports only.

``MyDistData`` (the tensorclass of upstream's distributed tests) lives in
``tensordict._testing``; reading it here warns, as upstream, which will remove it in 0.17.
"""

import warnings
from typing import Any

from tensordict.core.checks import assert_close
from tensordict.core.checks import assert_close as assert_allclose_td

__all__ = ["assert_allclose_td", "assert_close"]


def __getattr__(name: str) -> Any:
    if name == "MyDistData":
        warnings.warn(
            "tensordict.testing.MyDistData is deprecated and will be removed in TensorDict "
            "0.17: import it from tensordict._testing.",
            DeprecationWarning,
            stacklevel=2,
        )
        from tensordict._testing import MyDistData  # (a tensorclass: imported when asked for)

        return MyDistData
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
