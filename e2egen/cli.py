"""The `e2egen` command: validate, gen, list, run, import-rocmlir.

Exit status: 0 success, 1 a case failed, 2 a user error (bad catalogue,
unknown case id, bad argument), always with a message and no traceback.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Sequence

from e2egen.generator.errors import CatalogueError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad argument found after parsing (unknown case id, unreadable file)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except CatalogueError as err:
        for problem in err.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="e2egen", description="Declarative end-to-end numerics tests for compute kernels.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from e2egen import commands  # each module adds its subcommands

    for module in commands.MODULES:
        module.register(sub)
    return parser


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


def existing_file(path: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{path}: no such file")
    return p


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
