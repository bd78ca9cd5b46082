"""What the subcommands share: exit statuses and argparse helpers (argument types, the catalogue argument).

The commands import this, never e2egen.cli: the CLI imports the commands, not the reverse.

Some options follow one rule in every command, whatever command declares them: a seed is an integer in
[0, 2**64) (`seed`), and a path a command writes must be writable before anything runs (`output_path`).
OPTION_RULES says which options those are; `apply_option_rules` gives them their types once every command
is registered, so a bad value is an argparse error (usage, `error: argument --seed: ...`, exit 2).

A number on a command line is plain ASCII (parse_integer, parse_real): every `type=int` and `type=float`
becomes `integer` and `real`, whole_number and number_above read through them, and a number type of another
module (PLAIN_NUMBERS) has its text checked first; "1_0", " 3" and other scripts' digits are usage errors.

Two outputs of one command are never one file (however named): a UsageError naming both, before it runs.

No command overwrites a file it reads. COMMAND_INPUTS says which files each command reads; before the
command runs, an output option that names one of them (however: a relative path, a symbolic link, a hard
link) is a UsageError naming both (exit 2), and while it runs every writer (e2egen.files, the results store)
refuses those files too, so an output chosen by default or written into an output directory is covered.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
from pathlib import Path

from e2egen.files import same_file

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def catalogue_argument(parser: argparse.ArgumentParser, positional: bool = True) -> None:
    if positional:
        parser.add_argument("catalogue", nargs="?", default="configs.toml", help="catalogue file (default: configs.toml)")
    else:
        parser.add_argument("--catalogue", "-c", default="configs.toml", help="catalogue file (default: configs.toml)")


# How a number is written on a command line: plain ASCII, as a user means it. Not what int() and float() also
# take: digit separators ("1_0" is not 10), spaces around, other scripts' digits ("٣", full-width "３").
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_REAL_TEXT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)


def parse_integer(text: str) -> int | None:
    """A command line's integer (optional sign, ASCII digits), or None when `text` is not one."""
    return int(text) if _INTEGER_TEXT.fullmatch(text) else None


def parse_real(text: str) -> float | None:
    """A command line's number (decimal, exponent; inf and nan for the option's own rule to refuse), or None.
    -0 reads as 0.0: a value printed back never says "-0.0"."""
    return float(text) + 0.0 if _REAL_TEXT.fullmatch(text) else None


def whole_number(minimum: int):
    """An argparse type: an integer >= minimum."""

    def parse(text: str) -> int:
        value = parse_integer(text)
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value

    return parse


def integer(text: str) -> int:
    """An argparse type: any integer, written plainly (what `type=int` becomes in every command)."""
    value = parse_integer(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected an integer (ASCII digits, an optional sign), got {text!r}")
    return value


def real(text: str) -> float:
    """An argparse type: any number, written plainly (what `type=float` becomes in every command)."""
    value = parse_real(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number (like 3, 0.5 or 1e-3), got {text!r}")
    return value


def plain_number(parse):
    """An argparse type: another module's number type `parse` (a budget '5m' or '300'), given only text a user
    means: ASCII, without spaces or digit separators; -0 reads as 0."""

    def checked(text: str):
        if not text.isascii() or "_" in text or any(ch.isspace() for ch in text):
            raise argparse.ArgumentTypeError(f"expected ASCII digits and units without spaces or '_', got {text!r}")
        value = parse(text)
        return value + 0.0 if isinstance(value, float) else value

    checked.__name__ = getattr(parse, "__name__", "number")
    checked.plain = True
    return checked


def number_above(minimum: float, inclusive: bool = False, finite: bool = False):
    """An argparse type: a float > minimum (>= with inclusive; no inf with finite)."""

    def parse(text: str) -> float:
        value = parse_real(text)
        value = math.nan if value is None else value
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
    parse.output_kind = kind  # apply_option_rules: which options are outputs
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
    "init": {"DIR": output_path("directory")},  # a positional, named by its metavar
}
EVERY_COMMAND: dict[str, object] = {"--seed": seed}
# Numbers a type of another module reads (e2egen select's --budget: nightly's parse_budget): its text is checked
# here first, as every other number is (parse_integer, parse_real); `type=int` and `type=float` become
# `integer` and `real` in every command.
PLAIN_NUMBERS: dict[str, tuple[str, ...]] = {"select": ("--budget",)}
PLAIN_TYPES = {int: integer, float: real}


def _files(*names: str):
    """The files a command reads: the values of these argparse dests (a list, a single path, or None)."""

    def inputs(args) -> list[str]:
        found = []
        for name in names:
            value = getattr(args, name, None)
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, str) and item:
                    found.append(item)
        return found

    return inputs


