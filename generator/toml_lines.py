"""Map TOML key paths to source lines, because tomllib reports none.

A key path is a tuple of table keys and array-of-table indices, e.g.
("suite", 2, "config", 0, "kernel"). Only lines that start a key or a table
are recorded; a lookup falls back to the closest recorded ancestor, which is
how values inside inline tables and arrays get the line of their key.
"""
from __future__ import annotations

import re
from typing import Iterator

_KEY_PART = r'(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')'
_DOTTED_KEY = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_TABLE = re.compile(rf"^\s*\[\s*({_DOTTED_KEY})\s*\]")
_ARRAY_TABLE = re.compile(rf"^\s*\[\[\s*({_DOTTED_KEY})\s*\]\]")
_KEY_VALUE = re.compile(rf"^\s*({_DOTTED_KEY})\s*=")


def _split_dotted(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(_KEY_PART, dotted)]


def _code_chars(line: str) -> Iterator[str]:
    """Characters of a line outside strings and comments (enough for bracket depth)."""
    quote = None
    for ch in line:
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch == "#":
            return
        else:
            yield ch


def key_lines(text: str) -> dict[tuple, int]:
    """Every table header and key in `text`, by key path, with its 1-based line."""
    lines: dict[tuple, int] = {}
    array_counts: dict[tuple, int] = {}
    table: tuple = ()
    depth = 0  # open brackets/braces of a multi-line value
    for number, line in enumerate(text.splitlines(), start=1):
        if depth == 0:
            if match := _ARRAY_TABLE.match(line):
                names = _split_dotted(match.group(1))
                table = _resolve_array_parents(names[:-1], array_counts)
                array_key = table + (names[-1],)
                index = array_counts.get(array_key, 0)
                array_counts[array_key] = index + 1
                table = array_key + (index,)
                lines.setdefault(array_key, number)
                lines[table] = number
                continue
            if match := _TABLE.match(line):
                table = _resolve_array_parents(_split_dotted(match.group(1)), array_counts)
                lines.setdefault(table, number)
                continue
            if match := _KEY_VALUE.match(line):
                lines.setdefault(table + tuple(_split_dotted(match.group(1))), number)
        for ch in _code_chars(line):
            if ch in "[{":
                depth += 1
            elif ch in "]}":
                depth = max(0, depth - 1)
    return lines


def _resolve_array_parents(names: list[str], array_counts: dict[tuple, int]) -> tuple:
    """A header like [suite.config] refers to the last element of array `suite`."""
    path: tuple = ()
    for name in names:
        path += (name,)
        if path in array_counts:
            path += (array_counts[path] - 1,)
    return path


def line_of(lines: dict[tuple, int], path: tuple) -> int | None:
    """Line of `path`, or of its closest recorded ancestor."""
    path = tuple(path)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None
