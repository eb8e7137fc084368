"""The library's logger (``tensordict.utils.logger``): ``logging.getLogger("tensordict")``.

Its level is read from the ``TD_LOGGING_LEVEL`` environment variable (default ``INFO``).
"""

from __future__ import annotations

import logging
import os

__all__ = ["logger"]

logger = logging.getLogger("tensordict")
logger.setLevel(os.environ.get("TD_LOGGING_LEVEL", "INFO").upper())
