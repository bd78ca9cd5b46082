"""What the subcommands share: exit statuses and argparse helpers (argument types, the catalogue argument).

The commands import this, never e2egen.cli: the CLI imports the commands, not the reverse.

Some options follow one rule in every command, whatever command declares them: a seed is an integer in
[0, 2**64) (`seed`), and a path a command writes must be writable before anything runs (`output_path`).
OPTION_RULES says which options those are; `apply_option_rules` gives them their types once every command
is registered, so a bad value is an argparse error (usage, `error: argument --seed: ...`, exit 2).
"""
from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def catalogue_argument(parser: argparse.ArgumentParser, positional: bool = True) -> None:
    if positional:
        parser.add_argument("catalogue", nargs="?", default="configs.toml", help="catalogue file (default: configs.toml)")
    else:
        parser.add_argument("--catalogue", "-c", default="configs.toml", help="catalogue file (default: configs.toml)")


def whole_number(minimum: int):
    """An argparse type: an integer >= minimum."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value

    return parse


def number_above(minimum: float, inclusive: bool = False, finite: bool = False):
    """An argparse type: a float > minimum (>= with inclusive; no inf with finite)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = value >= minimum if inclusive else value > minimum  # NaN fails either way
        if not ok or (finite and math.isinf(value)):
            raise argparse.ArgumentTypeError(f"expected a number {'>=' if inclusive else '>'} {minimum}, got {text!r}")
        return value

    return parse


def seed(text: str) -> int:
    """An argparse type: a seed, an integer in [0, 2**64) (the rule of e2egen.generator.cases.parse_seed)."""
    from e2egen.generator.cases import seed_argument

    return seed_argument(text)


def output_path(kind: str):
    """An argparse type: a path a command will write, a "directory" or a "file"; the text comes back unchanged.

    Refused: a file where a directory goes (or the reverse), a path under a file, a place where no file can be
    created (permissions, a read-only file system), an existing file that cannot be written.
    """
    if kind not in ("directory", "file"):
        raise ValueError(f"output_path kind must be 'directory' or 'file', got {kind!r}")

    def parse(text: str) -> str:
        problem = output_problem(Path(text), kind)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text

    parse.__name__ = f"output_{kind}"
    return parse


def output_problem(path: Path, kind: str) -> str | None:
    """Why `path` cannot be written as a `kind` ("directory" or "file"), or None."""
    if not str(path):
        return "expected a path, got ''"
    if path.exists():
        if kind == "directory" and not path.is_dir():
            return f"{path} is a file, not a directory"
        if kind == "file" and path.is_dir():
            return f"{path} is a directory, not a file"
    place = path if kind == "directory" and path.is_dir() else path.parent
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        return f"cannot create {path}: {place} is a file, not a directory"
    reason = _cannot_create_in(place)
    if reason:
        return f"cannot write {path}: no file can be created in {place} ({reason})"
    if kind == "file" and path.exists() and not os.access(path, os.W_OK):
        return f"cannot write {path}: the file is not writable"
    return None


def _cannot_create_in(directory: Path) -> str | None:
    """Why no file can be created in `directory` (tried: permissions alone miss read-only file systems and root)."""
    try:
        handle, name = tempfile.mkstemp(dir=directory, prefix=".e2egen-write-check-")
    except OSError as err:
        return err.strerror or str(err)
    os.close(handle)
    os.unlink(name)
    return None


# command -> option -> argparse type; `--seed` is a seed in every command that has one.
OPTION_RULES: dict[str, dict[str, object]] = {
    "gen": {"--out": output_path("directory")},
    "nightly": {"--out": output_path("directory"), "--store": output_path("file"),
                "--records-dir": output_path("directory"), "--reports-dir": output_path("directory")},
    "merge": {"--store": output_path("file")},
    "report": {"--out": output_path("directory")},
    "select": {"--out": output_path("file")},
    "study": {"--out": output_path("directory")},
    "arithmetic": {"--out": output_path("directory")},
    "import-rocmlir": {"--out": output_path("file"), "--out-dir": output_path("directory"),
                       "--summary": output_path("file"), "--summary-md": output_path("file")},
}
EVERY_COMMAND: dict[str, object] = {"--seed": seed}


def apply_option_rules(subparsers: argparse._SubParsersAction) -> None:
    """Give the options OPTION_RULES and EVERY_COMMAND name their types, in every registered command."""
    for command, parser in subparsers.choices.items():
        rules = {**EVERY_COMMAND, **OPTION_RULES.get(command, {})}
        for action in parser._actions:
            for option in action.option_strings:
                if option in rules:
                    action.type = rules[option]
