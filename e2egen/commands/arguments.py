"""What the subcommands share: exit statuses and argparse helpers (argument types, the catalogue argument).

The commands import this, never e2egen.cli: the CLI imports the commands, not the reverse.
"""
from __future__ import annotations

import argparse
import math

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
