"""Typed reading of parsed TOML that collects problems instead of stopping at the first.

The catalogue loader and the study-file loader both build on TomlReader, so
every user file gets the same messages: file:line, key path, bad value,
valid choices.
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from e2egen.generator.errors import CatalogueError, Location, Problem, unknown
from e2egen.generator.toml_lines import deepest_line, line_of, source_lines

NAME_HELP = "letters, digits, '_', '.', '+', '-'; starting with a letter or digit"
BOM = "\ufeff"  # a UTF-8 byte-order mark, as some editors write one: accepted and dropped


def read_toml_text(path: str | Path, what: str = "catalogue") -> str:
    """A user's TOML file as text, or a CatalogueError naming the file (and the line of a byte that is not UTF-8).

    TOML is UTF-8; a leading byte-order mark is dropped. `what` names the file in messages.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CatalogueError([unreadable(path, err, what)]) from None
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as err:
        raise CatalogueError([unreadable(path, err, what)]) from None


def unreadable(path: str | Path, err: OSError | UnicodeDecodeError, what: str) -> Problem:
    """The problem of a file that cannot be read as text: a directory, missing, not allowed, not UTF-8."""
    if isinstance(err, UnicodeDecodeError):
        data = err.object
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        return Problem(Location(str(path), line), "",
                       f"the {what} is not UTF-8 text (byte 0x{data[err.start]:02x} at column {column}); TOML files are UTF-8")
    if isinstance(err, IsADirectoryError) or Path(path).is_dir():
        return Problem(Location(str(path)), "", f"cannot read the {what}: it is a directory, not a file")
    if isinstance(err, FileNotFoundError) and what == "catalogue":  # likely a newcomer's first command, in a new folder
        return Problem(Location(str(path)), "", f"cannot read the catalogue: no such file; `e2egen init` writes a "
                                                f"starter one (configs.toml, with a kernel stub and CI workflows) to start from")
    return Problem(Location(str(path)), "", f"cannot read the {what}: {err.strerror or err}")


def parse_toml(text: str, path: str) -> dict:
    """tomllib.loads, with a syntax error turned into a CatalogueError at its line.

    tomllib says "(at line L, column C)" or "(at end of document)"; both become a line. A leading
    byte-order mark is dropped; arrays nested deeper than tomllib can follow are a message, not a
    RecursionError.
    """
    text = text.removeprefix(BOM)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        match = re.search(r"line (\d+)", str(err))
        line = int(match.group(1)) if match else max(1, len(source_lines(text)))
        raise CatalogueError([Problem(Location(path, line), "", f"invalid TOML: {err}")]) from None
    except RecursionError:
        raise CatalogueError([Problem(Location(path, deepest_line(text)), "",
                                      "invalid TOML: arrays or inline tables nested too deeply to read")]) from None


def key_text(path: tuple) -> str:
    """('suite', 0, 'config', 2, 'kernel') -> 'suite[0].config[2].kernel'."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def describe(value: Any) -> str:
    """A value as a message names it: 'a string ('x')', 'a list'."""
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}.get(type(value), type(value).__name__)
    if isinstance(value, (dict, list)):
        return kind if value else kind.replace("a ", "an empty ", 1)  # "expected a non-empty list, got an empty list"
    return f"{kind} ({value!r})"


class TomlReader:
    """Validates one parsed TOML document; `problems` holds what is wrong with it."""

    def __init__(self, path: str, lines: dict[tuple, int]):
        self.path = path
        self.lines = lines
        self.problems: list[Problem] = []

    def problem(self, key_path: tuple, message: str) -> None:
        self.problems.append(Problem(self.location(key_path), key_text(key_path), message))

    def location(self, key_path: tuple) -> Location:
        return Location(self.path, line_of(self.lines, key_path))

    def unknown_keys(self, table: Mapping, allowed: Iterable[str], key_path: tuple, kind: str = "key") -> None:
        allowed = tuple(allowed)
        for key in table:
            if key not in allowed:
                self.problem(key_path + (key,), unknown(kind, key, allowed))

    def table(self, value: Any, key_path: tuple) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(key_path, f"expected a table, got {describe(value)}")
            return {}
        return value

    def tables(self, value: Any, key_path: tuple, spelled: str | None = None) -> list[dict]:
        """An array of tables, [[name]] (`spelled`: how the catalogue writes it, e.g. "suite.config"); an element
        that is not a table is named by its index and what it is."""
        if value is None:
            return []
        header = f"[[{spelled or key_path[-1]}]]"
        if not isinstance(value, list):
            self.problem(key_path, f"expected {header} tables, got {describe(value)}")
            return []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                self.problem(key_path + (i,), f"expected a {header} table, got {describe(item)}")
        return value if all(isinstance(v, dict) for v in value) else []

    def string(self, value: Any, key_path: tuple, pattern: str | None = None, pattern_help: str = NAME_HELP) -> str | None:
        if not isinstance(value, str):
            self.problem(key_path, f"expected a string, got {describe(value)}")
            return None
        if pattern and not re.fullmatch(pattern, value):
            self.problem(key_path, f"{value!r} is not a valid name ({pattern_help})")
            return None
        return value

    def boolean(self, value: Any, key_path: tuple) -> bool | None:
        if not isinstance(value, bool):
            self.problem(key_path, f"expected true or false, got {describe(value)}")
            return None
        return value

    def integer(self, value: Any, key_path: tuple, minimum: int = 0) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(key_path, f"expected an integer, got {describe(value)}")
            return None
        if value < minimum:
            self.problem(key_path, f"expected an integer >= {minimum}, got {value}")
            return None
        return value

    def number(self, value: Any, key_path: tuple, minimum: float = 0.0, strict: bool = False) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.problem(key_path, f"expected a finite number, got {describe(value)}")
            return None
        if value < minimum or (strict and value == minimum):
            self.problem(key_path, f"expected a number {'>' if strict else '>='} {minimum}, got {value}")
            return None
        return value
