"""Importable worker functions for the store tests (spawn imports them by name)."""

from __future__ import annotations

from typing import Any


def rows_times_two(chunk: Any) -> Any:
    return chunk.to_tensordict() * 2 if hasattr(chunk, "to_tensordict") else chunk * 2
