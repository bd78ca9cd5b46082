"""Map TOML key paths to source lines, because tomllib reports none.

A key path is a tuple of table keys and array-of-table indices, e.g.
("suite", 2, "config", 0, "kernel"). Lines that start a key or a table are
recorded, and the line each element of an array value starts on (a list written
over several lines names each entry at its own line); a lookup falls back to the
closest recorded ancestor, which is how values inside inline tables get the line
of their key.

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


def source_lines(text: str) -> list[str]:
    """`text`'s lines as TOML counts them: ended by LF or CRLF only. Not str.splitlines(), which also ends a line
    at U+2028, U+2029, U+0085, form feeds and lone CRs, characters TOML allows in comments and strings."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no line of its own
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _split_dotted(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(_KEY_PART, dotted)]


class _Lexer:
    """TOML's strings and comments, line after line: the characters of a line that are code."""

    def __init__(self) -> None:
        self.string: str | None = None  # the open string's delimiter

    def code(self, line: str, start: int = 0) -> Iterator[str]:
        """Each character of line[start:] outside strings and comments, a string's opening quote included."""
        i, n = start, len(line)
        while i < n:
            if self.string is None:
                ch = line[i]
                if ch == "#":
                    break
                yield ch
                if line.startswith(_MULTI_LINE, i):
                    self.string = line[i:i + 3]
                    i += 3
                    continue
                if ch in "\"'":
                    self.string = ch
                i += 1
                continue
            if self.string[0] == '"' and line[i] == "\\":  # basic strings escape the next character
                i += 2
                continue
            if line.startswith(self.string, i):
                i += len(self.string)
                if self.string in _MULTI_LINE:  # up to two quotes of the content may touch the closing delimiter
                    while i < n and line[i] == self.string[0]:
                        i += 1
                self.string = None
                continue
            i += 1
        if self.string is not None and self.string not in _MULTI_LINE:
            self.string = None  # a one-line string cannot go on to the next line (tomllib reports that)


def _code_lines(source: list[str]) -> Iterator[tuple[int, str, bool, int]]:
    """(line number, line, whether the line starts outside strings and brackets, deepest bracket depth on it)."""
    lexer, depth = _Lexer(), 0
    for number, line in enumerate(source, start=1):
        at_top = lexer.string is None and depth == 0
        deepest = depth
        for ch in lexer.code(line):
            if ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}":
                depth = max(0, depth - 1)
        yield number, line, at_top, deepest


def key_lines(text: str) -> dict[tuple, int]:
    """Every table header and key in `text`, by key path, with its 1-based line; and each element of an array
    value (path + (index,)), so an entry of a list written over several lines is named at its own line."""
    lines: dict[tuple, int] = {}
    array_counts: dict[tuple, int] = {}
    table: tuple = ()
    source = source_lines(text.removeprefix("\ufeff"))
    for number, line, at_top, _ in _code_lines(source):
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
            key = table + tuple(_split_dotted(match.group(1)))
            lines.setdefault(key, number)
            if line[match.end():].lstrip().startswith("["):
                for index, element_line in _element_lines(source, number - 1, match.end()).items():
                    lines.setdefault(key + (index,), element_line)
    return lines


def _element_lines(source: list[str], start: int, column: int) -> dict[int, int]:
    """The 1-based line each element of the array value starting at source[start][column:] begins on."""
    found: dict[int, int] = {}
    lexer, depth, expecting = _Lexer(), 0, False
    for number in range(start, len(source)):
        for ch in lexer.code(source[number], column if number == start else 0):
            if ch.isspace():
                continue
            if depth == 1 and expecting and ch not in ",]":
                found[len(found)] = number + 1
                expecting = False
            if ch in "[{":
                depth += 1
                expecting = expecting or depth == 1
            elif ch in "]}":
                depth -= 1
                if depth <= 0:
                    return found
            elif ch == "," and depth == 1:
                expecting = True
    return found


def deepest_line(text: str) -> int | None:
    """The first line where arrays and inline tables are nested deepest (None when nothing is nested)."""
    best, best_line = 0, None
    for number, _, _, deepest in _code_lines(source_lines(text.removeprefix("\ufeff"))):
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
    """Line of `path`, or of its closest recorded ancestor; for a table only its sub-tables' headers name
    (`[suite.x]` without `[suite]`), the first of those."""
    path = tuple(path)
    whole = path
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    if not whole:  # the document itself: no one line
        return None
    below = [line for key, line in lines.items() if key[:len(whole)] == whole and len(key) > len(whole)]
    return min(below) if below else None
