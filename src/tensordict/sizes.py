"""Byte counts for people: parse ``"1GiB"`` from a command line, print ``"1.00 GiB"`` back.

Used by the ``info`` command and the demo. Binary units (KiB, MiB, GiB, TiB) are powers of 1024,
decimal units (kB, MB, GB, TB) powers of 1000; a bare number is a count of bytes.
"""

from __future__ import annotations

import math
import re

__all__ = ["format_bytes", "parse_size"]

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", re.IGNORECASE)
_BINARY = ("KiB", "MiB", "GiB", "TiB", "PiB")


def parse_size(text: str) -> int:
    """The number of bytes ``text`` names, such as ``"1GiB"``, ``"8 MiB"``, ``"1.5GB"``, ``"4096"``.

    Args:
        text: a positive number, optionally followed by a unit (case-insensitive): B, kB, MB, GB,
            TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).

    Returns:
        The size in bytes, rounded down to an integer.

    Raises:
        ValueError: ``text`` is not a size, names an unknown unit, or is smaller than one byte.

    Examples:
        >>> parse_size("1GiB"), parse_size("8 MiB"), parse_size("1.5GB"), parse_size("4096")
        (1073741824, 8388608, 1500000000, 4096)
        >>> parse_size("3 parsecs")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown unit 'parsecs' in size '3 parsecs': use B, kB, MB, GB, TB or KiB, ...
    """
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a size: expected a number and a unit, such as '1GiB' or '512MiB'."
        )
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(
            f"unknown unit {unit!r} in size {text!r}: use B, kB, MB, GB, TB or KiB, MiB, GiB, TiB."
        )
    size = math.floor(float(number) * factor)
    if size < 1:
        raise ValueError(f"size {text!r} is less than one byte: give a positive size.")
    return size


def format_bytes(n: int | float) -> str:
    """``n`` bytes with a binary unit and three significant digits.

    Examples:
        >>> format_bytes(0), format_bytes(1023), format_bytes(1536), format_bytes(3 * 2**30)
        ('0 B', '1023 B', '1.50 KiB', '3.00 GiB')
        >>> format_bytes(200 * 2**20)
        '200 MiB'
    """
    if abs(n) < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in _BINARY:
        value /= 1024
        if abs(value) < 1024 or unit == _BINARY[-1]:
            break
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:.{digits}f} {unit}"
