"""Parsing and printing byte counts (``--size`` of the demo, sizes printed by ``info``)."""

from __future__ import annotations

import pytest

from tensordict.sizes import format_bytes, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1GiB", 2**30),
        ("8MiB", 8 * 2**20),
        ("8 mib", 8 * 2**20),
        ("512KiB", 512 * 1024),
        ("1.5GB", 1_500_000_000),
        ("2kB", 2000),
        ("4096", 4096),
        ("4096B", 4096),
        ("0.5KiB", 512),
        ("1e3", 1000),
        (" 3 TiB ", 3 * 2**40),
    ],
)
def test_parse_size_accepts_numbers_with_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "1 2 GiB", "-1GiB", "1..5MB", "one GiB"])
def test_parse_size_rejects_what_is_not_a_size(text):
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(text)


def test_parse_size_names_an_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit 'GiG'"):
        parse_size("1GiG")


@pytest.mark.parametrize("text", ["0", "0GiB", "0.1B"])
def test_parse_size_rejects_less_than_a_byte(text):
    with pytest.raises(ValueError, match="less than one byte"):
        parse_size(text)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (10 * 1024, "10.0 KiB"),
        (2**30, "1.00 GiB"),
        (1000 * 2**30, "1000 GiB"),
        (2**60, "1024 PiB"),
    ],
)
def test_format_bytes_uses_binary_units_and_three_digits(n, text):
    assert format_bytes(n) == text
