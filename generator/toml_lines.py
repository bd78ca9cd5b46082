"""Map TOML key paths to source lines, because tomllib reports none.

A key path is a tuple of table keys and array-of-table indices, e.g.
("suite", 2, "config", 0, "kernel"). Only lines that start a key or a table
are recorded; a lookup falls back to the closest recorded ancestor, which is
how values inside inline tables and arrays get the line of their key.

Lines are read with a small lexer that knows TOML's four kinds of strings
(basic and literal, one-line and multi-line) and comments, so a `[[suite]]`
written inside a multi-line description, or a `#` or bracket inside a string,
is text, not structure.
"""
from __future__ import annotations

import re
from typing import Iterator

_KEY_PART = r'(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')'
_DOTTED_KEY = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_TABLE = re.compile(rf"^\s*\[\s*({_DOTTED_KEY})\s*\]")
_ARRAY_TABLE = re.compile(rf"^\s*\[\[\s*({_DOTTED_KEY})\s*\]\]")
_KEY_VALUE = re.compile(rf"^\s*({_DOTTED_KEY})\s*=")

_MULTI_LINE = ('"""', "'''")


def _split_dotted(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(_KEY_PART, dotted)]


def _scan(line: str, string: str | None, depth: int) -> tuple[str | None, int, int]:
    """Read one line from lexer state (the open string's delimiter or None; open brackets/braces).

    Returns the state at the line's end and the deepest bracket depth reached on it.
    """
    deepest = depth
    i, n = 0, len(line)
    while i < n:
        if string is None:
            ch = line[i]
            if ch == "#":
                break
            if line.startswith(_MULTI_LINE, i):
                string = line[i:i + 3]
                i += 3
                continue
            if ch in "\"'":
                string = ch
            elif ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}":
                depth = max(0, depth - 1)
            i += 1
            continue
        if string[0] == '"' and line[i] == "\\":  # basic strings escape the next character
            i += 2
            continue
        if line.startswith(string, i):
            i += len(string)
            if string in _MULTI_LINE:  # up to two quotes of the content may touch the closing delimiter
                while i < n and line[i] == string[0]:
                    i += 1
            string = None
            continue
        i += 1
    if string is not None and string not in _MULTI_LINE:
        string = None  # a one-line string cannot go on to the next line (tomllib reports that)
    return string, depth, deepest


def _code_lines(text: str) -> Iterator[tuple[int, str, bool, int]]:
    """(line number, line, whether the line starts outside strings and brackets, deepest bracket depth on it)."""
    string: str | None = None
    depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        at_top = string is None and depth == 0
        string, depth, deepest = _scan(line, string, depth)
        yield number, line, at_top, deepest


def key_lines(text: str) -> dict[tuple, int]:
    """Every table header and key in `text`, by key path, with its 1-based line."""
    lines: dict[tuple, int] = {}
    array_counts: dict[tuple, int] = {}
    table: tuple = ()
    for number, line, at_top, _ in _code_lines(text.removeprefix("\ufeff")):
        if not at_top:
            continue
        if match := _ARRAY_TABLE.match(line):
            names = _split_dotted(match.group(1))
            table = _resolve_array_parents(names[:-1], array_counts)
            array_key = table + (names[-1],)
            index = array_counts.get(array_key, 0)
            array_counts[array_key] = index + 1
            table = array_key + (index,)
            lines.setdefault(array_key, number)
            lines[table] = number
        elif match := _TABLE.match(line):
            table = _resolve_array_parents(_split_dotted(match.group(1)), array_counts)
            lines.setdefault(table, number)
        elif match := _KEY_VALUE.match(line):
            lines.setdefault(table + tuple(_split_dotted(match.group(1))), number)
    return lines


def deepest_line(text: str) -> int | None:
    """The first line where arrays and inline tables are nested deepest (None when nothing is nested)."""
    best, best_line = 0, None
    for number, _, _, deepest in _code_lines(text.removeprefix("\ufeff")):
        if deepest > best:
            best, best_line = deepest, number
    return best_line


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