def _merge_inputs(args) -> list[str]:
    """merge reads its inputs; one that is the target store itself (its latest run) is read and updated, by design."""
    from e2egen.nightly.store import is_sqlite_file

    store = getattr(args, "store", None)
    found = []
    for text in args.inputs:
        path = text.partition("#")[0]
        if path and not (store and same_file(path, store) and is_sqlite_file(path)):
            found.append(path)
    return found


# command -> the files it reads. calibrate's catalogue is not among them: `calibrate --write` edits it in
# place, on purpose; nightly's and merge's store is read and updated, not overwritten.
COMMAND_INPUTS: dict[str, object] = {
    "gen": _files("catalogue"),
    "nightly": _files("catalogue"),
    "merge": _merge_inputs,
    "report": _files("store"),
    "select": _files("catalogue", "store"),
    "calibrate": _files("store"),
    "study": _files("study"),
    "arithmetic": _files("catalogue"),
    "import-rocmlir": _files("sources"),
    "init": _files(),  # its starter files are e2egen's package data, never a user's file
}


def _same_path(a: str, b: str) -> bool:
    """Whether two paths name one file, existing or to be created: a link or a relative path is the file it names."""
    if same_file(a, b):
        return True
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def check_outputs_differ(args, outputs: dict[str, tuple[str, str]]) -> None:
    """UsageError naming both when two output options (dest -> (option, kind)) name one path, a file at least one
    of them: the second write would replace the first. (Two output directories may be one: each writes its files.)"""
    from e2egen.errors import UsageError

    given = [(option, kind, value) for dest, (option, kind) in outputs.items()
             if isinstance(value := getattr(args, dest, None), str) and value]
    for i, (option, kind, value) in enumerate(given):
        for other, other_kind, other_value in given[:i]:
            if "file" in (kind, other_kind) and _same_path(value, other_value):
                raise UsageError(f"{other} {other_value} and {option} {value} are the same file: one output would "
                                 "overwrite the other; give them different paths")


def check_outputs_are_not_inputs(command: str, args, outputs: dict[str, str]) -> list[str]:
    """The files `command` reads; UsageError naming both when an output option (dest -> option) names one."""
    from e2egen.errors import UsageError

    inputs = COMMAND_INPUTS.get(command, _files())(args)
    for dest, option in outputs.items():
        value = getattr(args, dest, None)
        if not isinstance(value, str) or not value:
            continue
        for source in inputs:
            if same_file(value, source):
                raise UsageError(f"{option} {value} is {source}, a file `e2egen {command}` reads; writing it would "
                                 "overwrite that input: give another output path")
    return inputs


def _guarded(command: str, handler, outputs: dict[str, tuple[str, str]]):
    """`handler` with the rules above: outputs checked before it runs (none the same file as another, none an
    input), the inputs protected while it runs."""
    from e2egen.files import reading

    def run(args):
        check_outputs_differ(args, outputs)
        inputs = check_outputs_are_not_inputs(command, args, {dest: option for dest, (option, _) in outputs.items()})
        with reading(*inputs):
            return handler(args)

    run.__name__ = getattr(handler, "__name__", "handler")
    run.__wrapped__ = handler
    return run


def apply_option_rules(subparsers: argparse._SubParsersAction) -> None:
    """Give the options OPTION_RULES and EVERY_COMMAND name their types, in every registered command.

    Also: no command overwrites a file it reads (COMMAND_INPUTS; checked before, and while, the command runs).
    """
    for command, parser in subparsers.choices.items():
        rules = {**EVERY_COMMAND, **OPTION_RULES.get(command, {})}
        outputs: dict[str, tuple[str, str]] = {}
        for action in parser._actions:
            for option in action.option_strings or [action.metavar or action.dest]:
                if option in rules:
                    action.type = rules[option]
                if option in PLAIN_NUMBERS.get(command, ()) and not getattr(action.type, "plain", False):
                    action.type = plain_number(action.type)
            action.type = PLAIN_TYPES.get(action.type, action.type)
            if getattr(action.type, "output_kind", None) is not None:
                name = action.option_strings[-1] if action.option_strings else action.metavar or action.dest
                outputs[action.dest] = (name, action.type.output_kind)
        handler = parser.get_default("handler")
        if handler is not None and not hasattr(handler, "__wrapped__"):
            parser.set_defaults(handler=_guarded(command, handler, outputs))
