"""Repetition counts for fault-injection loops (tests marked ``@pytest.mark.stress``).

``make test`` runs them with small counts so the suite stays fast; ``make stress`` sets
``TENSORDICT_STRESS=1`` and runs only the marked tests with the counts quoted in the issues.
"""

from __future__ import annotations

import os

FULL = os.environ.get("TENSORDICT_STRESS") == "1"


def stress_count(small: int, full: int) -> int:
    """``full`` under ``make stress``, ``small`` otherwise."""
    return full if FULL else small
