"""The `e2egen` command: validate, gen, list, run, import-rocmlir.

Exit status: 0 success, 1 a case failed, 2 a user error (bad catalogue,
unknown case id, bad argument), always with a message and no traceback.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from e2egen.commands.arguments import EXIT_USAGE
from e2egen.errors import UserError


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UserError as err:  # every user error, from any layer: its lines, no traceback
        for line in err.lines():
            print(f"error: {line}", file=sys.stderr)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
