"""The `e2egen` command: validate, gen, list, run, import-rocmlir.

Exit status: 0 success, 1 a case failed, 2 a user error (bad catalogue,
unknown case id, bad argument), always with a message and no traceback;
130 interrupted; 141 (128 + SIGPIPE, as a killed Unix tool) when the
reader of the output went away (`e2egen list | head -1`), silently.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from e2egen.commands.arguments import EXIT_USAGE, apply_option_rules
from e2egen.errors import UserError
from e2egen.notices import format_notices

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    format_notices()
    args = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        return args.handler(args)
    except UserError as err:  # every user error, from any layer: its lines, no traceback
        for line in err.lines():
            print(f"error: {line}", file=sys.stderr)
        if getattr(args, "json", False):  # and the document a script reads
            from e2egen.json_output import emit_error

            emit_error(err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout's reader closed it: nobody reads what is left
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as err:
        if err.filename is None:  # not about a path the user gave: a fault of e2egen's, with its traceback
            raise
        # A path the user gave that no file operation can take (a name too long, a missing directory, ...),
        # from whichever command or check met it first: one line naming it, as a user error.
        print(f"error: {os_error_line(err)}", file=sys.stderr)
        return EXIT_USAGE


def os_error_line(err: OSError) -> str:
    """"PATH: why" for an OSError about a path (both paths of a rename or link)."""
    import errno

    from e2egen.files import describe_os_error

    reason = "no such file or directory" if err.errno == errno.ENOENT else describe_os_error(err)
    paths = [os.fsdecode(p) for p in (err.filename, err.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}"


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit does not fail once more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced by an object without a file (tests)
        pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="e2egen", description="Declarative end-to-end numerics tests for compute kernels.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from e2egen import commands  # each module adds its subcommands

    for module in commands.MODULES:
        module.register(sub)
    apply_option_rules(sub)  # seeds and output paths: one rule in every command
    return parser


def installed_version() -> str:
    """The version pip installed (pyproject.toml's), or a note saying e2egen runs uninstalled from a checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("e2egen")
    except PackageNotFoundError:
        return "(not installed: running from a source tree)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
