"""e2egen calibrate | select: close the loop nightly -> tolerances and PR subset -> PR CI."""
from __future__ import annotations

import argparse
from pathlib import Path

from e2egen.commands.arguments import EXIT_OK, catalogue_argument, number_above, whole_number
from e2egen.commands.nightly_commands import run_id_argument
from e2egen.errors import UsageError
from e2egen.nightly.errors import NightlyError
from e2egen.nightly.store import DEFAULT_STORE


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="propose tolerances from the nightly runs (and write them with --write)",
        description="For every tolerance the catalogue's cases resolve, take the values observed over the chosen "
                    "nightly runs and propose observed maximum x margin, rounded up to 1, 2 or 5 x 10^k, never below "
                    "the floor the output format imposes. Prints a table (level, metric, current, observed, "
                    "proposed, headroom, flags); --write edits the catalogue in place, keeping comments and "
                    "formatting. Cases without enough evidence are reported, never guessed. "
                    "Exit status: 0 ok, 2 user error.")
    _evidence_arguments(p, default_runs=3)
    p.add_argument("--margin", type=number_above(1, inclusive=True, finite=True), default=2.0, metavar="X",
                   help="proposal = observed maximum x X, rounded up (default: 2)")
    p.add_argument("--band", type=number_above(1, inclusive=True, finite=True), default=10.0, metavar="X",
                   help="a group of cases gets its own override when the tolerance it inherits is more than X times "
                        "looser than it needs (default: 10; 1 = every group exactly)")
    p.add_argument("--write", action="store_true", help="edit the catalogue in place (and print the diff)")
    p.add_argument("--diff", action="store_true", help="print the diff --write would make, write nothing")
    p.set_defaults(handler=calibrate)

    p = sub.add_parser(
        "select", help="choose the PR subset: pairwise coverage, then low headroom and recent failures, within a budget",
        description="Choose the cases PR CI runs: first every value of every axis and every pair of values across "
                    "op, dtype, direction and layout (pairwise coverage), then the cases with the least headroom "
                    "(value / tolerance closest to 1) and those that failed in recent nightlies, within a time "
                    "budget priced with the durations recorded on the device (else FLOPs). Writes the selection "
                    "file the generator reads. Exit status: 0 ok, 2 user error.")
    _evidence_arguments(p, default_runs=3, runs_only=True)
    p.add_argument("--budget", default="5m", type=_budget, metavar="TIME",
                   help="serial test time the PR subset may take: 300s, 5m, 1h30m, or seconds (default: 5m); 0 "
                        "chooses no case, leaving only those the catalogue marks pr = true")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="the device PR CI runs on: whose recorded durations price the cases (default: cpu)")
    p.add_argument("--out", default=None, metavar="PATH",
                   help="selection file (default: the catalogue's pr_selection, else pr_selection.toml beside it)")
    p.set_defaults(handler=select)


def _evidence_arguments(p, default_runs: int, runs_only: bool = False) -> None:
    catalogue_argument(p, positional=False)
    p.add_argument("--store", default=DEFAULT_STORE, metavar="PATH", help=f"results store (default: {DEFAULT_STORE})")
    p.add_argument("--runs", type=whole_number(1), default=None, metavar="N",
                   help=f"learn from the N latest runs (default: {default_runs})")
    if not runs_only:
        p.add_argument("run_ids", nargs="*", type=run_id_argument, metavar="RUN_ID", help="learn from these runs instead")
    p.set_defaults(default_runs=default_runs)




def _budget(text: str) -> float:
    from e2egen.nightly.pr_select import parse_budget

    try:
        return parse_budget(text)
    except NightlyError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--budget: ")) from None


def _open_store(path: str):
    from e2egen.nightly.store import Store

    return Store(path, create=False)


def calibrate(args) -> int:
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue
    from e2egen.nightly import calibrate as cal
    from e2egen.nightly.evidence import load_evidence

    if args.run_ids and args.runs is not None:
        raise UsageError("give --runs N or RUN_IDs, not both")
    if args.write and args.diff:
        raise UsageError("give --write or --diff, not both")
    catalogue = load_catalogue(args.catalogue)
    cases = expand(catalogue)
    with _open_store(args.store) as store:
        evidence = load_evidence(store, args.runs or args.default_runs, args.run_ids)
    result = cal.calibrate(catalogue, cases, evidence, margin=args.margin, band=args.band)
    print(f"calibrate {args.catalogue} from {args.store}")
    print(cal.format_table(result), end="")
    print(cal.summary(result), end="")
    if (args.write or args.diff) and result.changes:
        text = cal.write_catalogue(args.catalogue, catalogue, result, dry_run=not args.write)
        print(text, end="")
        if args.write:
            print(f"{args.catalogue}: written ({len(result.changes)} changes)")
    elif args.write:
        print(f"{args.catalogue}: nothing to change")
    return EXIT_OK


def select(args) -> int:
    from e2egen.files import write_text_atomically
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue
    from e2egen.nightly import pr_select
    from e2egen.nightly.evidence import load_evidence

    catalogue = load_catalogue(args.catalogue)
    cases = expand(catalogue)
    out = Path(args.out) if args.out else Path(args.catalogue).parent / (catalogue.pr_selection_path or "pr_selection.toml")
    with _open_store(args.store) as store:
        evidence = load_evidence(store, args.runs or args.default_runs, allow_empty=True)
        prices = pr_select.price_cases(store, cases, args.device)
    selection = pr_select.select(cases, evidence, prices, args.budget)
    text = pr_select.render(selection, budget_text=f"{_budget_text(args.budget)} on {args.device}",
                            catalogue=args.catalogue)
    write_text_atomically(out, text)  # whole or not at all; OutputError (exit 2) naming it when it cannot be written
    print(pr_select.report(selection))
    print(f"{out}: {len(selection.chosen)} cases selected")
    if not catalogue.pr_selection_path or Path(args.catalogue).parent / catalogue.pr_selection_path != out:
        print(f"note: {args.catalogue} does not name {out} as its pr_selection; the generator reads "
              f"{catalogue.pr_selection_path or 'no selection file'}")
    return EXIT_OK


def _budget_text(seconds: float) -> str:
    from e2egen.nightly.pr_select import format_seconds

    return format_seconds(seconds)
