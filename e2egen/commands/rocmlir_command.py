"""e2egen import-rocmlir FILE.toml [-o OUT.toml]: convert a rocMLIR e2e catalogue into this project's.

The catalogue goes to OUT (or stdout); the report of what could not be
mapped goes to stderr and, as comments, to the top of the catalogue. Exit 0
even with unmapped items (they are reported); 2 for a missing, invalid or
non-rocMLIR file.
"""
from __future__ import annotations

import sys
from pathlib import Path

from e2egen.files import write_text_atomically
from e2egen.commands.arguments import EXIT_OK
from e2egen.errors import UsageError
from e2egen.generator.rocmlir import NOT_IMPORTED, Conversion, convert_file


def register(sub) -> None:
    p = sub.add_parser(
        "import-rocmlir",
        help="convert a rocMLIR e2e catalogue (mlir/test/e2e/*.toml) into an e2egen catalogue",
        description="Convert a rocMLIR e2e catalogue into an e2egen catalogue; what has no equivalent is reported "
                    "on stderr and at the top of the output.",
    )
    p.add_argument("source", metavar="FILE.toml", help="the rocMLIR catalogue, e.g. PrResnet50.toml")
    p.add_argument("-o", "--out", metavar="OUT.toml", default=None, help="write the catalogue here (default: stdout)")
    p.set_defaults(handler=import_rocmlir)


def import_rocmlir(args) -> int:
    if args.out and Path(args.out).resolve() == Path(args.source).resolve():
        raise UsageError(f"{args.out}: the output would overwrite the rocMLIR catalogue it is converted from")
    conversion = convert_file(args.source)
    if not conversion.suites:
        _print_report(conversion, args.source)
        raise UsageError(f"{args.source}: nothing could be imported (see the notes above)")
    text = conversion.to_toml()
    if args.out is None:
        sys.stdout.write(text)
    else:
        _write(Path(args.out), text)
    _print_report(conversion, args.source)
    _print_summary(conversion, args.out)
    return EXIT_OK


def _write(path: Path, text: str) -> None:
    try:
        write_text_atomically(path, text)
    except OSError as err:
        raise UsageError(f"{path}: cannot write the catalogue: {err.strerror}")


def _print_report(conversion: Conversion, source: str) -> None:
    for line in conversion.report(source):
        print(line, file=sys.stderr)


def _print_summary(conversion: Conversion, out: str | None) -> None:
    configs = sum(len(s.configs) for s in conversion.suites)
    dropped = len(conversion.notes_of(NOT_IMPORTED))
    where = out or "stdout"
    print(f"{where}: {len(conversion.suites)} suites, {configs} configs from {conversion.source_name}; "
          f"{dropped} item{'' if dropped == 1 else 's'} not imported (listed above and at the top of the catalogue)", file=sys.stderr)
