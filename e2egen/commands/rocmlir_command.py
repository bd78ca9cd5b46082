"""e2egen import-rocmlir FILE.toml... : convert rocMLIR e2e catalogues into this project's.

One file: the catalogue goes to -o OUT (or stdout). Several files: each
catalogue goes to --out-dir DIR as <name>.e2e.toml (or is only summarized).
The report of what could not be mapped goes to stderr and, as comments, to
the top of each catalogue; --summary writes the per-file coverage as JSON,
--summary-md as the Markdown page docs/evidence/rocmlir-import.md is.

Exit status: 0 when every file imported something (unmapped items are
reported, not errors); 3 (EXIT_NOTHING_IMPORTED) when a file imported
nothing, or (several files) could not be read, the other files still
written; 2 for a bad command line or, with one file, a missing, invalid or
non-rocMLIR file (nothing written).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from e2egen.commands.arguments import EXIT_OK
from e2egen.errors import UsageError, UserError
from e2egen.files import describe_os_error, write_text_atomically
from e2egen.generator.cases import expand
from e2egen.generator.errors import CatalogueError
from e2egen.generator.loader import parse_catalogue
from e2egen.invocation import shell_quote
from e2egen.generator.rocmlir import DEFAULT_F8, DEFAULT_VERDICT, F8_FAMILIES, NOT_IMPORTED, VERDICTS, Conversion, convert_file
from e2egen.generator.rocmlir_summary import FileSummary, summarize, to_markdown

EXIT_NOTHING_IMPORTED = 3


def register(sub) -> None:
    p = sub.add_parser(
        "import-rocmlir",
        help="convert rocMLIR e2e catalogues (mlir/test/e2e/*.toml) into e2egen catalogues",
        description="Convert rocMLIR e2e catalogues into e2egen catalogues; what has no equivalent is reported "
                    "on stderr and at the top of each output. Exit 0: every file imported something; 3: some file "
                    "imported nothing (or, of several, could not be read), the rest written; 2: bad arguments or "
                    "(one file) an unreadable file.",
    )
    p.add_argument("sources", metavar="FILE.toml", nargs="+", help="rocMLIR catalogues, e.g. PrResnet50.toml")
    p.add_argument("-o", "--out", metavar="OUT.toml", default=None,
                   help="write the catalogue here (one FILE only; default: stdout)")
    p.add_argument("--out-dir", metavar="DIR", default=None,
                   help="write each catalogue here as <name>.e2e.toml (any number of FILEs)")
    p.add_argument("--summary", metavar="SUMMARY.json", default=None,
                   help="write per-file coverage (rocMLIR cases, expressed, not expressed by reason) as JSON")
    p.add_argument("--summary-md", metavar="SUMMARY.md", default=None,
                   help="write the same coverage as a Markdown page (docs/evidence/rocmlir-import.md)")
    p.add_argument("--fp8", choices=tuple(F8_FAMILIES), default=DEFAULT_F8,
                   help="what rocMLIR's fp8/bf8 (the chip's fp8 formats; the catalogues' chip is %%arch) become "
                        "where no --force-f8-types says: ocp = f8e4m3fn/f8e5m2 (gfx950, gfx12), fnuz = "
                        "f8e4m3fnuz/f8e5m2fnuz (gfx942, older rocmlir-gen), both = a case of each "
                        f"(default: {DEFAULT_F8})")
    p.add_argument("--verdict", choices=tuple(VERDICTS), default=DEFAULT_VERDICT,
                   help="which verdict fails an imported case: both (either failing), rocmlir (rocMLIR's own "
                        "verifier, emulated), e2egen (e2egen's model); the other is reported beside it "
                        f"(default: {DEFAULT_VERDICT})")
    p.set_defaults(handler=import_rocmlir)


def import_rocmlir(args) -> int:
    _check_arguments(args)
    several = len(args.sources) > 1
    summaries = [_import_one(source, args, several) for source in args.sources]
    summary = summarize(summaries)
    if args.summary:
        _write(Path(args.summary), json.dumps(summary, indent=2) + "\n", "the summary")
    if args.summary_md:
        _write(Path(args.summary_md), to_markdown(summary, _command_line(args)), "the summary")
    if several:
        totals = summary["totals"]
        print(f"{totals['files']} files: {totals['files_imported']} imported, {totals['files_nothing_imported']} with "
              f"nothing to import, {totals['files_unreadable']} unreadable; {totals['expressed']:,} of "
              f"{totals['rocmlir_cases']:,} rocMLIR cases expressed ({totals['expressed_percent']} %)", file=sys.stderr)
    return EXIT_OK if all(s.imported for s in summaries) else EXIT_NOTHING_IMPORTED


def _check_arguments(args) -> None:
    if args.out and len(args.sources) > 1:
        raise UsageError(f"-o {args.out}: one output file for {len(args.sources)} catalogues; use --out-dir DIR")
    if args.out and args.out_dir:
        raise UsageError("-o and --out-dir: give one of them")
    # An output that is one of the sources: refused by the rule every command follows (arguments.COMMAND_INPUTS).


def _import_one(source: str, args, several: bool) -> FileSummary:
    name = Path(source).name
    try:
        conversion = convert_file(source, args.fp8, args.verdict)
    except CatalogueError as err:
        if not several:
            raise
        for line in err.lines():
            print(f"error: {line}", file=sys.stderr)
        return FileSummary.unreadable(name, "; ".join(p.message for p in err.problems))
    _print_report(conversion, source)
    if not conversion.suites:
        print(f"{source}: nothing could be imported (see the notes above); no catalogue written", file=sys.stderr)
        return FileSummary.of(name, conversion, 0)
    text = conversion.to_toml()
    cases = len(expand(parse_catalogue(text, f"{name} (imported)")))
    out = args.out or (str(Path(args.out_dir) / f"{Path(source).stem}.e2e.toml") if args.out_dir else None)
    if out is not None:
        _write(Path(out), text, "the catalogue")
    elif not several:
        sys.stdout.write(text)
    _print_counts(conversion, out or ("stdout" if not several else None), cases)
    return FileSummary.of(name, conversion, cases)


def _write(path: Path, text: str, what: str) -> None:
    try:
        write_text_atomically(path, text)
    except UserError:  # OutputError: names the file and says why, in one line
        raise
    except OSError as err:
        raise UsageError(f"{path}: cannot write {what}: {describe_os_error(err)}") from None


def _command_line(args) -> str:
    """The command as a user would type it again (sources shortened to their directory's glob when many)."""
    sources = args.sources
    folders = {str(Path(s).parent) for s in sources}
    shown = [f"{folders.pop()}/*.toml"] if len(sources) > 3 and len(folders) == 1 else sources
    parts = ["e2egen", "import-rocmlir", *shown]
    fp8 = args.fp8 if args.fp8 != DEFAULT_F8 else None
    for flag, value in (("--out-dir", args.out_dir), ("--summary", args.summary), ("--summary-md", args.summary_md),
                        ("--fp8", fp8)):
        if value:
            parts += [flag, value]
    return " ".join(p if p.endswith("*.toml") else shell_quote(p) for p in parts)


def _print_report(conversion: Conversion, source: str) -> None:
    for line in conversion.report(source):
        print(line, file=sys.stderr)


def _print_counts(conversion: Conversion, out: str | None, cases: int) -> None:
    configs = sum(len(s.configs) for s in conversion.suites)
    dropped = len(conversion.notes_of(NOT_IMPORTED))
    expressed = sum(c.expressed for c in conversion.cases)
    where = f"{out}: " if out else ""
    print(f"{where}{len(conversion.suites)} suites, {configs} configs, {cases} cases from {conversion.source_name} "
          f"({expressed} of {len(conversion.cases)} rocMLIR cases expressed); {dropped} item{'' if dropped == 1 else 's'} "
          f"not imported (listed above and at the top of the catalogue)", file=sys.stderr)
